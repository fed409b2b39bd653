"""kctl.client's transactional producer and read_committed consumer against a real `kctl broker
start` (issue 27 §3): a committed transaction is visible to read_committed (kctl's consumer and
confluent-kafka's), an aborted one never is, aborted batches interleaved with committed ones in the
same partition are dropped by kctl's read_committed consumer (and kept by read_uncommitted, markers
never returned), a zombie producer is fenced with a typed exception, send_offsets_to_transaction
commits a group's offsets with the transaction, and the transactional API refuses calls out of order."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from raw_kafka import create_topic, unique

from kctl.client import ClientConfigError
from kctl.client.consumer import Consumer
from kctl.client.errors import (
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionStateError,
)
from kctl.client.producer import Producer
from kctl.common.topic_partition import TopicPartition
from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory({})


def read(broker: BrokerProcess, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every record kctl's consumer returns from the beginning up to the end offsets (the LSO for
    read_committed), in partition then offset order."""
    out: list[bytes] = []
    with Consumer(
        broker.bootstrap, {"isolation.level": isolation, "auto.offset.reset": "earliest"}
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: dict[TopicPartition, list[tuple[int, bytes]]] = {tp: [] for tp in tps}

        deadline = time.monotonic() + TIMEOUT
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kctl's consumer did not reach the end offsets"
            for record in consumer.poll(0.5):
                got[TopicPartition(record.topic, record.partition)].append((record.offset, record.value))
        for tp in tps:
            out += [value for _, value in sorted(got[tp])]
    return out


def read_confluent(broker: BrokerProcess, topic: str, expected: int) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == ck.KafkaError._PARTITION_EOF and len(values) >= expected:
                    break
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def producer(broker: BrokerProcess, tid: str) -> Producer:
    p = Producer(broker.bootstrap, {"transactional.id": tid, "linger.ms": "5"})
    p.init_transactions(TIMEOUT)
    return p


def test_commit_is_visible_and_abort_never(broker: BrokerProcess) -> None:
    topic = unique("txn-client")
    create_topic(broker.bootstrap, topic, partitions=1)
    with producer(broker, unique("tid")) as p:
        p.begin_transaction()
        for i in range(5):
            p.send(topic, f"c1-{i}".encode())
        p.commit_transaction(TIMEOUT)
        p.begin_transaction()
        for i in range(5):
            p.send(topic, f"a-{i}".encode())
        p.abort_transaction(TIMEOUT)
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"c2-{i}".encode())
        p.commit_transaction(TIMEOUT)
    committed = [f"c1-{i}".encode() for i in range(5)] + [f"c2-{i}".encode() for i in range(3)]
    assert read(broker, topic, "read_committed") == committed
    assert read_confluent(broker, topic, len(committed)) == committed
    # read_uncommitted sees the aborted records too, but never the markers
    everything = read(broker, topic, "read_uncommitted")
    assert everything == committed[:5] + [f"a-{i}".encode() for i in range(5)] + committed[5:]


def test_read_committed_drops_aborted_batches_interleaved_with_committed(broker: BrokerProcess) -> None:
    """Two producers write to the same partition at once, one commits, the other aborts: their
    batches alternate in the log, and only the committed ones come back."""
    topic = unique("txn-interleaved")
    create_topic(broker.bootstrap, topic, partitions=1)
    with producer(broker, unique("tid-c")) as good, producer(broker, unique("tid-a")) as bad:
        good.begin_transaction()
        bad.begin_transaction()
        for i in range(6):
            good.produce_sync(topic, f"good-{i}".encode(), timeout=TIMEOUT)
            bad.produce_sync(topic, f"bad-{i}".encode(), timeout=TIMEOUT)
        bad.abort_transaction(TIMEOUT)
        good.commit_transaction(TIMEOUT)
    want = [f"good-{i}".encode() for i in range(6)]
    assert read(broker, topic, "read_committed") == want
    assert read_confluent(broker, topic, len(want)) == want
    assert len(read(broker, topic, "read_uncommitted")) == 12


def test_zombie_producer_is_fenced(broker: BrokerProcess) -> None:
    topic = unique("txn-fence")
    create_topic(broker.bootstrap, topic, partitions=1)
    tid = unique("tid-zombie")
    with producer(broker, tid) as zombie:
        zombie.begin_transaction()
        zombie.produce_sync(topic, b"zombie", timeout=TIMEOUT)
        with producer(broker, tid) as successor:  # fences the zombie and aborts its transaction
            successor.begin_transaction()
            successor.produce_sync(topic, b"successor", timeout=TIMEOUT)
            successor.commit_transaction(TIMEOUT)
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            zombie.commit_transaction(TIMEOUT)
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            zombie.begin_transaction()
    assert read(broker, topic, "read_committed") == [b"successor"]


def test_send_offsets_to_transaction_commits_with_the_transaction(broker: BrokerProcess) -> None:
    topic = unique("txn-offsets")
    create_topic(broker.bootstrap, topic, partitions=1)
    group = unique("txn-group")
    tp = TopicPartition(topic, 0)
    with producer(broker, unique("tid-off")) as p:
        p.begin_transaction()
        p.send(topic, b"x")
        p.send_offsets_to_transaction({tp: 7}, group, TIMEOUT)
        p.abort_transaction(TIMEOUT)
        p.begin_transaction()
        p.send(topic, b"y")
        p.send_offsets_to_transaction({tp: 42}, group, TIMEOUT)
        p.commit_transaction(TIMEOUT)
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        (committed,) = consumer.committed([ck.TopicPartition(topic, 0)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert committed.offset == 42


def test_transactional_calls_out_of_order() -> None:
    with pytest.raises(ClientConfigError):
        Producer("127.0.0.1:1", {"transactional.id": "t", "enable.idempotence": "false"})
    with Producer("127.0.0.1:1", {"transactional.id": "t"}) as p:
        with pytest.raises(TransactionStateError):
            p.send("topic", b"v")  # before init_transactions / begin_transaction
        with pytest.raises(TransactionStateError):
            p.commit_transaction(1.0)
    with Producer("127.0.0.1:1") as plain, pytest.raises(TransactionStateError):
        plain.begin_transaction()
