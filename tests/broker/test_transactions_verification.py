"""KIP-890 part 1 on a real broker (issue 27 §1): the partition leader asks the coordinator before a
transactional batch opens a transaction on a partition, and refuses with INVALID_TXN_STATE —
appending nothing — when the partition is not in the producer's transaction. The case it exists
for: a Produce delayed past its transaction's abort (sent raw after EndTxn(abort) completed) is
refused and no transaction is left open (the last stable offset is not stuck, DescribeProducers
shows no open transaction). A write to a partition never added is refused the same way, while the
partitions that were added take the first batch and the ones after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from raw_kafka import RawConnection, create_topic, running_broker, unique
from txn_support import batch, describe, last_stable_offset, produce

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kctl.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersTopicRequest
from kctl.protocol.messages.end_txn import EndTxnRequest
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.testing import BrokerProcess
from kctl.testing.helpers import wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    properties = {"transaction.state.log.num.partitions": "3"}  # verification: on by default
    with running_broker(tmp_path_factory, properties, "txn-verify") as process:
        yield process


def begin(conn: RawConnection, tid: str, topic: str) -> tuple[int, int]:
    """InitProducerId for ``tid`` and partition 0 of ``topic`` added to its transaction."""
    wait_for(
        lambda: (
            conn.request(
                kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=tid, key_type=1)
            ).error_code
            == 0
        ),
        "a transaction coordinator",
    )

    def init() -> Any:
        request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000)
        response = conn.request(kp.ApiKey.INIT_PRODUCER_ID, 4, request)
        return response.error_code == 0 and response

    ids = wait_for(init, "InitProducerId")
    added = conn.request(
        kp.ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=ids.producer_id,
            v3_and_below_producer_epoch=ids.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        ),
    )
    [result] = added.results_by_topic_v3_and_below
    assert [p.partition_error_code for p in result.results_by_partition] == [0]
    return int(ids.producer_id), int(ids.producer_epoch)


def open_transactions(conn: RawConnection, topic: str) -> list[int]:
    """The start offsets of the transactions the leader holds open on partition 0."""
    request = DescribeProducersRequest(
        topics=[DescribeProducersTopicRequest(name=topic, partition_indexes=[0])]
    )
    [t] = conn.request(kp.ApiKey.DESCRIBE_PRODUCERS, 0, request).topics
    [p] = t.partitions
    assert p.error_code == 0
    return [s.current_txn_start_offset for s in p.active_producers if s.current_txn_start_offset >= 0]


def test_a_produce_delayed_past_its_abort_is_refused(broker: BrokerProcess) -> None:
    topic, tid = unique("verify-late"), unique("tid-late")
    assert create_topic(broker.bootstrap, topic, 1) == 0
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = begin(conn, tid, topic)
        first = produce(conn, topic, batch([b"t0", b"t1"], pid, 0, transactional=True), tid)
        assert first.error_code == 0
        second = produce(conn, topic, batch([b"t2"], pid, 2, transactional=True), tid)  # open: no asking
        assert (second.error_code, second.base_offset) == (0, 2)
        ended = conn.request(
            kp.ApiKey.END_TXN,
            3,
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False),
        )
        assert ended.error_code == 0
        wait_for(lambda: describe(conn, tid).transaction_state == "CompleteAbort", "CompleteAbort")
        assert last_stable_offset(conn, topic) == 4  # 3 records and the ABORT marker

        late = produce(
            conn, topic, batch([b"late"], pid, 3, transactional=True), tid
        )  # delayed past the abort
        assert late.error_code == ErrorCode.INVALID_TXN_STATE, late
        assert "not in an ongoing transaction" in (late.error_message or "")
        assert last_stable_offset(conn, topic) == 4  # nothing appended, nothing left open
        assert open_transactions(conn, topic) == []


def test_a_partition_never_added_is_refused_and_an_added_one_is_not(broker: BrokerProcess) -> None:
    added, stray, tid = unique("verify-added"), unique("verify-stray"), unique("tid-stray")
    assert create_topic(broker.bootstrap, added, 1) == 0
    assert create_topic(broker.bootstrap, stray, 1) == 0
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = begin(conn, tid, added)
        refused = produce(conn, stray, batch([b"s0"], pid, 0, transactional=True), tid)
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE
        assert open_transactions(conn, stray) == [] and last_stable_offset(conn, stray) == 0
        for sequence in range(3):  # the first opens the transaction; the rest find it open
            written = produce(conn, added, batch([b"a"], pid, sequence, transactional=True), tid)
            assert (written.error_code, written.base_offset) == (0, sequence)
        assert open_transactions(conn, added) == [0]
        ended = conn.request(
            kp.ApiKey.END_TXN,
            3,
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
        )
        assert ended.error_code == 0
        wait_for(lambda: last_stable_offset(conn, added) == 4, "the COMMIT marker")
        # the producer's next transaction has not added the partition: refused again
        again = produce(conn, added, batch([b"next"], pid, 3, transactional=True), tid)
        assert again.error_code == ErrorCode.INVALID_TXN_STATE
        assert open_transactions(conn, added) == []
