"""Consumers across broker failures, on one 3-broker cluster.

- A confluent-kafka consumer group of two members committing every record survives the SIGKILL of
  the broker leading its ``__consumer_offsets`` partition (its coordinator): the members rejoin, no
  record is read again below an offset already committed, none is skipped.
- confluent-kafka and kafka-python consumers reading continuously follow the leaders across a
  controlled shutdown (SIGTERM) and a SIGKILL without an error reaching the application.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition

from kctl.broker.group.records import partition_for_group
from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import SequencedProducer, create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

OFFSETS_PARTITIONS = 3
PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
}


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


@dataclass
class GroupLedger:
    """What the members of one group read and committed, shared by their threads."""

    consumed: list[tuple[int, int, str]] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    commit_failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def values(self) -> set[str]:
        with self.lock:
            return {value for _, _, value in self.consumed}


def _member(bootstrap: str, group: str, topic: str, ledger: GroupLedger, stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            partition, offset = message.partition(), message.offset()
            with ledger.lock:
                if offset < ledger.committed.get(partition, 0):
                    ledger.violations.append(
                        f"{partition}/{offset} read again below the committed {ledger.committed[partition]}"
                    )
                ledger.consumed.append((partition, offset, message.value().decode()))
            try:
                consumer.commit(message=message, asynchronous=False)
            except KafkaException:
                with ledger.lock:
                    ledger.commit_failures += 1
                continue
            with ledger.lock:
                ledger.committed[partition] = max(ledger.committed.get(partition, 0), offset + 1)
    finally:
        consumer.close()


def test_group_survives_its_coordinator_dying(cluster: LocalCluster, view: ClusterView) -> None:
    topic, group = "group-failover", "survivors"
    create_topic(cluster.bootstrap_servers, topic, 4, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(topic, 4)
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="gr", rate_per_s=200).start()
    ledger, stop = GroupLedger(), threading.Event()
    members = [
        threading.Thread(
            target=_member, args=(cluster.bootstrap_servers, group, topic, ledger, stop), daemon=True
        )
        for _ in range(2)
    ]
    for member in members:
        member.start()
    try:
        view.wait_for(lambda: len(ledger.values()) >= 300, "the group consuming", timeout=60)
        offsets_partition = partition_for_group(group, OFFSETS_PARTITIONS)
        coordinator = view.wait_for_leader("__consumer_offsets", offsets_partition).leader
        cluster.kill(coordinator)
        view.wait_for_leader("__consumer_offsets", offsets_partition, not_in={coordinator})
        progress = len(ledger.values())
        view.wait_for(lambda: len(ledger.values()) >= progress + 300, "the group consuming again", timeout=90)
        cluster.restart(coordinator)
        view.wait_for_full_isr(topic, 4, timeout=60)
        producer.stop()
        acked = {delivery.value for delivery in producer.acked}
        view.wait_for(lambda: acked <= ledger.values(), "every acknowledged record consumed", timeout=90)
    finally:
        stop.set()
        for member in members:
            member.join(30)
        producer.stop()  # idempotent
    assert not producer.errors, producer.errors[:10]
    assert ledger.violations == []
    assert len({partition for partition, _, _ in ledger.consumed}) == 4


def _confluent_reader(
    bootstrap: str, topic: str, partitions: int, out: list[str], errors: list[str], stop: threading.Event
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-assign-only",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(message.error()))
                continue
            out.append(message.value().decode())
    finally:
        consumer.close()


def _kafka_python_reader(
    bootstrap: str, topic: str, partitions: int, out: list[str], errors: list[str], stop: threading.Event
) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, metadata_max_age_ms=1000
    )
    consumer.assign([KafkaPythonTopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    try:
        while not stop.is_set():
            try:
                batches = consumer.poll(timeout_ms=200)
            except Exception as error:  # anything surfacing to the application is a failure
                errors.append(repr(error))
                continue
            for records in batches.values():
                out.extend(record.value.decode() for record in records)
    finally:
        consumer.close()


def test_consumers_follow_leader_changes_without_errors(cluster: LocalCluster, view: ClusterView) -> None:
    topic, partitions = "follow-leaders", 2
    create_topic(cluster.bootstrap_servers, topic, partitions, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(topic, partitions)
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="fl", rate_per_s=200).start()
    stop = threading.Event()
    read: dict[str, list[str]] = {"confluent-kafka": [], "kafka-python": []}
    errors: dict[str, list[str]] = {"confluent-kafka": [], "kafka-python": []}
    readers = [
        threading.Thread(
            target=reader,
            args=(cluster.bootstrap_servers, topic, partitions, read[name], errors[name], stop),
            daemon=True,
        )
        for name, reader in (("confluent-kafka", _confluent_reader), ("kafka-python", _kafka_python_reader))
    ]
    for reader in readers:
        reader.start()
    try:
        view.wait_for(lambda: min(len(r) for r in read.values()) >= 200, "both consumers reading", timeout=60)
        # a controlled shutdown of partition 0's leader, then a SIGKILL of partition 1's leader
        for partition, clean in ((0, True), (1, False)):
            leader = view.wait_for_leader(topic, partition).leader
            if clean:
                cluster.stop_broker(leader)
            else:
                cluster.kill(leader)
            view.wait_for_leader(topic, partition, not_in={leader})
            progress = min(len(r) for r in read.values())
            view.wait_for(
                lambda p=progress: min(len(r) for r in read.values()) >= p + 200,
                "consumers reading on",
                timeout=60,
            )
            cluster.restart(leader)
            view.wait_for_full_isr(topic, partitions, timeout=60)
        producer.stop()
        acked = [delivery.value for delivery in producer.acked]
        deadline = time.monotonic() + 60
        while any(len(r) < len(acked) for r in read.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        for reader in readers:
            reader.join(30)
        producer.stop()  # idempotent
    assert not producer.errors, producer.errors[:10]
    for name in read:
        assert errors[name] == [], f"{name} surfaced errors: {errors[name][:5]}"
        assert sorted(read[name]) == sorted(acked), f"{name} read {len(read[name])} of {len(acked)} records"
