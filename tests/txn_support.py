"""Helpers for the transaction tests (tests/broker/test_transactions_*.py): a record batch, optionally
transactional, from a producer id; a raw acks=all Produce of it to partition 0; and a confluent-kafka
consumer reading partition 0 at an isolation level until it has the records expected; for the
coordinator's tests (test_transactions_coordinator*.py) two topics (three partitions) to write
transactions to, a consumer of all of them, the last stable offset, DescribeTransactions of one id;
and a hanging transaction left on a partition (``leave_hanging_transaction``)."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck
from raw_kafka import RawConnection, create_topic, unique

import kctl.protocol as kp
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.protocol.messages.transactions import DescribeTransactionsRequest
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import BrokerProcess
from kctl.testing.helpers import wait_for

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
UNVERIFIED = {"transaction.partition.verification.enable": "false"}
"""Broker properties for tests that play the coordinator by hand (raw transactional Produce without
AddPartitionsToTxn) or leave hanging transactions: KIP-890's verification would refuse their writes."""


def batch(
    values: list[bytes], producer_id: int = -1, sequence: int = 0, *, transactional: bool = False
) -> bytes:
    """A batch of ``values``; with a producer id (epoch 0, first sequence ``sequence``), idempotent or
    ``transactional``."""
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    now = int(time.time() * 1000)
    for value in values:
        builder.append(now, None, value)
    return builder.build()


def produce(conn: RawConnection, topic: str, records: bytes, transactional_id: str | None = None) -> Any:
    """Produce v9, acks=all, to partition 0: its partition response."""
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )
    [topic_response] = conn.request(kp.ApiKey.PRODUCE, 9, request).responses
    [part] = topic_response.partition_responses
    return part


def consume(broker: BrokerProcess, topic: str, isolation: str, expected: int) -> list[bytes]:
    """The values a confluent-kafka consumer at ``isolation`` reads from partition 0: at least
    ``expected`` of them, then whatever else comes within a second."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []

    def done() -> bool:
        for message in consumer.consume(100, timeout=0.5):
            assert message.error() is None, message.error()
            got.append(message.value())
        return len(got) >= expected

    try:
        wait_for(done, f"{isolation} consumer to get {expected} records", describe=lambda: f"got {got}")
        got.extend(m.value() for m in consumer.consume(100, timeout=1.0) if m.error() is None)  # no more
    finally:
        consumer.close()
    return got


def consume_all(broker: BrokerProcess, topics: dict[str, int], isolation: str, expected: int) -> list[bytes]:
    """Every value a confluent-kafka consumer at ``isolation`` reads from the partitions of ``topics``
    (name -> partition count): at least ``expected``, then whatever else comes within a second."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([ck.TopicPartition(t, p, 0) for t, count in topics.items() for p in range(count)])
    got: list[bytes] = []

    def poll() -> bool:
        for message in consumer.consume(500, timeout=0.3):
            assert message.error() is None, message.error()
            got.append(message.value())
        return len(got) >= expected

    try:
        wait_for(poll, f"{isolation} consumer to get {expected} records", describe=lambda: f"got {got}")
        got.extend(m.value() for m in consumer.consume(500, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    return got


def last_stable_offset(conn: RawConnection, topic: str, partition: int = 0) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=READ_COMMITTED,
        topics=[
            ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)]
            )
        ],
    )
    [topic_response] = conn.request(kp.ApiKey.LIST_OFFSETS, 5, request).topics
    [part] = topic_response.partitions
    assert part.error_code == 0
    offset: int = part.offset
    return offset


def describe(conn: RawConnection, transactional_id: str) -> Any:
    [state] = conn.request(
        kp.ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=[transactional_id])
    ).transaction_states
    return state


def two_topics(broker: BrokerProcess) -> dict[str, int]:
    topics = {unique("txn-a"): 2, unique("txn-b"): 1}
    for name, partitions in topics.items():
        assert create_topic(broker.bootstrap, name, partitions) == 0
    return topics


def produce_to_all(producer: ck.Producer, topics: dict[str, int], prefix: str) -> list[bytes]:
    values = []
    for topic, partitions in topics.items():
        for partition in range(partitions):
            for i in range(3):
                value = f"{prefix}-{topic}-{partition}-{i}".encode()
                producer.produce(topic, value, partition=partition)
                values.append(value)
    return values


def leave_hanging_transaction(
    bootstrap: str, topic: str, partition: int, values: list[bytes]
) -> tuple[int, int]:
    """Leave a transaction on the partition that no coordinator will end, the way hanging
    transactions arise (KIP-664, and how Kafka's tools tests make one): a transactional id gets its
    producer id (InitProducerId from its coordinator), then a transactional batch reaches the
    partition's leader without the partition ever being added to the transaction (a write delayed
    past its transaction's end looks the same to the leader). Brokers refuse this with KIP-890's
    verification, so theirs must be off (``transaction.partition.verification.enable=false``).
    Returns the (producer id, producer epoch) holding the partition open."""
    from kctl.client.cluster import ClusterClient
    from kctl.client.errors import BrokerResponseError
    from kctl.client.group.coordinator import find_coordinators
    from kctl.client.types import TopicPartition
    from kctl.protocol.messages.init_producer_id import InitProducerIdRequest

    tid = unique("hanging-tid")
    with ClusterClient(bootstrap) as cluster:
        deadline = cluster.deadline(60)

        def init() -> Any:
            [where] = find_coordinators(cluster, [tid], deadline=deadline, key_type=1).values()
            if isinstance(where, BrokerResponseError):
                raise where
            conn = cluster.connection(where.node_id, deadline=deadline)
            request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000)
            r = conn.request(kp.ApiKey.INIT_PRODUCER_ID, request, timeout=10)
            if r.error_code:
                raise BrokerResponseError(r.error_code, context="InitProducerId")
            return r

        ids = cluster.retry(init, deadline=deadline)
        records = RecordBatchBuilder(
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        now = int(time.time() * 1000)
        for value in values:
            records.append(now, None, value)
        request = ProduceRequest(
            transactional_id=tid,
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[PartitionProduceData(index=partition, records=records.build())],
                )
            ],
        )

        def write() -> None:
            leader = cluster.leader_for(TopicPartition(topic, partition), deadline=deadline)
            response = cluster.connection(leader, deadline=deadline).request(
                kp.ApiKey.PRODUCE, request, timeout=15
            )
            [part] = response.responses[0].partition_responses
            if part.error_code:
                cluster.mark_stale()
                raise BrokerResponseError(part.error_code, part.error_message, context=f"produce to {topic}")

        cluster.retry(write, deadline=deadline)
    return int(ids.producer_id), int(ids.producer_epoch)
