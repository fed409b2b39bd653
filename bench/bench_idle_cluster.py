#!/usr/bin/env python3
"""Idle cluster CPU (issue 29 §1b): what a 3-broker cluster hosting many partition replicas burns
while nobody produces or consumes — the replica fetchers' long polls and the periodic tasks.

One `LocalCluster` of 3 brokers (a ZooKeeper server of its own, fresh log directories) with
``--topics`` topics of ``--partitions`` partitions at replication factor 3, so that every broker
hosts topics × partitions replicas (default 10 × 50 = 500), a third of them as leader. Once every
partition has its full ISR and ``--settle`` seconds passed, each broker's CPU time (user + system,
/proc) is sampled over ``--seconds`` and printed as % of one core, per broker and summed.

``--baseline TREE`` also runs a second cluster from another kctl source tree (an older commit's
`git archive`) beside the first; both idle at once and are sampled in turns, ``--rounds`` times
each, so the machine's other load falls on both alike; medians are printed. Asserts nothing.

Usage: python bench/bench_idle_cluster.py [--topics 10] [--partitions 50] [--seconds 20]
                                          [--rounds 3] [--settle 10] [--baseline TREE]"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kctl.testing import LocalCluster  # noqa: E402 - this checkout's kctl (ROOT is on sys.path)
from kctl.testing.cluster_clients import create_topic  # noqa: E402
from kctl.testing.cluster_view import ClusterView  # noqa: E402

PROPERTIES = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
}


def start(
    base: Path, name: str, tree: Path, args: argparse.Namespace, stack: contextlib.ExitStack
) -> LocalCluster:
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)}
    cluster = stack.enter_context(LocalCluster(base / name, 3, properties=PROPERTIES, broker_env=env))
    view = stack.enter_context(ClusterView(cluster.zookeeper_connect))
    view.wait_for(lambda: len(view.live_brokers()) == 3, "3 brokers registered", timeout=60)
    for index in range(args.topics):
        topic = f"idle-{index}"
        create_topic(cluster.bootstrap_servers, topic, args.partitions, 3, timeout=120)
        view.wait_for_full_isr(topic, args.partitions, timeout=300)
    print(f"# {name}: {args.topics * args.partitions} partition replicas per broker, full ISR", flush=True)
    return cluster


def sample(cluster: LocalCluster, seconds: float) -> list[float]:
    """% of one core per broker over ``seconds``."""
    brokers = [cluster.broker(i) for i in range(1, cluster.size + 1)]
    before = [b.cpu_seconds() for b in brokers]
    started = time.monotonic()
    time.sleep(seconds)  # a benchmark's measuring window, not a synchronisation
    elapsed = time.monotonic() - started
    return [100 * (b.cpu_seconds() - c) / elapsed for b, c in zip(brokers, before, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--baseline", type=Path, help="also a cluster from this kctl source tree")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as base, contextlib.ExitStack() as stack:
        clusters = {"kctl": start(Path(base), "kctl", ROOT, args, stack)}
        if args.baseline:
            clusters["kctl-baseline"] = start(
                Path(base), "kctl-baseline", args.baseline.resolve(), args, stack
            )
        time.sleep(args.settle)  # let the creation's ISR changes and metadata propagation finish
        figures: dict[str, list[list[float]]] = {name: [] for name in clusters}
        for round_no in range(args.rounds):
            for name, cluster in clusters.items():
                per_broker = sample(cluster, args.seconds)
                figures[name].append(per_broker)
                shown = " ".join(f"{p:.2f}" for p in per_broker)
                print(f"# round {round_no + 1} {name}: % of a core per broker {shown}", flush=True)
        print(f"# load average at the end: {os.getloadavg()}")
        print("| cluster | broker 1 % | broker 2 % | broker 3 % | sum % |")
        print("| --- | --- | --- | --- | --- |")
        for name, rounds in figures.items():
            medians = [statistics.median(r[i] for r in rounds) for i in range(3)]
            total = statistics.median(sum(r) for r in rounds)
            print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + f" | {total:.2f} |")


if __name__ == "__main__":
    main()
