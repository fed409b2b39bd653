"""The transaction coordinator against confluent-kafka's (librdkafka's) transactional producer on the
embedded broker (issue 27 §1): commit (seen by a read_committed consumer on every partition of the
transaction), abort (never seen by read_committed, seen by read_uncommitted), fencing of an older
producer with the same transactional.id, the proactive abort of a transaction open past its timeout,
and FindCoordinator / InitProducerId / DescribeTransactions / ListTransactions answers; kafka-python's
transactional producer too."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import kafka
import pytest
from raw_kafka import RawConnection, create_topic, unique
from txn_support import consume_all, describe, last_stable_offset, produce_to_all, two_topics

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.transactions import ListTransactionsRequest
from kctl.testing import BrokerProcess
from kctl.testing.helpers import wait_for
from kctl.testing.pytest_plugin import BrokerFactory

TIMEOUT_S = 30.0
FAST_ABORT = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "transaction.max.timeout.ms": "120000",
}


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory(FAST_ABORT)


def transactional_producer(broker: BrokerProcess, transactional_id: str, **extra: Any) -> ck.Producer:
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def test_committed_transaction_is_seen_on_every_partition(broker: BrokerProcess) -> None:
    topics = two_topics(broker)
    tid = unique("tid-commit")
    producer = transactional_producer(broker, tid)
    producer.begin_transaction()
    first = produce_to_all(producer, topics, "one")
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()  # the next one on the same producer (markers may still be in flight)
    second = produce_to_all(producer, topics, "two")
    producer.commit_transaction(TIMEOUT_S)
    got = consume_all(broker, topics, "read_committed", len(first) + len(second))
    assert sorted(got) == sorted(first + second)
    with RawConnection(broker.bootstrap) as conn:
        state = wait_for(
            lambda: (s := describe(conn, tid)).transaction_state == "CompleteCommit" and s,
            "the transaction to complete",
        )
        assert state.error_code == 0 and state.topics == []
        for topic, partitions in topics.items():
            for partition in range(partitions):
                assert last_stable_offset(conn, topic, partition) == 8  # 2 x (3 records + a marker)


def test_aborted_transaction_is_never_read_committed(broker: BrokerProcess) -> None:
    topics = two_topics(broker)
    producer = transactional_producer(broker, unique("tid-abort"))
    producer.begin_transaction()
    aborted = produce_to_all(producer, topics, "aborted")
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    committed = produce_to_all(producer, topics, "committed")
    producer.commit_transaction(TIMEOUT_S)
    assert sorted(consume_all(broker, topics, "read_committed", len(committed))) == sorted(committed)
    everything = consume_all(broker, topics, "read_uncommitted", len(aborted) + len(committed))
    assert sorted(everything) == sorted(aborted + committed)


def test_a_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    topics = two_topics(broker)
    tid = unique("tid-fence")
    zombie = transactional_producer(broker, tid)
    zombie.begin_transaction()
    lost = produce_to_all(zombie, topics, "zombie")
    zombie.flush(TIMEOUT_S)
    successor = transactional_producer(broker, tid)  # aborts the zombie's transaction, bumps the epoch
    successor.begin_transaction()
    kept = produce_to_all(successor, topics, "successor")
    successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(ck.KafkaException) as raised:  # EndTxn with the old epoch: fenced by the coordinator
        zombie.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED), error
    assert sorted(consume_all(broker, topics, "read_committed", len(kept))) == sorted(kept)
    assert len(consume_all(broker, topics, "read_uncommitted", len(lost) + len(kept))) == len(lost + kept)


def test_a_transaction_open_past_its_timeout_is_aborted(broker: BrokerProcess) -> None:
    topic = unique("txn-timeout")
    assert create_topic(broker.bootstrap, topic) == 0
    tid = unique("tid-timeout")
    producer = transactional_producer(broker, tid, **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    producer.flush(TIMEOUT_S)
    with RawConnection(broker.bootstrap) as conn:
        ongoing = describe(conn, tid)
        assert (ongoing.transaction_state, ongoing.transaction_timeout_ms) == ("Ongoing", 1500)
        assert last_stable_offset(conn, topic) == 0  # held back by the open transaction
        aborted = wait_for(
            lambda: (s := describe(conn, tid)).transaction_state == "CompleteAbort" and s,
            "the coordinator to abort the timed-out transaction",
        )
        assert aborted.producer_epoch == ongoing.producer_epoch + 1  # the producer is fenced
        assert wait_for(lambda: last_stable_offset(conn, topic) == 6, "the LSO to pass the abort marker")
    assert consume_all(broker, {topic: 1}, "read_uncommitted", 5) == [f"v{i}".encode() for i in range(5)]
    with pytest.raises(ck.KafkaException):
        producer.commit_transaction(TIMEOUT_S)
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "isolation.level": "read_committed"}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        seen = [m for m in consumer.consume(10, timeout=2.0) if m.error() is None]
        assert seen == []
    finally:
        consumer.close()


def test_coordinator_answers(broker: BrokerProcess) -> None:
    tid = unique("tid-raw")
    with RawConnection(broker.bootstrap) as conn:

        def find(version: int) -> Any:
            request = FindCoordinatorRequest(key=tid, key_type=1, coordinator_keys=[tid, ""])
            return conn.request(kp.ApiKey.FIND_COORDINATOR, version, request)

        old = wait_for(lambda: (r := find(3)).error_code == 0 and r, "a transaction coordinator")
        assert old.node_id == broker.broker_id
        found, empty = find(4).coordinators
        assert (found.error_code, found.node_id, empty.error_code) == (
            0,
            broker.broker_id,
            ErrorCode.INVALID_REQUEST,
        )

        def init(timeout_ms: int = 60000, **ids: int) -> Any:
            request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms, **ids)
            return wait_for(
                lambda: (
                    (r := conn.request(kp.ApiKey.INIT_PRODUCER_ID, 4, request)).error_code
                    != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                    and r
                ),
                "the coordinator to load",
            )

        assert init(timeout_ms=10**9).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        first = init()
        assert (first.error_code, first.producer_epoch) == (0, 0)
        second = init()
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        retried = init(producer_id=first.producer_id, producer_epoch=0)  # KIP-360: a lost bump's retry
        assert (retried.error_code, retried.producer_epoch) == (0, 1)
        bumped = init(producer_id=first.producer_id, producer_epoch=1)
        assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
        fenced = init(producer_id=first.producer_id, producer_epoch=0)  # older than the last bump
        assert fenced.error_code == ErrorCode.PRODUCER_FENCED
        state = describe(conn, tid)
        assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 2)
        listed = conn.request(
            kp.ApiKey.LIST_TRANSACTIONS,
            1,
            ListTransactionsRequest(
                state_filters=["Empty", "Bogus"], producer_id_filters=[first.producer_id]
            ),
        )
        assert listed.unknown_state_filters == ["Bogus"]
        assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [
            (tid, "Empty")
        ]
        unknown = describe(conn, unique("never-used"))
        assert unknown.error_code in (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR)


def test_kafka_python_transactional_producer(broker: BrokerProcess) -> None:
    topics = two_topics(broker)
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=unique("tid-kafka-python"), max_block_ms=30000
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for topic in topics:
            producer.send(topic, b"aborted", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        committed = [f"kp-{topic}".encode() for topic in topics]
        for topic, value in zip(topics, committed, strict=True):
            producer.send(topic, value, partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert sorted(consume_all(broker, topics, "read_committed", len(committed))) == sorted(committed)
