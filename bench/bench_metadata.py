"""Cost of a broker's metadata refresh on the ZooKeeper registry: a real ZooKeeper server holding
``--topics`` topics of ``--partitions`` partitions with their states, one registry with its watches
(as a broker has), and kctl.broker.metadata_cache's full refresh timed when nothing changed and
after ``--changed`` partition states changed (as after a leader election). Prints the median wall
time and the ZooKeeper reads of each.

Usage: python bench/bench_metadata.py [--topics 900] [--partitions 4] [--changed 20] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kctl.broker.metadata_cache import MetadataCache  # noqa: E402
from kctl.testing import Notifications, start_zookeeper  # noqa: E402
from kctl.zk.model import PartitionState  # noqa: E402
from kctl.zk.zookeeper import ZooKeeperRegistry  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=900)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--changed", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        server = start_zookeeper(Path(directory) / "zk")
        connect = server.connect_string()  # a fresh chroot each call
        admin = ZooKeeperRegistry(connect)
        broker = ZooKeeperRegistry(connect)
        try:
            admin.start()
            assignment = {p: (1,) for p in range(args.partitions)}
            names = [f"topic-{n:05d}" for n in range(args.topics)]
            for start in range(0, len(names), 50):
                admin.create_topics([(name, assignment, {}) for name in names[start : start + 50]])
            for name in names:
                for p in assignment:
                    admin.set_partition_state(name, p, PartitionState(1, 0, (1,)))
            broker.start()
            seen = Notifications()
            broker.add_listener(seen)
            cache = MetadataCache(broker)
            reads = _count_reads(broker)
            first = cache.refresh()  # the first read of everything
            assert len(first.topics) == args.topics, f"{len(first.topics)} topics read"
            quiet, quiet_reads, changed, changed_reads = [], [], [], []
            for epoch in range(1, args.rounds + 1):
                reads.clear()
                began = time.perf_counter()
                cache.refresh()
                quiet.append(time.perf_counter() - began)
                quiet_reads.append(len(reads))

                seen.clear()
                for n in range(args.changed):
                    admin.set_partition_state(names[n * 7 % len(names)], 0, PartitionState(1, epoch, (1,)))
                seen.wait_for(lambda: seen.reasons.count("partitions") >= 1)
                time.sleep(0.2)  # let the watch events of the other changes arrive too
                reads.clear()
                began = time.perf_counter()
                cache.refresh()
                changed.append(time.perf_counter() - began)
                changed_reads.append(len(reads))
            print(f"{args.topics} topics x {args.partitions} partitions, {args.rounds} rounds")
            print(f"refresh, nothing changed:     {statistics.median(quiet) * 1000:8.1f} ms  "
                  f"{statistics.median(quiet_reads):6.0f} reads")
            print(f"refresh, {args.changed} states changed: {statistics.median(changed) * 1000:8.1f} ms  "
                  f"{statistics.median(changed_reads):6.0f} reads")
        finally:
            broker.close()
            admin.close()
            server.stop()


def _count_reads(registry: ZooKeeperRegistry) -> list[str]:
    paths: list[str] = []
    client = registry.kazoo_client
    for name in ("get_async", "exists_async", "get_children_async"):
        original = getattr(client, name)

        def counted(path: str, *a: Any, _original: Any = original, **k: Any) -> Any:
            paths.append(path)
            return _original(path, *a, **k)

        setattr(client, name, counted)
    return paths


if __name__ == "__main__":
    main()
