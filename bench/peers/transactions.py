"""The peer harness's transactional rows (issue 27 §4): confluent-kafka's transactional producer
against one running peer (``brokers.Peer``), ``{metric: value}`` like bench/peers/workloads.py.

One producer with a ``transactional.id`` (``init_transactions`` once), then for the measurement's
length: ``begin_transaction``, ``records_per_txn`` records of 100 B spread over the topic's partitions
(``linger.ms=5``, ``peer.acks``), ``commit_transaction`` — the commit's wall time includes sending what
is still buffered, EndTxn and the coordinator writing the markers, as an application sees it. Reported:
transactions and records per second, commit latency p50 and p99, the peer's CPU per transaction and
transactions per CPU-second (broker, or the cluster's brokers summed). Records are what committed
transactions hold; the partitions' end offsets must have moved by exactly those records plus one
marker per partition per transaction (Kafka writes its markers after answering the commit: they are
waited for), else the row says so."""

from __future__ import annotations

import os
import time

import bench_broker as bb

from .brokers import QUIET, Peer
from .workloads import end_offsets, new_topic

RECORD_SIZE = 100


def transactions(peer: Peer, topic: str, records_per_txn: int, seconds: float) -> dict[str, float]:
    """Transactions of ``records_per_txn`` records to a new ``topic`` for ``seconds``."""
    from confluent_kafka import Producer

    new_topic(peer, topic)
    producer = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            "transactional.id": f"bench-{topic}-{os.getpid()}",
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1000000,
            "log.connection.close": False,
            **QUIET,
        }
    )
    producer.init_transactions(60)
    partitions = peer.partitions
    value = os.urandom(RECORD_SIZE)
    _one_transaction(producer, topic, value, records_per_txn, partitions)  # warm: coordinator, leaders
    per_txn = records_per_txn + min(partitions, records_per_txn)  # records, then a marker per partition
    before = _settled_end(peer, topic, per_txn)
    clock = time.perf_counter
    commits: list[float] = []
    meter = bb.Meter(peer, "transactions")  # type: ignore[arg-type]
    deadline = clock() + seconds
    while clock() < deadline:
        commits.append(_one_transaction(producer, topic, value, records_per_txn, partitions))
    run = meter.stop()
    del producer
    count = len(commits)
    expected = count * per_txn
    moved = _settled_end(peer, topic, before + expected) - before
    if moved != expected:
        print(f"#   {peer.name}: {topic}: end offsets moved {moved}, expected {expected} (records + markers)")
    commits.sort()
    prefix = f"txn of {records_per_txn} x 100 B"
    cpu = run.broker_cpu
    return {
        f"{prefix}: txn/s": count / run.seconds,
        f"{prefix}: rec/s": count * records_per_txn / run.seconds,
        f"{prefix}: commit p50 ms": 1000 * bb.percentile(commits, 0.5),
        f"{prefix}: commit p99 ms": 1000 * bb.percentile(commits, 0.99),
        f"{prefix}: txn/{peer.scope}-CPU-s": count / cpu if cpu > 0 else float("nan"),
        f"{prefix}: {peer.scope} CPU ms/txn": 1000 * cpu / max(1, count),
    }


def _settled_end(peer: Peer, topic: str, total: int, timeout: float = 10.0) -> int:
    """The sum of ``topic``'s end offsets once it reaches ``total`` (Kafka's coordinator writes the
    markers after EndTxn is answered), or what it is after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        now = sum(end_offsets(peer, topic).values())
        if now >= total or time.monotonic() > deadline:
            return now
        time.sleep(0.05)  # polling the markers' arrival, bounded by the deadline


def _one_transaction(producer: object, topic: str, value: bytes, records: int, partitions: int) -> float:
    """Begin, produce ``records`` round-robin over ``partitions``, commit; the commit's seconds."""
    begin, produce, poll = producer.begin_transaction, producer.produce, producer.poll  # type: ignore[attr-defined]
    begin()
    for index in range(records):
        while True:
            try:
                produce(topic, value, partition=index % partitions)
                break
            except BufferError:
                poll(0.001)
    started = time.perf_counter()
    producer.commit_transaction(60)  # type: ignore[attr-defined]
    return time.perf_counter() - started
