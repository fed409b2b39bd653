#!/usr/bin/env python3
"""Peer harness (issue 18): kctl beside Apache Kafka 3.9 (KRaft, one node) and, when installed, Tansu,
in one interleaved run; prints per metric the median over rounds and kctl's ratio to each peer.

All brokers run for the whole run; each round measures every metric on every broker, one broker after
the other (the order rotates per round), so the machine's other load falls on all of them alike. With
enough cores each broker and the load generator (this process and its children) get their own cores
(``taskset``); on a 2-core machine both brokers share core 0 (only one is under load at a time) and
the load generator has core 1. Metrics (see bench/peers/workloads.py): produce 100 B and 1 KiB with
pre-encoded Produce requests replayed over raw sockets and with confluent-kafka (records/s, MB/s,
records per broker CPU-second); fetch of a preloaded log of 100 B records with pre-encoded Fetch
requests and with confluent-kafka (queued.min.messages raised); end-to-end latency at 1,000 records/s
(linger.ms=0, consumer polling per message, fetch wait 500 ms) with the broker's CPU per record;
transactions (bench/peers/transactions.py: confluent-kafka's transactional producer, transactions of
100 and of 1,000 records of 100 B over the topic's partitions: transactions/s, commit latency p50/p99,
CPU per transaction); broker RSS after the run. Asserts nothing.

``--cluster``: the same metrics on 3 brokers per system, every topic with replication factor 3 and
min.insync.replicas=2 (bench/peers/cluster.py): kctl as a LocalCluster (a ZooKeeper server and 3
``kctl broker start`` in ZooKeeper mode, what ``kctl cluster up`` starts), Apache Kafka as 3 KRaft
nodes with the combined broker+controller roles. Topics have 3 partitions (one leader per broker);
every produce is acks=all (raw requests replayed to each partition's leader, confluent-kafka to
partition 0, the latency producer); fetches go to the leaders; records are counted from the high
watermarks, so only replicated records count. CPU is summed over the 3 brokers ("records per
cluster CPU-second") and so is RSS; kctl's ZooKeeper is reported on lines of its own (Kafka's
controllers are inside its brokers). Pinning: with fewer than 4 CPUs nothing is pinned — 3 brokers
cannot get cores of their own, so the brokers (and kctl's ZooKeeper) and the load generator share
every core, the same for both systems; with 4 CPUs or more, both systems' brokers share all cores
but the last, which the load generator gets. Tansu and ``--uvloop`` are single-node only.

Usage: python bench/bench_peers.py [--rounds 3] [--quick] [--peers kctl,kafka,tansu] [--uvloop]
                                   [--only produce,fetch,latency,txn] [--cluster]"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from peers import transactions as tx
from peers import workloads as w
from peers.brokers import KafkaPeer, KctlPeer, Peer, TansuPeer, Unavailable
from peers.cluster import KafkaClusterPeer, KctlClusterPeer

LOWER_IS_BETTER = ("ms", "RSS")
CAP = 512 * 10**6  # bytes per raw produce measurement
PRODUCE_TOPICS = ("p100", "p1024", "r100", "r1024")


def cores(pin: str) -> tuple[dict[str, list[int] | None], list[int] | None]:
    """Cores per broker name and for the load generator: issue 18's method, each broker pinned to one
    core and the load generator on others, whenever the machine has 2 CPUs or more (on 2 or 3 the
    brokers share core 0: one is under load at a time). Unpinned, a many-threaded JVM spreads over
    every core while a single event loop cannot, which measures the machine's spare cores more than
    the broker. On a machine shared with other work, pinning hurts a single-threaded broker more (the
    scheduler shares a core per thread): use ``--pin off`` there."""
    available = sorted(os.sched_getaffinity(0))
    if pin == "off" or len(available) < 2:
        return {}, None
    if len(available) >= 4:
        brokers = {"kctl": [available[0]], "kafka": [available[1]], "tansu": [available[2]]}
        return brokers, available[3:]
    if len(available) >= 2:
        first = [available[0]]
        return {"kctl": first, "kafka": first, "tansu": first}, available[1:]
    return {}, None


def cluster_cores(pin: str) -> tuple[dict[str, list[int] | None], list[int] | None]:
    """``--cluster``: one system's 3 brokers cannot have a core each on a small machine; with 4 CPUs or
    more (or ``--pin on``) every system's brokers share all cores but the last (one system is under
    load at a time) and the load generator has the last; otherwise nothing is pinned."""
    available = sorted(os.sched_getaffinity(0))
    if pin == "off" or (pin == "auto" and len(available) < 4) or len(available) < 2:
        return {}, None
    brokers: list[int] | None = available[:-1]
    return {"kctl": brokers, "kafka": brokers}, available[-1:]


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--warmup", type=int, default=1, help="rounds run first and not counted (Kafka's JIT warms up)"
    )
    parser.add_argument("--quick", action="store_true", help="shorter measurements (figures noisier)")
    parser.add_argument("--peers", default="kctl,kafka,tansu")
    parser.add_argument("--uvloop", action="store_true", help="also kctl on uvloop")
    parser.add_argument("--only", default="produce,fetch,latency,txn")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also kctl from this source tree (an older commit's `git archive`): before/after in one run",
    )
    parser.add_argument("--dir", type=Path, help="where the brokers' data go (default: a new temp dir)")
    parser.add_argument(
        "--pin", choices=("auto", "on", "off"), default="auto", help="taskset (auto: 2+ CPUs; --cluster: 4+)"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="3 brokers per system, replication factor 3, min.insync.replicas=2, acks=all",
    )
    args = parser.parse_args()
    seconds = 1.5 if args.quick else 3.0
    latency_seconds = 3.0 if args.quick else 10.0
    preload_bytes = (8 if args.quick else 25) * 10**6  # per partition
    passes = 3 if args.quick else 6
    only = set(args.only.split(","))
    broker_cores, generator = cluster_cores(args.pin) if args.cluster else cores(args.pin)
    if generator:
        os.sched_setaffinity(0, generator)
    base = Path(tempfile.mkdtemp(prefix="bench-peers-", dir=args.dir))
    peers: list[Peer] = []
    names = args.peers.split(",")
    wanted: list[Peer] = []
    for name in names:
        if args.cluster:
            if name == "kctl":
                wanted.append(KctlClusterPeer(base, broker_cores.get("kctl")))
                if args.baseline:
                    tree = args.baseline.resolve()
                    wanted.append(KctlClusterPeer(base, broker_cores.get("kctl"), tree=tree))
            elif name == "kafka":
                wanted.append(KafkaClusterPeer(base, broker_cores.get("kafka")))
            else:
                print(f"# {name}: skipped: no cluster mode in this harness", flush=True)
            continue
        if name == "kctl":
            wanted.append(KctlPeer(base, broker_cores.get("kctl"), w.PARTITIONS))
            if args.uvloop:
                wanted.append(KctlPeer(base, broker_cores.get("kctl"), w.PARTITIONS, uvloop=True))
            if args.baseline:
                tree = args.baseline.resolve()
                wanted.append(KctlPeer(base, broker_cores.get("kctl"), w.PARTITIONS, tree=tree))
        elif name == "kafka":
            wanted.append(KafkaPeer(base, broker_cores.get("kafka"), w.PARTITIONS))
        elif name == "tansu":
            wanted.append(TansuPeer(base, broker_cores.get("tansu")))
    if args.cluster and args.uvloop:
        print("# --uvloop: ignored with --cluster (single-node evaluation only)", flush=True)
    mode = "single broker each"
    if args.cluster:
        mode = (
            "--cluster: 3 brokers each, RF 3, min.insync.replicas=2, acks=all; CPU and RSS summed over "
            "the 3 brokers; "
            + (
                "nothing pinned (too few CPUs for a core per broker): brokers and load generator share "
                "every core, for both systems alike"
                if not broker_cores
                else "each system's brokers share the cores named below"
            )
        )
    print(f"# mode: {mode}", flush=True)
    print(
        f"# peers: {platform.node()}, {os.cpu_count()} "
        f"CPUs ({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; brokers on cores {broker_cores or 'any'}, "
        f"load generator on {generator or 'any'}; {args.warmup} warm-up and {args.rounds} interleaved "
        f"rounds; medians; load average {_load()}",
        flush=True,
    )
    results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    try:
        for peer in wanted:
            try:
                peer.start()
            except Unavailable as why:
                print(f"# {peer.name}: skipped: {why}", flush=True)
                continue
            except Exception as error:  # a peer that cannot serve is reported, the others still run
                print(f"# {peer.name}: skipped, it did not start: {str(error)[-300:]}", flush=True)
                with contextlib.suppress(Exception):  # whatever of it did start
                    peer.stop()
                continue
            peers.append(peer)
            pids = ", ".join(str(pid) for pid in peer.pids())
            print(f"# {peer.name} started (pid {pids}; {peer.bootstrap})", flush=True)
        warm = w.bb.build_batch(100, 10)
        logs: dict[str, w.Preloaded] = {}
        for peer in list(peers):
            try:
                if "fetch" in only:
                    logs[peer.name] = w.preload(peer, "c100", 100, preload_bytes)
            except Exception as error:
                print(f"# {peer.name}: skipped, setting up its topics failed: {error!r}", flush=True)
                peers.remove(peer)
                peer.stop()
        failed: set[tuple[str, str]] = set()
        for round_index in range(-args.warmup, args.rounds):
            order = peers[round_index % len(peers) :] + peers[: round_index % len(peers)]
            steps: list[tuple[str, Callable[[Peer], dict[str, float]]]] = []
            suffix = f"-{round_index + 1}"  # each round produces to new topics, deleted after it
            if "produce" in only:
                for peer in peers:
                    for topic in PRODUCE_TOPICS:
                        with contextlib.suppress(Exception):  # a failure shows in the measurement
                            w.create_topic(peer, topic + suffix, warm)
                steps += [
                    (
                        "produce 100 B raw",
                        lambda p, s=suffix: w.produce_raw(p, "p100" + s, 100, seconds, CAP),
                    ),
                    (
                        "produce 1 KiB raw",
                        lambda p, s=suffix: w.produce_raw(p, "p1024" + s, 1024, seconds, CAP),
                    ),
                    (
                        "produce 100 B rdkafka",
                        lambda p, s=suffix: w.produce_rdkafka(p, "r100" + s, 100, seconds),
                    ),
                    (
                        "produce 1 KiB rdkafka",
                        lambda p, s=suffix: w.produce_rdkafka(p, "r1024" + s, 1024, seconds),
                    ),
                ]
            if "fetch" in only:
                steps += [
                    ("fetch raw", lambda p: w.consume_raw(p, logs[p.name], passes, 1 << 20)),
                    ("fetch rdkafka", lambda p, r=round_index: w.consume_rdkafka(p, logs[p.name], f"g{r}")),
                ]
            if "latency" in only:
                steps.append(
                    ("latency", lambda p, r=round_index: w.latency(p, f"l{r + 1}", 1000, latency_seconds))
                )
            if "txn" in only:
                for size in (100, 1000):
                    steps.append(
                        (
                            f"transactions of {size}",
                            lambda p, s=suffix, n=size: tx.transactions(p, f"t{n}{s}", n, seconds),
                        )
                    )
            for label, step in steps:
                for peer in order:
                    if (peer.name, label) in failed:
                        continue
                    try:
                        figures = step(peer)
                    except Exception as error:  # that measurement of that peer is left out from here on
                        print(f"# {peer.name}: {label} failed: {error!r}; left out", flush=True)
                        failed.add((peer.name, label))
                        continue
                    if round_index >= 0:
                        for metric, value in figures.items():
                            results[metric][peer.name].append(value)
                what = "warm-up" if round_index < 0 else f"round {round_index + 1}/{args.rounds}:"
                print(f"# {what} {label} done", flush=True)
            if "produce" in only:
                for peer in peers:
                    w.delete_topics(peer, [topic + suffix for topic in PRODUCE_TOPICS])
        for peer in peers:
            for metric, value in w.rss(peer).items():  # after the run
                results[metric][peer.name].append(value)
    finally:
        for peer in peers:
            with contextlib.suppress(Exception):
                peer.stop()
            for log in peer.logs():
                with contextlib.suppress(OSError):
                    problems = [
                        line
                        for line in log.read_text(errors="replace").splitlines()
                        if " ERROR " in line or "Traceback" in line
                    ]
                    for line in problems[:3]:
                        print(f"# {peer.name} logged ({log.parent.name}/{log.name}): {line[:200]}")
        shutil.rmtree(base, ignore_errors=True)
    print(f"# load average at the end: {_load()} (other work on the machine shows here)", flush=True)
    print_table(results, [p.name for p in peers])


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def print_table(results: dict[str, dict[str, list[float]]], names: list[str]) -> None:
    if not names:
        return
    first, others = names[0], names[1:]
    header = ["metric", *names, *(f"{first}/{o}" for o in others)]
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for metric, per_peer in results.items():
        medians = {name: statistics.median(v) if v else float("nan") for name, v in per_peer.items()}
        cells = [metric + (" (lower is better)" if any(k in metric for k in LOWER_IS_BETTER) else "")]
        cells += [_fmt(medians.get(name, float("nan"))) for name in names]
        for other in others:
            ours, theirs = medians.get(first, float("nan")), medians.get(other, float("nan"))
            defined = ours == ours and theirs == theirs and theirs != 0  # neither nan, no division by 0
            cells.append(f"{ours / theirs:.2f}x" if defined else "-")
        print("| " + " | ".join(cells) + " |")
    print(flush=True)


def _fmt(value: float) -> str:
    if value != value:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


if __name__ == "__main__":
    main()
