#!/usr/bin/env python3
"""Availability per fault, kctl against Apache Kafka 3.9 under the same seeded faults (issue 24 §2).

Each system: 3 brokers, a topic of 3 partitions, RF 3, min.insync.replicas 2, two idempotent acks=all
writers (kctl.testing.jepsen ConfluentLoad and KctlLoad). kctl is a `LocalCluster` on ZooKeeper;
Kafka is bench/peers' `KafkaClusterPeer` (3 KRaft nodes, broker+controller). Failure detection is set
equal: kctl ``zookeeper.session.timeout.ms`` = Kafka ``broker.session.timeout.ms`` = SESSION_MS,
Kafka ``broker.heartbeat.interval.ms`` = HEARTBEAT_MS, ``replica.lag.time.max.ms`` the same on both.
Faults (one seeded sequence, the same on both): kill (SIGKILL a partition leader, restart it once a
new leader is elected, wait for full ISR), pause (SIGSTOP a leader until a new leader, then SIGCONT),
term (SIGTERM: controlled shutdown of a leader, then restart). Rounds alternate kctl / Kafka so the
machine's load falls on both alike; unavailability is wall-clock: the longest gap between
acknowledgements of the faulted partition from the fault to the next fault (`partition_unavailability`).

Usage: python bench/bench_availability.py [--faults 10] [--seed 17] [--only kctl|kafka] [--rate 200]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.brokers import QUIET, Unavailable  # noqa: E402
from bench.peers.cluster import KafkaClusterPeer  # noqa: E402
from kctl.testing import LocalCluster  # noqa: E402
from kctl.testing.cluster_clients import create_topic  # noqa: E402
from kctl.testing.jepsen import (  # noqa: E402
    Campaign,
    ConfluentLoad,
    KctlLoad,
    Load,
    Verdict,
    wait_for_progress,
)

TOPIC = "availability"
PARTITIONS = 3
SESSION_MS = 6000
HEARTBEAT_MS = 2000
LAG_MS = 3000
KCTL_PROPERTIES = {"zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": str(LAG_MS)}
KAFKA_PROPERTIES = {
    "broker.session.timeout.ms": str(SESSION_MS),
    "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "replica.lag.time.max.ms": str(LAG_MS),
}
KINDS = ("kill", "pause", "term")
TIMEOUT = 90.0


@dataclass
class System:
    """One running cluster, seen through node ids 1..3: its pids, a restart, and Metadata."""

    name: str
    bootstrap: str
    pid: Callable[[int], int]
    restart: Callable[[int], None]
    alive: Callable[[int], bool]
    stop: Callable[[], None]
    results: list[tuple[str, str, float]] = field(default_factory=list)
    verdicts: list[tuple[bool, str]] = field(default_factory=list)

    def metadata(self) -> dict[int, tuple[int, set[int], set[int]]]:
        """partition -> (leader, replicas, isr); leader -1 when none."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        found = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if found is None or found.error is not None:
            return {}
        return {p: (m.leader, set(m.replicas), set(m.isrs)) for p, m in found.partitions.items()}

    def wait(self, what: str, ok: Callable[[dict[int, tuple[int, set[int], set[int]]]], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                if ok(self.metadata()):
                    return
            except Exception as error:  # a broker down mid-request: ask again
                print(f"#   {self.name}: metadata: {error}", file=sys.stderr, flush=True)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no {what} within {TIMEOUT} s")
            time.sleep(0.1)

    def leader(self, partition: int) -> int:
        """``partition``'s leader once it has one (the answer that named it: a second read may
        already find the partition between leaders)."""
        found: list[int] = []

        def named(metadata: dict[int, tuple[int, set[int], set[int]]]) -> bool:
            leader = metadata.get(partition, (-1,))[0]
            if leader > 0:
                found.append(leader)
            return leader > 0

        self.wait("leader", named)
        return found[-1]

    def full_isr(self) -> None:
        self.wait("full ISR", lambda m: len(m) == PARTITIONS and all(r == i for _, r, i in m.values()))


def fault(system: System, kind: str, partition: int, loads: list[Load]) -> str:
    """One fault of ``kind`` on ``partition``'s leader (see the module docstring); its description."""
    leader = system.leader(partition)
    moved = lambda m: m.get(partition, (-1,))[0] not in (-1, leader)  # noqa: E731
    if kind == "pause":
        os.kill(system.pid(leader), signal.SIGSTOP)
        try:
            system.wait("new leader", moved)
            wait_for_progress(loads, 20, timeout=TIMEOUT)
        finally:
            os.kill(system.pid(leader), signal.SIGCONT)
    else:
        os.kill(system.pid(leader), signal.SIGKILL if kind == "kill" else signal.SIGTERM)
        system.wait("new leader", moved)
        deadline = time.monotonic() + TIMEOUT
        while system.alive(leader):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{system.name}: broker {leader} still running {TIMEOUT} s after SIGTERM")
            time.sleep(0.1)
        system.restart(leader)
    system.full_isr()
    return f"{kind} leader {leader} of p{partition}"


def start_kctl(base: Path) -> System:
    cluster = LocalCluster(base, 3, properties=KCTL_PROPERTIES)
    cluster.start()

    def alive(node: int) -> bool:
        process = cluster.broker(node).process
        return process is not None and process.poll() is None

    def pid(node: int) -> int:
        process = cluster.broker(node).process
        assert process is not None
        return process.pid

    def restart(node: int) -> None:
        cluster.restart(node)

    return System("kctl", cluster.bootstrap_servers, pid, restart, alive, cluster.stop)


def start_kafka(base: Path) -> System:
    peer = KafkaClusterPeer(base, None, properties=KAFKA_PROPERTIES)
    peer.start()

    def stop() -> None:  # the data is thrown away: no controlled shutdown (the last KRaft node waits 60 s)
        for process in peer.processes:
            if process.poll() is None:
                process.kill()
        peer.stop()

    return System(
        "kafka", peer.bootstrap, lambda n: peer.processes[n - 1].pid, peer.restart_node,
        lambda n: peer.processes[n - 1].poll() is None, stop,
    )  # fmt: skip


def partition_unavailability(campaign: Campaign, schedule: list[tuple[str, int]]) -> list[tuple[str, float]]:
    """As `Campaign.unavailability`, but counting only acknowledgements of each fault's partition (the
    other partitions' leaders keep acknowledging, which would hide the affected one's gap)."""
    out: list[tuple[str, float]] = []
    windows = campaign.fault_windows
    for index, ((_, partition), done, (started, _)) in enumerate(
        zip(schedule, campaign.faults_done, windows, strict=True)
    ):
        until = windows[index + 1][0] if index + 1 < len(windows) else float("inf")
        times = sorted(
            t
            for load in campaign.loads
            for ack, t in zip(load.acked, load.acked_at, strict=True)
            if ack.partition == partition and started <= t <= until
        )
        edges = [started, *times]
        out.append((done, max((b - a for a, b in itertools.pairwise(edges)), default=0.0)))
    return out


def run_round(name: str, base: Path, schedule: list[tuple[str, int]], rate: float) -> System:
    system = start_kctl(base) if name == "kctl" else start_kafka(base)
    try:
        create_topic(system.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        loads: list[Load] = [ConfluentLoad(system.bootstrap, TOPIC, "ck", rate_per_s=rate),
                 KctlLoad(system.bootstrap, TOPIC, "kctl", rate_per_s=rate)]  # fmt: skip
        campaign = Campaign(loads, progress=50, progress_timeout=TIMEOUT).start()
        for kind, partition in schedule:
            campaign.inject(partial(fault, system, kind, partition, loads))
            print(f"#   {name}: {campaign.faults_done[-1]}", file=sys.stderr, flush=True)
        verdict: Verdict = campaign.finish(system.bootstrap, TOPIC, PARTITIONS)
        for (kind, _), (done, gap) in zip(
            schedule, partition_unavailability(campaign, schedule), strict=True
        ):
            system.results.append((kind, done, gap))
        summary = verdict.summary() + f", delivery failures {len(campaign.failures())}"
        system.verdicts.append((verdict.ok, summary))
    finally:
        system.stop()
    return system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=10, help="faults per system")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--only", choices=("kctl", "kafka"))
    parser.add_argument("--rate", type=float, default=200.0, help="records/s per writer")
    parser.add_argument("--per-round", type=int, default=3, help="faults per cluster start")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    schedule = [(rng.choice(KINDS), rng.randrange(PARTITIONS)) for _ in range(args.faults)]
    names = [args.only] if args.only else ["kctl", "kafka"]
    results: dict[str, list[tuple[str, str, float]]] = {n: [] for n in names}
    verdicts: dict[str, list[tuple[bool, str]]] = {n: [] for n in names}
    print(f"settings: session {SESSION_MS} ms, Kafka heartbeat {HEARTBEAT_MS} ms, replica.lag.time.max.ms "
          f"{LAG_MS}; writers acks=all idempotent, {args.rate:g}/s each; seed {args.seed}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-availability-") as tmp:
        for index in range(0, len(schedule), args.per_round):
            for name in names:  # alternate kctl / Kafka rounds
                base = Path(tmp) / f"{name}-{index}"
                base.mkdir()
                try:
                    system = run_round(name, base, schedule[index : index + args.per_round], args.rate)
                except Unavailable as error:
                    print(f"{name}: unavailable: {error}", file=sys.stderr)
                    return 2
                results[name] += system.results
                verdicts[name] += system.verdicts
    print(f"load average: {os.getloadavg()}")
    for kind in KINDS:
        print(f"\n{kind}:")
        for name in names:
            gaps = [gap for k, _, gap in results[name] if k == kind]
            if gaps:
                values = " ".join(f"{g:.2f}" for g in gaps)
                median = statistics.median(gaps)
                print(f"  {name:6} n={len(gaps)} median {median:.2f} s  max {max(gaps):.2f} s  [{values}]")
    bad = False
    for name in names:
        for ok, summary in verdicts[name]:
            print(f"{name} verdict: {'ok' if ok else 'FAILED'}: {summary}")
            bad = bad or not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
