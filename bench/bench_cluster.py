#!/usr/bin/env python3
"""Cluster benchmark: what replication costs and how long a partition is unavailable on failover.

Prints its figures; asserts nothing. One `LocalCluster` of 3 brokers (a ZooKeeper server of its own,
fresh log directories, ``zookeeper.session.timeout.ms=6000``, ``replica.lag.time.max.ms=5000``) on
this machine; confluent-kafka (librdkafka) is the client.

1. Throughput: ``--records`` records of ``--size`` bytes to a new 3-partition topic for each of
   RF1 acks=1, RF3 acks=1, RF3 acks=all (min.insync.replicas=2), from the first send to the last
   acknowledgement (``flush``): records/s and MB/s.
2. End-to-end latency: for the same three set-ups, ``--latency-records`` records sent at
   ``--rate``/s (linger.ms=0), each carrying its send time; a consumer assigned to the partitions
   notes when it receives each one (consumers see a record once it is below the high watermark,
   so with RF3 this includes replication): p50/p99/max in ms.
3. Failover: a producer sends acks=all records (RF3, min.insync.replicas=2, 1 partition) at
   ``--rate``/s while the partition's leader is SIGKILLed (``--rounds`` times; restarted and back in
   the ISR between rounds), then stopped with SIGTERM (a controlled shutdown). Reported per round:
   "kill->ack", the time from the signal to the next acknowledged delivery sent after it, and
   "max gap", the longest interval without any acknowledgement from the signal until 2 s after the
   new leader is in ZooKeeper: p50 and max over the rounds.

Usage: python bench/bench_cluster.py [--quick] [--records 50000] [--size 100]
       [--latency-records 3000] [--rate 500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kctl.testing import LocalCluster  # noqa: E402 - this checkout's kctl (ROOT is on sys.path)
from kctl.testing.cluster_clients import create_topic  # noqa: E402
from kctl.testing.cluster_view import ClusterView  # noqa: E402

PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
}
SETUPS = (("RF1 acks=1", 1, "1"), ("RF3 acks=1", 3, "1"), ("RF3 acks=all", 3, "all"))


def _new_topic(cluster: LocalCluster, view: ClusterView, name: str, partitions: int, rf: int) -> None:
    create_topic(cluster.bootstrap_servers, name, partitions, rf, {"min.insync.replicas": str(min(rf, 2))})
    view.wait_for_full_isr(name, partitions, timeout=60)


def throughput(cluster: LocalCluster, view: ClusterView, args: argparse.Namespace) -> None:
    print(f"\n== produce throughput: {args.records} records x {args.size} B, 3 partitions, confluent-kafka")
    print(f"{'setup':<14} {'seconds':>8} {'records/s':>11} {'MB/s':>7}")
    value = (b"0123456789abcdef" * (args.size // 16 + 1))[: args.size]
    for label, rf, acks in SETUPS:
        topic = f"tp-rf{rf}-acks{acks}"
        _new_topic(cluster, view, topic, 3, rf)
        failed: list[Any] = []

        def on_delivery(error: Any, message: Any, failed: list[Any] = failed) -> None:
            if error is not None:
                failed.append(error)

        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": acks,
                "linger.ms": 5,
                "batch.size": 262144,
                "queue.buffering.max.messages": 1000000,
                "enable.idempotence": acks == "all",
            }
        )
        producer.produce(topic, value=value)  # warm-up: metadata and connections
        producer.flush(30)

        started = time.perf_counter()
        for _ in range(args.records):
            while True:
                try:
                    producer.produce(topic, value=value, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(300)
        seconds = time.perf_counter() - started
        note = f"  ({len(failed)} failed: {failed[0]})" if failed else ""
        rate = args.records / seconds
        print(f"{label:<14} {seconds:>8.2f} {rate:>11,.0f} {rate * args.size / 1e6:>7.2f}{note}")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency(cluster: LocalCluster, view: ClusterView, args: argparse.Namespace) -> None:
    print(f"\n== end-to-end latency: {args.latency_records} records at {args.rate}/s, send -> consumer")
    print(f"{'setup':<14} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'received':>9}")
    for label, rf, acks in SETUPS:
        topic = f"lat-rf{rf}-acks{acks}"
        _new_topic(cluster, view, topic, 3, rf)
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": f"bench-{topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "fetch.min.bytes": 1,
            }
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        consumer.poll(0.5)
        delays: list[float] = []
        done = threading.Event()
        deadline = [float("inf")]

        def consume(
            consumer: Consumer = consumer,
            delays: list[float] = delays,
            done: threading.Event = done,
            deadline: list[float] = deadline,
        ) -> None:
            while not done.is_set() or len(delays) < args.latency_records:
                message = consumer.poll(0.1)
                if message is None:
                    if done.is_set() and time.monotonic() > deadline[0]:
                        return
                    continue
                if message.error() is None:
                    delays.append(time.monotonic() - float(message.value().decode()))

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks, "linger.ms": 0})
        interval, next_send = 1.0 / args.rate, time.monotonic()
        for _ in range(args.latency_records):
            producer.produce(topic, value=repr(time.monotonic()).encode())
            producer.poll(0)
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))
        producer.flush(60)
        deadline[0] = time.monotonic() + 10
        done.set()
        reader.join()
        consumer.close()
        ms = [d * 1000 for d in delays]
        if ms:
            print(
                f"{label:<14} {_percentile(ms, 0.5):>8.1f} {_percentile(ms, 0.99):>8.1f} {max(ms):>8.1f} "
                f"{len(ms):>9}"
            )
        else:
            print(f"{label:<14} nothing received")


class TimedProducer:
    """acks=all records at a fixed rate; notes (send time, ack time) of every acknowledged one."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.topic, self.rate = topic, rate
        self.acks: list[tuple[float, float]] = []
        self.errors = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval, next_send = 1.0 / self.rate, time.monotonic()
        while not self._stop.is_set():
            sent = time.monotonic()
            self.producer.produce(
                self.topic, value=b"x" * 100, on_delivery=lambda e, m, s=sent: self._ack(e, s)
            )
            self.producer.poll(0)
            next_send += interval
            self._stop.wait(max(0.0, next_send - time.monotonic()))

    def _ack(self, error: Any, sent: float) -> None:
        with self._lock:
            if error is None:
                self.acks.append((sent, time.monotonic()))
            else:
                self.errors += 1

    def after(self, moment: float) -> list[tuple[float, float]]:
        with self._lock:
            return [ack for ack in self.acks if ack[1] >= moment]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(60)


def _gaps(producer: TimedProducer, signal_at: float, until: float) -> tuple[float, float]:
    acks = sorted(producer.after(signal_at - 1))
    next_ack = min((ack for sent, ack in acks if sent >= signal_at), default=float("nan"))
    times = [signal_at, *sorted(ack for _, ack in acks if signal_at <= ack <= until), until]
    return next_ack - signal_at, max(b - a for a, b in itertools.pairwise(times))


def failover(cluster: LocalCluster, view: ClusterView, args: argparse.Namespace) -> None:
    topic = "failover"
    _new_topic(cluster, view, topic, 1, 3)
    producer = TimedProducer(cluster.bootstrap_servers, topic, args.rate)
    results: dict[str, list[tuple[float, float]]] = {"SIGKILL": [], "SIGTERM": []}
    try:
        deadline = time.monotonic() + 30
        while len(producer.after(0)) < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        for kind in ("SIGKILL", "SIGTERM"):
            for _ in range(args.rounds):
                leader = view.wait_for_leader(topic, 0).leader
                signal_at = time.monotonic()
                if kind == "SIGKILL":
                    cluster.kill(leader)
                else:
                    cluster.stop_broker(leader)
                view.wait_for_leader(topic, 0, not_in={leader}, timeout=60)
                until = time.monotonic() + 2
                view.wait_for(lambda u=until: time.monotonic() >= u and producer.after(u), "an ack", 90)
                results[kind].append(_gaps(producer, signal_at, until))
                cluster.restart(leader)
                view.wait_for_isr(topic, 0, set(view.assignment(topic)[0]), timeout=90)
    finally:
        producer.stop()
    print(f"\n== failover: 1 partition RF3 acks=all at {args.rate} records/s, {args.rounds} rounds each")
    print(f"{'stop':<8} {'kill->ack p50':>14} {'max':>8} {'max gap p50':>12} {'max':>8}  (seconds)")
    for kind, rounds in results.items():
        next_acks = [r[0] for r in rounds]
        gaps = [r[1] for r in rounds]
        print(
            f"{kind:<8} {statistics.median(next_acks):>14.2f} {max(next_acks):>8.2f} "
            f"{statistics.median(gaps):>12.2f} {max(gaps):>8.2f}"
        )
    print(f"delivery errors during failover: {producer.errors}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (small counts, 2 rounds)")
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--latency-records", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        args.records, args.latency_records, args.rounds = 10000, 500, 2
    with (
        tempfile.TemporaryDirectory(prefix="bench-cluster-") as base,
        LocalCluster(Path(base), 3, properties=PROPERTIES) as cluster,
        ClusterView(cluster.zookeeper_connect) as view,
    ):
        view.wait_for(lambda: len(view.live_brokers()) == 3, "3 brokers registered")
        print(f"3-broker LocalCluster {cluster.zookeeper_connect}, python {sys.version.split()[0]}")
        throughput(cluster, view, args)
        latency(cluster, view, args)
        failover(cluster, view, args)


if __name__ == "__main__":
    main()
