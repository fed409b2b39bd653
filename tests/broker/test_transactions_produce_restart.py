"""Transactions on a real broker process, beyond the markers (issue 27, first step): Produce's checks of
transactional batches as Kafka's (a transactional batch needs a transactional id, a producer inside a
transaction may not write outside it: INVALID_TXN_STATE), and a broker killed with SIGKILL with an
aborted transaction in its log: on restart the aborted-transaction index is rebuilt (even when the
``.txnindex`` file was lost) and read_committed consumers (librdkafka, kcat) still never see the aborted
records."""

from __future__ import annotations

import pytest
from raw_kafka import RawConnection, create_topic, kcat, unique
from txn_support import READ_COMMITTED, UNVERIFIED, batch, consume, produce

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory


def producer_id(conn: RawConnection) -> int:
    answer = conn.request(
        kp.ApiKey.INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
    )
    return int(answer.producer_id)


def end_txn(conn: RawConnection, topic: str, pid: int, commit: bool) -> None:
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=commit,
                topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                coordinator_epoch=0,
            )
        ]
    )
    response = conn.request(kp.ApiKey.WRITE_TXN_MARKERS, 1, request)
    assert [p.error_code for m in response.markers for t in m.topics for p in t.partitions] == [0]


def aborted_of(conn: RawConnection, topic: str) -> list[tuple[int, int]]:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=READ_COMMITTED,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    [topic_response] = conn.request(kp.ApiKey.FETCH, 11, request).responses
    [part] = topic_response.partitions
    assert part.error_code == 0
    return [(t.producer_id, t.first_offset) for t in part.aborted_transactions]


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(UNVERIFIED)  # the tests play the coordinator: no KIP-890 verification


def test_produce_checks_transactional_batches_as_kafka(broker: BrokerProcess) -> None:
    topic = unique("txn-produce")
    assert create_topic(broker.bootstrap, topic) == 0
    with RawConnection(broker.bootstrap) as conn:
        pid = producer_id(conn)
        # a transactional batch without a transactional id
        refused = produce(conn, topic, batch([b"x"], pid, transactional=True), None)
        assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(conn, topic, batch([b"t0"], pid, transactional=True), "t").error_code == 0
        # the same producer outside its ongoing transaction
        outside = produce(conn, topic, batch([b"plain"], pid, 1, transactional=False), None)
        assert outside.error_code == ErrorCode.INVALID_TXN_STATE
        end_txn(conn, topic, pid, commit=True)
        assert produce(conn, topic, batch([b"plain"], pid, 1, transactional=False), None).error_code == 0
    assert consume(broker, topic, "read_committed", 2) == [b"t0", b"plain"]


@pytest.mark.parametrize("lose_the_index", [False, True], ids=["index-kept", "index-lost"])
def test_sigkill_with_an_aborted_transaction_keeps_it_hidden(
    broker: BrokerProcess, lose_the_index: bool
) -> None:
    topic = unique("txn-kill")
    assert create_topic(broker.bootstrap, topic) == 0
    with RawConnection(broker.bootstrap) as conn:
        aborting, committing = producer_id(conn), producer_id(conn)
        assert (
            produce(conn, topic, batch([b"a0", b"a1"], aborting, transactional=True), "t-a").error_code == 0
        )
        assert (
            produce(conn, topic, batch([b"c0", b"c1"], committing, transactional=True), "t-c").error_code == 0
        )
        end_txn(conn, topic, aborting, commit=False)  # offset 4
        end_txn(conn, topic, committing, commit=True)  # offset 5
        assert aborted_of(conn, topic) == [(aborting, 0)]
    partition_dir = broker.data_dir / f"{topic}_0"
    [txn_index] = partition_dir.glob("*.txnindex")
    indexed = txn_index.read_bytes()
    assert len(indexed) == 34  # one entry: version, producer id, first, last and last stable offsets

    assert broker.kill() == -9
    if lose_the_index:
        txn_index.unlink()
    broker.start()

    assert txn_index.read_bytes() == indexed  # rebuilt by the replay at load, byte for byte
    with RawConnection(broker.bootstrap) as conn:
        assert aborted_of(conn, topic) == [(aborting, 0)]
    assert consume(broker, topic, "read_committed", 2) == [b"c0", b"c1"]
    kcat_args = ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"]
    committed = kcat(broker.bootstrap, "-X", "isolation.level=read_committed", *kcat_args)
    assert committed.stdout.split() == [b"c0", b"c1"]
    everything = kcat(broker.bootstrap, "-X", "isolation.level=read_uncommitted", *kcat_args)
    assert everything.stdout.split() == [b"a0", b"a1", b"c0", b"c1"]
