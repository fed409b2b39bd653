"""Partitioners (kctl.client.partitioner): murmur2 exactly as Kafka's Java client (checked against
Kafka's published test vectors and against where confluent-kafka's `murmur2_random` partitioner puts
the same keys on a real broker), sticky partitioning without a key, round-robin, random, and custom
partitioners loaded by import path."""

from __future__ import annotations

import collections
import random
from collections.abc import Sequence

import confluent_kafka as ck
import pytest
from raw_kafka import unique

from kctl.client import AdminClient, NewTopic
from kctl.client.partitioner import (
    DefaultPartitioner,
    RandomPartitioner,
    RoundRobinPartitioner,
    load_partitioner,
    murmur2,
    murmur2_partition,
)
from kctl.client.producer import Producer
from kctl.testing import BrokerProcess

PARTITIONS = tuple(range(7))


class LastPartitioner:
    """A custom partitioner (loaded by tests through ``test_partitioner:LastPartitioner``)."""

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        return partitions[-1]


class NoBatchHook:
    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        return partitions[0]


def test_murmur2_matches_kafkas_java_test_vectors() -> None:
    # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {key: murmur2(key) for key in cases} == cases


def test_murmur2_placement_matches_confluent_kafka(broker: BrokerProcess) -> None:
    """confluent-kafka with partitioner=murmur2_random and kctl's default partitioner put every key in
    the same partition of a 7-partition topic on the same broker."""
    topic = unique("murmur")
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(topic, len(PARTITIONS), 1)])
        assert result.ok, result
    rng = random.Random(4)
    keys = [b"key-%d" % i for i in range(300)] + [rng.randbytes(rng.randrange(0, 40)) for _ in range(300)]
    keys.append("ünïcødé".encode())

    theirs: dict[bytes, int] = {}
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})

    def delivered(error: object, message: ck.Message) -> None:
        assert error is None, error
        theirs[message.key()] = message.partition()

    for key in keys:
        producer.produce(topic, b"v", key=key, on_delivery=delivered)
    assert producer.flush(30) == 0

    with Producer(broker.bootstrap) as ours:
        futures = {key: ours.send(topic, b"v", key=key) for key in keys}
        placed = {key: future.result(30).partition for key, future in futures.items()}
    assert placed == theirs
    assert {key: murmur2_partition(key, len(PARTITIONS)) for key in keys} == theirs
    assert set(theirs.values()) == set(PARTITIONS)


def test_default_partitioner_is_sticky_without_a_key() -> None:
    partitioner = DefaultPartitioner()
    first = partitioner.partition("t", None, PARTITIONS, PARTITIONS)
    assert {partitioner.partition("t", None, PARTITIONS, PARTITIONS) for _ in range(100)} == {first}
    chosen = set()
    for _ in range(200):
        current = partitioner.partition("t", None, PARTITIONS, PARTITIONS)
        partitioner.on_new_batch("t", current)  # a batch was sent: move on
        chosen.add(partitioner.partition("t", None, PARTITIONS, PARTITIONS))
    assert chosen == set(PARTITIONS)
    # only partitions with a leader are chosen for records without a key
    assert {DefaultPartitioner().partition("t", None, PARTITIONS, (2, 5)) for _ in range(50)} <= {2, 5}
    # keyed records ignore stickiness and availability
    assert partitioner.partition("t", b"foobar", PARTITIONS, (0,)) == murmur2_partition(b"foobar", 7)


def test_round_robin_cycles_over_available_partitions() -> None:
    partitioner = RoundRobinPartitioner()
    picks = [partitioner.partition("t", b"same key", PARTITIONS, PARTITIONS) for _ in range(21)]
    assert picks == list(PARTITIONS) * 3
    other = [partitioner.partition("u", None, PARTITIONS, (1, 3)) for _ in range(4)]
    assert other == [1, 3, 1, 3]


def test_random_spreads_evenly() -> None:
    partitioner = RandomPartitioner()
    counts = collections.Counter(
        partitioner.partition("t", b"k", PARTITIONS, PARTITIONS) for _ in range(7000)
    )
    assert set(counts) == set(PARTITIONS)
    assert all(700 < n < 1300 for n in counts.values()), counts


def test_load_partitioner_by_name_and_import_path() -> None:
    assert isinstance(load_partitioner(None), DefaultPartitioner)
    assert isinstance(load_partitioner("murmur2_random"), DefaultPartitioner)
    assert isinstance(load_partitioner("round_robin"), RoundRobinPartitioner)
    assert isinstance(load_partitioner("random"), RandomPartitioner)
    custom = load_partitioner("test_partitioner:LastPartitioner")
    assert isinstance(custom, LastPartitioner) and custom.partition("t", None, PARTITIONS, ()) == 6
    hookless = load_partitioner("test_partitioner.NoBatchHook")
    hookless.on_new_batch("t", 0)  # added when the class has none
    for bad in ("nosuchname", "no_such_module.Thing", "test_partitioner:Missing"):
        with pytest.raises(ValueError):
            load_partitioner(bad)


def test_round_robin_producer_spreads_records(broker: BrokerProcess) -> None:
    topic = unique("rr")
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(topic, 3, 1)])
        assert result.ok
    with Producer(broker.bootstrap, partitioner_class="round_robin") as producer:
        partitions = [producer.send(topic, b"v", key=b"k").result(30).partition for _ in range(9)]
    assert collections.Counter(partitions) == {0: 3, 1: 3, 2: 3}
