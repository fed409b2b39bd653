"""The transaction coordinator's state survives a SIGKILL of the embedded broker (issue 27 §1): a
confluent-kafka producer whose broker is killed and restarted in the middle of a transaction commits it
afterwards, and a read_committed consumer sees its records exactly once; a transaction whose
PrepareCommit is in ``__transaction_state`` but whose markers were never written (the record is put
there while the broker is down, as a coordinator that died between the two leaves it) is completed by
the restarted coordinator — COMMIT markers on its partitions, then CompleteCommit — exactly once. Also
AddOffsetsToTxn, AddPartitionsToTxn v4 verify-only and the error codes of old versions, raw; the expiry of
an idle transactional id."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import RawConnection, create_topic, unique
from txn_support import batch, consume_all, describe, produce, produce_to_all, two_topics

import kctl.protocol as kp
from kctl.broker.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    encode_key,
    encode_value,
    partition_for_transactional_id,
)
from kctl.broker.transaction.state import TransactionMetadata, TransactionState
from kctl.common.topic_partition import TopicPartition
from kctl.log.log import Log
from kctl.log.naming import partition_dir_name
from kctl.protocol import ErrorCode
from kctl.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kctl.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kctl.protocol.messages.end_txn import EndTxnRequest
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import BrokerProcess
from kctl.testing.helpers import wait_for
from kctl.testing.pytest_plugin import BrokerFactory

TIMEOUT_S = 30.0
STATE_PARTITIONS = 4


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory({"transaction.state.log.num.partitions": str(STATE_PARTITIONS)})


def test_sigkill_in_the_middle_of_a_transaction(broker: BrokerProcess) -> None:
    topics = two_topics(broker)
    tid = unique("tid-kill")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    before = produce_to_all(producer, topics, "before")
    producer.flush(TIMEOUT_S)
    assert broker.kill() == -9
    broker.start()
    after = produce_to_all(producer, topics, "after")
    producer.commit_transaction(TIMEOUT_S)
    got = consume_all(broker, topics, "read_committed", len(before) + len(after))
    assert sorted(got) == sorted(before + after)  # each exactly once
    with RawConnection(broker.bootstrap) as conn:
        wait_for(lambda: describe(conn, tid).transaction_state == "CompleteCommit", "CompleteCommit")


def _request(conn: RawConnection, api: int, version: int, request: Any) -> Any:
    return wait_for(
        lambda: (
            (r := conn.request(api, version, request)).error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            and r
        ),
        "the coordinator to answer",
    )


def test_a_prepare_commit_left_by_a_dead_coordinator_is_completed(broker: BrokerProcess) -> None:
    topic = unique("txn-prepared")
    assert create_topic(broker.bootstrap, topic, 2) == 0
    tid = unique("tid-prepared")
    with RawConnection(broker.bootstrap) as conn:
        find = FindCoordinatorRequest(key=tid, key_type=1)  # creates __transaction_state
        assert _request(conn, kp.ApiKey.FIND_COORDINATOR, 3, find).node_id == broker.broker_id
        init = _request(
            conn,
            kp.ApiKey.INIT_PRODUCER_ID,
            4,
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=600000),
        )
        assert init.error_code == 0
        added = conn.request(
            kp.ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])],
            ),
        )
        [result] = added.results_by_topic_v3_and_below
        assert [p.partition_error_code for p in result.results_by_partition] == [0]
        assert (
            produce(conn, topic, batch([b"p0", b"p1"], init.producer_id, transactional=True), tid).error_code
            == 0
        )
        ongoing = describe(conn, tid)
        assert (ongoing.transaction_state, [(t.topic, t.partitions) for t in ongoing.topics]) == (
            "Ongoing",
            [(topic, [0])],
        )
    assert broker.kill() == -9
    # what a coordinator that died right after writing PrepareCommit leaves behind
    state_partition = partition_for_transactional_id(tid, STATE_PARTITIONS)
    tp = TopicPartition(TRANSACTION_STATE_TOPIC, state_partition)
    state_dir = broker.data_dir / partition_dir_name(tp)
    assert state_dir.is_dir()
    state_log = Log(state_dir, tp)
    try:
        prepared = TransactionMetadata(
            tid,
            init.producer_id,
            init.producer_epoch,
            600000,
            TransactionState.PREPARE_COMMIT,
            frozenset({TopicPartition(topic, 0)}),
            start_ms=ongoing.transaction_start_time_ms,
            last_update_ms=ongoing.transaction_start_time_ms,
        )
        builder = RecordBatchBuilder()
        builder.append(ongoing.transaction_start_time_ms, encode_key(tid), encode_value(prepared))
        state_log.append(builder.build())
    finally:
        state_log.close()
    broker.start()
    with RawConnection(broker.bootstrap) as conn:
        wait_for(
            lambda: describe(conn, tid).transaction_state == "CompleteCommit", "the loaded commit to complete"
        )
    assert consume_all(broker, {topic: 1}, "read_committed", 2) == [b"p0", b"p1"]


def test_add_offsets_verify_only_and_old_versions(broker: BrokerProcess) -> None:
    """AddOffsetsToTxn puts the group's __consumer_offsets partition in the transaction (its marker is
    written there on commit); AddPartitionsToTxn v4 verify-only adds nothing and answers per partition;
    an older producer epoch is PRODUCER_FENCED from v2 and INVALID_PRODUCER_EPOCH before."""
    topic = unique("txn-offsets")
    assert create_topic(broker.bootstrap, topic, 2) == 0
    tid, group = unique("tid-offsets"), unique("group")
    with RawConnection(broker.bootstrap) as conn:
        assert (
            _request(
                conn, kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=tid, key_type=1)
            ).error_code
            == 0
        )
        init = _request(
            conn,
            kp.ApiKey.INIT_PRODUCER_ID,
            4,
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000),
        )
        pid, epoch = init.producer_id, init.producer_epoch

        def add(version: int, producer_epoch: int) -> int:
            request = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])],
            )
            [result] = conn.request(
                kp.ApiKey.ADD_PARTITIONS_TO_TXN, version, request
            ).results_by_topic_v3_and_below
            [partition] = result.results_by_partition
            code: int = partition.partition_error_code
            return code

        assert add(3, epoch) == 0
        assert (add(1, epoch - 1 if epoch else 99), add(2, epoch + 1)) == (
            ErrorCode.INVALID_PRODUCER_EPOCH,
            ErrorCode.PRODUCER_FENCED,
        )
        offsets = conn.request(
            kp.ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            AddOffsetsToTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
            ),
        )
        assert offsets.error_code == 0
        described = describe(conn, tid)
        topics = {t.topic: t.partitions for t in described.topics}
        assert topics[topic] == [0] and list(topics) == sorted([topic, "__consumer_offsets"])
        verify = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])],
                )
            ]
        )
        [verified] = conn.request(kp.ApiKey.ADD_PARTITIONS_TO_TXN, 4, verify).results_by_transaction
        [result] = verified.topic_results
        codes = {p.partition_index: p.partition_error_code for p in result.results_by_partition}
        assert codes == {0: ErrorCode.NONE, 1: ErrorCode.INVALID_TXN_STATE}
        assert {t.topic: t.partitions for t in describe(conn, tid).topics} == topics  # nothing added
        ended = conn.request(
            kp.ApiKey.END_TXN,
            3,
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
        )
        assert ended.error_code == 0
        wait_for(lambda: describe(conn, tid).transaction_state == "CompleteCommit", "CompleteCommit")
        again = conn.request(
            kp.ApiKey.END_TXN,
            3,
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False),
        )
        assert again.error_code == ErrorCode.INVALID_TXN_STATE  # committed already


def test_an_idle_transactional_id_expires(broker_factory: BrokerFactory) -> None:
    """transactional.id.expiration.ms: an id with no transaction and no change for that long is
    tombstoned (TRANSACTIONAL_ID_NOT_FOUND after), one in a transaction is kept."""
    expiring = broker_factory(
        {
            "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
            "transactional.id.expiration.ms": "1500",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
        }
    )
    topic = unique("txn-expiry")
    assert create_topic(expiring.bootstrap, topic) == 0
    idle, busy = unique("tid-idle"), unique("tid-busy")
    idle_producer = ck.Producer({"bootstrap.servers": expiring.bootstrap, "transactional.id": idle})
    idle_producer.init_transactions(TIMEOUT_S)
    busy_producer = ck.Producer({"bootstrap.servers": expiring.bootstrap, "transactional.id": busy})
    busy_producer.init_transactions(TIMEOUT_S)
    busy_producer.begin_transaction()
    busy_producer.produce(topic, b"open", partition=0)
    busy_producer.flush(TIMEOUT_S)
    with RawConnection(expiring.bootstrap) as conn:
        assert describe(conn, idle).transaction_state == "Empty"
        wait_for(
            lambda: describe(conn, idle).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
            "the idle transactional id to expire",
        )
        assert describe(conn, busy).transaction_state == "Ongoing"
    busy_producer.commit_transaction(TIMEOUT_S)
