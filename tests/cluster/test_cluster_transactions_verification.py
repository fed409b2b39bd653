"""KIP-890 part 1 on a 3-broker cluster (RF 3, min ISR 2): the partition's leader is another broker
than the transactional id's coordinator, so the leader asks it over the inter-broker channel
(AddPartitionsToTxn v4, verify-only). A confluent-kafka transactional producer's transactions over
three partitions commit as before (their first batches verified remotely); a Produce delayed past
its transaction's abort, sent raw to a leader that is not the coordinator, is refused with
INVALID_TXN_STATE and leaves no open transaction (the last stable offset reaches the end)."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import unique
from txn_support import batch

import kctl.protocol as kp
from kctl.client.cluster import ClusterClient
from kctl.client.errors import BrokerResponseError
from kctl.client.group.coordinator import find_coordinators
from kctl.client.types import TopicPartition
from kctl.protocol import ErrorCode
from kctl.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kctl.protocol.messages.end_txn import EndTxnRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.protocol.messages.transactions import DescribeTransactionsRequest
from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import create_topic
from kctl.testing.helpers import wait_for
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
PARTITIONS = 3
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


def create_replicated(bootstrap: str, topic: str) -> None:
    """The topic with RF 3, once the controller counts the three brokers (a loaded machine can
    leave one briefly unregistered: INVALID_REPLICATION_FACTOR then)."""

    def created() -> bool:
        try:
            create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        except ck.KafkaException as error:
            if error.args[0].code() != ck.KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            return False
        return True

    wait_for(created, f"topic {topic} with replication factor 3", TIMEOUT_S)


def test_confluent_transactions_commit_with_remote_verification(cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topic = unique("verify-cluster")
    create_replicated(bootstrap, topic)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tid"), "acks": "all"})
    producer.init_transactions(TIMEOUT_S)
    expected = []
    for n in range(4):
        producer.begin_transaction()
        for partition in range(PARTITIONS):
            for i in range(5):
                value = f"t{n}-p{partition}-{i}".encode()
                producer.produce(topic, value, partition=partition)
                expected.append(value)
        producer.commit_transaction(TIMEOUT_S)
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("g"), "isolation.level": "read_committed"}
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: list[bytes] = []

    def all_read() -> bool:
        got.extend(m.value() for m in consumer.consume(500, timeout=0.5) if m.error() is None)
        return len(got) >= len(expected)

    try:
        wait_for(all_read, "every committed record", TIMEOUT_S)
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected)


def _ok(response: Any, what: str) -> Any:
    if response.error_code:
        raise BrokerResponseError(response.error_code, context=what)
    return response


def test_a_late_produce_to_a_leader_that_is_not_the_coordinator_is_refused(cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topic, tid = unique("verify-late"), unique("tid-late")
    create_replicated(bootstrap, topic)
    with ClusterClient(bootstrap) as client:
        deadline = client.deadline(TIMEOUT_S)
        [where] = find_coordinators(client, [tid], deadline=deadline, key_type=1).values()
        assert not isinstance(where, BrokerResponseError), where
        coordinator = client.connection(where.node_id, deadline=deadline)
        leaders = {
            p: client.retry(lambda p=p: client.leader_for(TopicPartition(topic, p), deadline=deadline))
            for p in range(PARTITIONS)
        }
        others = [p for p, leader in leaders.items() if leader != where.node_id]
        if not others:
            pytest.skip(f"the coordinator {where.node_id} leads every partition: {leaders}")
        partition = others[0]
        leader = client.connection(leaders[partition], deadline=deadline)

        init = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000)
        ids = client.retry(
            lambda: _ok(coordinator.request(kp.ApiKey.INIT_PRODUCER_ID, init), "InitProducerId")
        )
        pid, epoch = ids.producer_id, ids.producer_epoch
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[partition])],
        )
        [added] = coordinator.request(kp.ApiKey.ADD_PARTITIONS_TO_TXN, add, 3).results_by_topic_v3_and_below
        assert [r.partition_error_code for r in added.results_by_partition] == [0]

        def produce(values: list[bytes], sequence: int) -> Any:
            request = ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout_ms=10000,
                topic_data=[
                    TopicProduceData(
                        name=topic,
                        partition_data=[
                            PartitionProduceData(
                                index=partition, records=batch(values, pid, sequence, transactional=True)
                            )
                        ],
                    )
                ],
            )
            [part] = leader.request(kp.ApiKey.PRODUCE, request).responses[0].partition_responses
            return part

        assert produce([b"t0", b"t1"], 0).error_code == 0  # verified by the remote coordinator
        end = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False)
        _ok(coordinator.request(kp.ApiKey.END_TXN, end), "EndTxn")

        def state() -> str:
            request = DescribeTransactionsRequest(transactional_ids=[tid])
            [described] = coordinator.request(kp.ApiKey.DESCRIBE_TRANSACTIONS, request).transaction_states
            return str(described.transaction_state)

        wait_for(lambda: state() == "CompleteAbort", "CompleteAbort", TIMEOUT_S)

        late = produce([b"late"], 2)
        assert late.error_code == ErrorCode.INVALID_TXN_STATE, late

        def end_offset(isolation_level: int) -> int:
            request = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    ListOffsetsTopic(
                        name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)]
                    )
                ],
            )
            [t] = leader.request(kp.ApiKey.LIST_OFFSETS, request).topics
            return int(t.partitions[0].offset)

        wait_for(
            lambda: end_offset(1) == 3, "the LSO past the ABORT marker (2 records and the marker)", TIMEOUT_S
        )
        assert end_offset(0) == 3  # nothing appended after the marker
