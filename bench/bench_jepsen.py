#!/usr/bin/env python3
"""kill -9 under acks=all load, for a long time: the Jepsen-style check of kctl.testing.jepsen with
hundreds of kills (tests/cluster/test_jepsen_kill.py is the short version CI runs).

Two idempotent acks=all writers (confluent-kafka and kctl's own producer, ``--rate`` records/s each)
write to a new topic of ``--partitions`` partitions. Before each fault the bench waits until every
writer has between 10 and ``--progress`` more acknowledgements (a seeded random number, so faults
land at different moments of the load), then:

- one broker (default): SIGKILL the broker and start it again on the same log directory;
- ``--cluster``: a 3-broker `LocalCluster` (its own ZooKeeper, RF=3, min.insync.replicas=2): SIGKILL
  the leader of a random partition, wait for a new leader, restart the old one once its registration
  is gone, wait for a full ISR; every ``--pause-every``-th fault instead SIGSTOPs a leader until a new
  one is elected and the writers have gone on without it, then SIGCONTs it.

Then the writers stop, the topic is read back and checked. Prints: kills survived, records
acknowledged, lost, duplicates, reordered, offsets reused (each of the last four must be 0), the
delivery failures the writers reported, and the elapsed time. Exit status 1 when a check fails.

- ``--nemesis leaders|zookeeper|zombie|power|disk|network|clock|all``: a 3-broker cluster on a 3-server
  ZooKeeper ensemble (quorum mode), each broker reaching it through TCP proxies of its own; each
  fault is drawn from
  the chosen nemeses: leaders killed or paused (as ``--cluster``), ZooKeeper's leader killed or
  paused, a ZooKeeper follower killed, the quorum lost for 1-4 s, or a partition leader cut from
  ZooKeeper only (the zombie leader) until another broker leads, a broker losing power (SIGKILL,
  then every file cut back to what it had fsynced), or a broker's disk stalling (50-1000 ms a write
  for 1-4 s) or failing with EIO (it halts; restarted on a mended disk), or (``network``: each broker
  in a network namespace of its own, kctl.testing.netns; needs root) a partition leader isolated from
  everything, cut from its followers, bridged, or its packets to its followers dropped one way, or a
  broker's wall clock jumping an hour or a day forward or back for 1-4 s (kctl.testing.clock_skew).

- ``--workload eos``: the exactly-once checker (kctl.testing.jepsen_eos) on a 3-broker cluster (RF 3,
  min ISR 2): three transactional read-process-write copiers (kctl's client, a process each) copy an
  input of ``--records`` numbered records (default 200 per fault, ``--partitions`` default 6 here)
  to an output topic while each fault SIGKILLs a random broker, the transaction coordinator of a
  copier's id, the group coordinator, or a copier. Prints kills by kind, records, lost, duplicates,
  aborted-visible, order violations, transactions committed/aborted (each of the four violations
  must be 0, and read_uncommitted must show aborted records).

Usage: python bench/bench_jepsen.py [--kills 200 | --faults 300] [--cluster] [--nemesis all]
       [--rate 300] [--progress 200] [--partitions 3] [--pause-every 10] [--seed 17]
       python bench/bench_jepsen.py --workload eos --faults 300 [--records 60000] [--seed 17]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kctl.testing import BrokerProcess, LocalCluster, ZooKeeperEnsemble  # noqa: E402 - this checkout's kctl
from kctl.testing.clock_skew import clock_skewed_broker, jump_clock  # noqa: E402
from kctl.testing.cluster_clients import create_topic  # noqa: E402
from kctl.testing.cluster_view import ClusterView  # noqa: E402
from kctl.testing.disk_faults import fail_disk, faulty_disk_broker, slow_disk  # noqa: E402
from kctl.testing.jepsen import (  # noqa: E402
    Campaign,
    ConfluentLoad,
    KctlLoad,
    Verdict,
    kill_and_restart,
    kill_leader,
    pause_leader,
)
from kctl.testing.jepsen_eos import EOS_CLUSTER_PROPERTIES, EosCampaign  # noqa: E402
from kctl.testing.nemesis_network import NetworkNemesis  # noqa: E402
from kctl.testing.nemesis_zookeeper import (  # noqa: E402
    ZooKeeperLinks,
    isolate_leader_from_zookeeper,
    kill_zookeeper_follower,
    kill_zookeeper_leader,
    lose_zookeeper_quorum,
    pause_zookeeper_leader,
)
from kctl.testing.netns import NetworkLab  # noqa: E402
from kctl.testing.power_loss import lose_power, power_loss_broker  # noqa: E402

TOPIC = "jepsen"
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


def _properties(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict."""
    return dict(item.split("=", 1) for item in items)


def _cluster_properties(args: argparse.Namespace) -> dict[str, str]:
    """CLUSTER_PROPERTIES with the ``--broker-config`` properties over them."""
    return {**CLUSTER_PROPERTIES, **_properties(args.broker_config)}


def _fault_kind(fault: str) -> str:
    """A fault's description without its numbers and details: what the unavailability table groups by."""
    return re.sub(r"\d+", "N", fault.split(" (")[0].split(":")[0])


def _campaign(bootstrap: str, args: argparse.Namespace) -> Campaign:
    """The two writers, each with the ``--writer-config`` properties (both clients take Kafka's names)."""
    config = _properties(args.writer_config)
    return Campaign(
        [
            ConfluentLoad(bootstrap, TOPIC, "ck", rate_per_s=args.rate, config=config),
            KctlLoad(bootstrap, TOPIC, "kctl", rate_per_s=args.rate, config=config),
        ],
        progress_timeout=180.0,
    )


def _progress(args: argparse.Namespace, rng: random.Random, done: int) -> None:
    if done and done % max(1, args.kills // 10) == 0:
        print(f"  {done}/{args.kills} faults", file=sys.stderr, flush=True)


def run_single(args: argparse.Namespace, base: Path, rng: random.Random) -> tuple[Campaign, Verdict]:
    broker = BrokerProcess(base / "broker" / "data", {"log.segment.bytes": str(256 * 1024)}).start()
    try:
        create_topic(broker.bootstrap, TOPIC, args.partitions, 1)
        campaign = _campaign(broker.bootstrap, args).start()
        try:
            for done in range(args.kills):
                campaign.inject(partial(kill_and_restart, broker), progress=rng.randint(10, args.progress))
                _progress(args, rng, done + 1)
        except BaseException:
            campaign.stop()
            raise
        return campaign, campaign.finish(broker.bootstrap, TOPIC, args.partitions)
    finally:
        broker.stop()


def run_cluster(args: argparse.Namespace, base: Path, rng: random.Random) -> tuple[Campaign, Verdict]:
    with (
        LocalCluster(base / "cluster", 3, properties=_cluster_properties(args)) as cluster,
        ClusterView(cluster.zookeeper_connect) as view,
    ):
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, TOPIC, args.partitions, 3, {"min.insync.replicas": "2"})
        view.wait_for_full_isr(TOPIC, args.partitions, timeout=60)
        campaign = _campaign(bootstrap, args).start()

        def choose(done: int) -> Callable[[], str]:
            partition = rng.randrange(args.partitions)
            return _leader_fault(args, cluster, view, partition, done, campaign)

        return _run_faults(args, rng, campaign, bootstrap, choose, cluster)


def _leader_fault(
    args: argparse.Namespace,
    cluster: LocalCluster,
    view: ClusterView,
    partition: int,
    done: int,
    campaign: Campaign,
) -> Callable[[], str]:
    """Kill the partition's leader, or every ``--pause-every``-th fault SIGSTOP it past its session."""
    if args.pause_every and (done + 1) % args.pause_every == 0:
        return partial(pause_leader, cluster, view, TOPIC, partition, campaign.loads)
    return partial(kill_leader, cluster, view, TOPIC, partition)


def _run_faults(
    args: argparse.Namespace,
    rng: random.Random,
    campaign: Campaign,
    bootstrap: str,
    choose: Callable[[int], Callable[[], str]],
    cluster: LocalCluster | None = None,
) -> tuple[Campaign, Verdict]:
    """``--kills`` faults, each ``choose(n)``, each after 10..``--progress`` acknowledgements; then
    the check. A fault step that fails (a broker that did not come back, a wait that timed out) ends
    the schedule there, said on stderr and recorded in ``STEP_ERRORS``, but what the writers had
    acknowledged until then is still checked: a failed step must not hide a lost write."""
    try:
        for done in range(args.kills):
            fault = choose(done)
            started = time.monotonic()
            try:
                what = campaign.inject(fault, progress=rng.randint(10, args.progress))
            except Exception as error:  # reported; the acknowledged writes are still checked
                STEP_ERRORS.append(f"fault {done + 1}/{args.kills}: {type(error).__name__}: {error}")
                print(
                    f"  {done + 1}/{args.kills} FAILED: {error}; checking what was acknowledged",
                    file=sys.stderr,
                )
                if cluster is not None:
                    _start_stopped_brokers(cluster)
                break
            # the fault schedule, as it happens (a failing run shows what led to it)
            took = time.monotonic() - started
            print(f"  {done + 1}/{args.kills} [{took:5.1f} s] {what}", file=sys.stderr, flush=True)
    except BaseException:
        campaign.stop()
        raise
    return campaign, campaign.finish(bootstrap, TOPIC, args.partitions)


STEP_ERRORS: list[str] = []
"""The fault steps that failed (at most one: the schedule ends there), printed with the verdict."""


def _start_stopped_brokers(cluster: LocalCluster) -> None:
    """After a failed fault step: bring back any broker it left down, so the check can read every
    partition."""
    for broker_id in sorted(cluster.brokers):
        broker = cluster.broker(broker_id)
        if not broker.running:
            try:
                broker.start()
            except Exception as error:  # said; the check shows what it can read
                print(f"  broker {broker_id} did not start again: {error}", file=sys.stderr)


NEMESES = ("leaders", "zookeeper", "zombie", "power", "disk", "network", "clock")
"""--nemesis choices (``all`` mixes them): leaders killed/paused; ZooKeeper's own servers killed,
paused, a quorum lost; a leader cut from ZooKeeper only; a broker losing power (its unsynced writes);
a broker's disk stalling or failing; network partitions between the brokers (each in a network
namespace: needs root); a broker's wall clock jumping an hour or a day forward or back."""


NETWORK_FAULTS = ("isolate", "cut", "bridge", "drop")


def _network_fault(
    nemesis: NetworkNemesis, rng: random.Random, partition: int, campaign: Campaign, only: str | None
) -> Callable[[], str]:
    faults = {
        "isolate": nemesis.isolate_leader,
        "cut": nemesis.cut_leader_from_followers,
        "bridge": nemesis.bridge,
        "drop": nemesis.asymmetric_leader_to_followers,
    }
    fault = faults[only] if only else rng.choice(list(faults.values()))
    return partial(fault, TOPIC, partition, campaign.loads)


def _zookeeper_fault(ensemble: ZooKeeperEnsemble, rng: random.Random) -> Callable[[], str]:
    choice = rng.randrange(4)
    if choice == 0:
        return partial(kill_zookeeper_leader, ensemble)
    if choice == 1:
        return partial(pause_zookeeper_leader, ensemble)
    if choice == 2:
        return partial(kill_zookeeper_follower, ensemble)
    return partial(lose_zookeeper_quorum, ensemble, hold_s=rng.uniform(1.0, 4.0))


def run_nemeses(args: argparse.Namespace, base: Path, rng: random.Random) -> tuple[Campaign, Verdict]:
    """A 3-broker cluster on a 3-server ZooKeeper ensemble, each broker reaching it through proxies
    of its own (kctl.testing.nemesis_zookeeper), under the faults of ``--nemesis``."""
    kinds = NEMESES if args.nemesis == "all" else (args.nemesis,)
    with contextlib.ExitStack() as stack:
        ensemble = stack.enter_context(ZooKeeperEnsemble(base / "zookeeper", 3))
        cluster = LocalCluster(base / "cluster", 3, properties=_cluster_properties(args), zookeeper=ensemble)
        lab = nodes = None
        if "network" in kinds:  # brokers in network namespaces, ZooKeeper reached through the root one
            lab = stack.enter_context(NetworkLab.create())
            nodes = lab.attach(cluster)
        links = ZooKeeperLinks(cluster, ensemble, listen_host=lab.client_ip if lab else "127.0.0.1")
        stack.callback(links.close)
        for broker_id, broker in cluster.brokers.items():
            power_loss_broker(broker, base / f"ledger-{broker_id}")
            faulty_disk_broker(broker, base / f"disk-{broker_id}")
            clock_skewed_broker(broker, base / f"clock-{broker_id}")
        with cluster, ClusterView(cluster.zookeeper_connect) as view:
            bootstrap = cluster.bootstrap_servers
            create_topic(bootstrap, TOPIC, args.partitions, 3, {"min.insync.replicas": "2"})
            view.wait_for_full_isr(TOPIC, args.partitions, timeout=60)
            campaign = _campaign(bootstrap, args).start()
            network = NetworkNemesis(lab, nodes, None, view) if lab and nodes else None

            def choose(done: int) -> Callable[[], str]:
                kind = rng.choice(kinds)
                partition = rng.randrange(args.partitions)
                broker = cluster.broker(rng.randint(1, 3))
                if kind == "zookeeper":
                    return _zookeeper_fault(ensemble, rng)
                if kind == "network" and network is not None:
                    return _network_fault(network, rng, partition, campaign, args.network_fault)
                if kind == "clock":
                    jump = rng.choice((-86400.0, -3600.0, 3600.0, 86400.0))
                    return partial(jump_clock, broker, jump, rng.uniform(1.0, 4.0))
                if kind == "power":
                    return partial(lose_power, broker)
                if kind == "disk" and rng.random() < 0.5:
                    return partial(fail_disk, broker)
                if kind == "disk":
                    return partial(slow_disk, broker, rng.choice((50, 300, 1000)), rng.uniform(1.0, 4.0))
                if kind == "zombie":
                    return partial(
                        isolate_leader_from_zookeeper, links, view, TOPIC, partition, campaign.loads
                    )
                return _leader_fault(args, cluster, view, partition, done, campaign)

            return _run_faults(args, rng, campaign, bootstrap, choose, cluster)
    raise AssertionError("unreachable")


def run_eos(args: argparse.Namespace) -> int:
    """``--workload eos``: the exactly-once checker with ``--faults`` kills; exit 1 on a violation."""
    records = args.records or 200 * max(1, args.kills)
    partitions = args.partitions or 6
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="bench-jepsen-eos-") as directory,
        LocalCluster(Path(directory) / "cluster", 3, properties=EOS_CLUSTER_PROPERTIES) as cluster,
        ClusterView(cluster.zookeeper_connect) as view,
    ):
        work = Path(directory) / "copiers"
        work.mkdir()
        campaign = EosCampaign(
            cluster, view, work, records=records, partitions=partitions, faults=args.kills, seed=args.seed
        )
        verdict = campaign.run(log=True)
    elapsed = time.monotonic() - started
    setup = f"3-broker cluster, RF=3, min ISR 2, {partitions} partitions, 3 copiers"
    print(f"bench_jepsen eos: {setup}, seed {args.seed}")
    print(f"kills                {sum(verdict.kills.values())}")
    for kind, count in sorted(verdict.kills.items()):
        print(f"  {count:5d} x {kind}")
    print(f"copier restarts      {campaign.copier_restarts}")
    print(f"records              {verdict.records}")
    print(f"read_committed       {verdict.read_committed}")
    print(f"lost                 {verdict.lost}")
    print(f"duplicates           {verdict.duplicates}")
    print(f"aborted-visible      {verdict.aborted_visible}")
    print(f"order violations     {verdict.order_violations}")
    print(f"transactions         {verdict.committed_txns} committed, {verdict.aborted_txns} aborted")
    print(f"aborted records read_uncommitted shows {verdict.aborted_uncommitted}")
    print(f"elapsed              {elapsed:.0f} s")
    vacuous = verdict.aborted_uncommitted == 0
    if not verdict.ok or vacuous:
        print(verdict.report(), file=sys.stderr)
    if vacuous:
        print("no aborted record in the output at all: the check was vacuous", file=sys.stderr)
    return 0 if verdict.ok and not vacuous else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, help="faults to inject (default 200)")
    parser.add_argument("--cluster", action="store_true", help="a 3-broker cluster with RF=3")
    parser.add_argument("--rate", type=float, default=300.0, help="records/s per writer (default 300)")
    parser.add_argument("--progress", type=int, default=200, help="most acks per writer between faults")
    parser.add_argument("--partitions", type=int, help="default 3 (eos: 6)")
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property for the cluster's brokers, e.g. replica.socket.timeout.ms=2000 (repeatable)",
    )
    parser.add_argument(
        "--writer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer property for both writers, e.g. request.timeout.ms=5000 (repeatable)",
    )
    parser.add_argument(
        "--network-fault",
        choices=NETWORK_FAULTS,
        help="with --nemesis network: only this network fault (default: each drawn at random)",
    )
    parser.add_argument("--workload", choices=["writes", "eos"], default="writes",
                        help="writes: acks=all writers (default); eos: transactional copiers")  # fmt: skip
    parser.add_argument("--records", type=int, help="eos: input records (default 200 per fault)")
    parser.add_argument("--pause-every", type=int, default=10, help="--cluster: every Nth fault is a SIGSTOP")
    parser.add_argument(
        "--nemesis",
        choices=[*NEMESES, "all"],
        help="a 3-broker cluster on a 3-server ZooKeeper ensemble under these faults (implies --cluster)",
    )
    parser.add_argument("--faults", type=int, dest="kills", help="the same as --kills")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="run in DIR (new or empty) and keep it: the brokers' logs"
    )
    args = parser.parse_args()
    if args.kills is None:
        args.kills = 200
    if args.workload == "eos":
        return run_eos(args)
    if args.partitions is None:
        args.partitions = 3
    rng = random.Random(args.seed)
    started = time.monotonic()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        if any(args.keep.iterdir()):
            parser.error(f"--keep {args.keep}: not empty")
    workdir: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(str(args.keep))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="bench-jepsen-")
    )
    with workdir as directory:
        runner = run_nemeses if args.nemesis else run_cluster if args.cluster else run_single
        campaign, verdict = runner(args, Path(directory), rng)
    elapsed = time.monotonic() - started
    kills = sum(1 for fault in campaign.faults_done if fault.startswith("kill -9"))
    pauses = len(campaign.faults_done) - kills
    setup = "3-broker cluster, RF=3, min.insync.replicas=2" if args.cluster else "one broker"
    if args.nemesis:
        setup = f"3-broker cluster on a 3-server ZooKeeper ensemble, nemesis {args.nemesis}, RF=3, min ISR 2"
        kinds = Counter(re.sub(r"\d+", "N", fault.split(" (")[0]) for fault in campaign.faults_done)
        for kind, count in sorted(kinds.items()):
            print(f"  {count:5d} x {kind}")
    writers = "writers confluent-kafka + kctl"
    print(f"bench_jepsen: {setup}, {args.partitions} partitions, {writers}, seed {args.seed}")
    print(f"kills survived       {kills}" + (f" (and {pauses} other faults)" if pauses else ""))
    print(f"records acknowledged {verdict.acknowledged}")
    implicit = verdict.acknowledged_without_offset  # librdkafka's implicit acks (kctl.testing.jepsen.Ack)
    if implicit:
        print(f"  without offset     {implicit} (acknowledged implicitly)")
    print(f"records read         {verdict.read}")
    print(f"lost                 {verdict.lost}")
    print(f"duplicates           {verdict.duplicates}")
    print(f"reordered            {verdict.reordered}")
    print(f"offsets reused       {verdict.offsets_reused}")
    print(f"delivery failures    {len(campaign.failures())}")
    print(f"elapsed              {elapsed:.0f} s")
    windows = campaign.unavailability()
    if windows:
        worst = sorted(windows, key=lambda w: -w[1])
        by_kind: dict[str, list[float]] = {}
        for fault, gap in windows:
            by_kind.setdefault(_fault_kind(fault), []).append(gap)
        print("unavailability (longest time a partition went without an acknowledgement after each fault):")
        for kind, gaps in sorted(by_kind.items()):
            print(f"  {kind:60s} max {max(gaps):6.2f} s  mean {sum(gaps) / len(gaps):6.2f} s  ({len(gaps)})")
        print(f"  worst: {worst[0][1]:.2f} s after {worst[0][0]}")
        print("  the same, each writer alone (max per kind):")
        for load in campaign.loads:
            mine: dict[str, float] = {}
            for fault, gap in campaign.unavailability(load.writer):
                mine[_fault_kind(fault)] = max(mine.get(_fault_kind(fault), 0.0), gap)
            print(f"    {load.writer:16s} " + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(mine.items())))
    for error in STEP_ERRORS:
        print(f"fault step failed   {error}")
    if not verdict.ok:
        print(verdict.report(), file=sys.stderr)
    failures = campaign.failures()
    for failure in failures[:10]:
        print(f"delivery failure: {failure}", file=sys.stderr)
    for error, count in Counter(failure.partition(": ")[2] for failure in failures).most_common():
        print(f"  {count:6d} x {error}")  # the delivery failures by error (a writer that gave up)
    return 0 if verdict.ok and not STEP_ERRORS else 1


if __name__ == "__main__":
    sys.exit(main())
