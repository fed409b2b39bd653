"""The partition leader's side of transactions on a real broker process (issue 27, first step): two
producers' transactional batches sent with raw Produce requests, one transaction aborted and one committed
with WriteTxnMarkers (as the coordinator will), then Fetch and ListOffsets in both isolation levels with
raw requests and a confluent-kafka (librdkafka) consumer: read_committed sees nothing past the last
stable offset before the markers, and exactly the committed records (no markers) after them;
read_uncommitted sees every record."""

from __future__ import annotations

from typing import Any

import pytest
from raw_kafka import RawConnection, api_versions, create_topic, unique
from txn_support import READ_COMMITTED, READ_UNCOMMITTED, UNVERIFIED, batch, consume, produce

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kctl.records.reader import iter_batches
from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory


def fetch(conn: RawConnection, topic: str, isolation: int, offset: int = 0) -> Any:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    [topic_response] = conn.request(kp.ApiKey.FETCH, 11, request).responses
    [part] = topic_response.partitions
    return part


def latest(conn: RawConnection, topic: str, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])
        ],
    )
    [topic_response] = conn.request(kp.ApiKey.LIST_OFFSETS, 5, request).topics
    [part] = topic_response.partitions
    assert part.error_code == 0
    return int(part.offset)


def markers(conn: RawConnection, *entries: tuple[int, bool, str, int, int]) -> list[tuple[str, int, int]]:
    """WriteTxnMarkers v1 for (producer id, commit, topic, partition, coordinator epoch) entries;
    returns (topic, partition, error code) per partition."""
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=0,
                transaction_result=commit,
                topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
                coordinator_epoch=coordinator_epoch,
            )
            for producer_id, commit, topic, partition, coordinator_epoch in entries
        ]
    )
    response = conn.request(kp.ApiKey.WRITE_TXN_MARKERS, 1, request)
    return [
        (topic.name, part.partition_index, part.error_code)
        for marker in response.markers
        for topic in marker.topics
        for part in topic.partitions
    ]


def values(records: Any) -> list[bytes]:
    return [r.value for b in iter_batches(bytes(records)) if not b.header.is_control for r in b.records]


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(UNVERIFIED)  # the tests play the coordinator: no KIP-890 verification


def test_aborted_and_committed_transactions_through_markers(broker: BrokerProcess) -> None:
    topic = unique("txn")
    assert create_topic(broker.bootstrap, topic) == 0
    with RawConnection(broker.bootstrap) as conn:
        advertised = {k.api_key: (k.min_version, k.max_version) for k in api_versions(conn).api_keys}
        assert advertised[kp.ApiKey.WRITE_TXN_MARKERS] == (0, 1)
        pids = []
        for _ in range(2):
            answer = conn.request(
                kp.ApiKey.INIT_PRODUCER_ID,
                4,
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            )
            pids.append(answer.producer_id)
        aborting, committing = pids
        assert produce(conn, topic, batch([b"p0"])).error_code == 0  # offset 0
        first = produce(conn, topic, batch([b"a0", b"a1", b"a2"], aborting, transactional=True), "t-a")
        assert (first.error_code, first.base_offset) == (0, 1)  # offsets 1-3
        second = produce(conn, topic, batch([b"b0", b"b1", b"b2"], committing, transactional=True), "t-b")
        assert (second.error_code, second.base_offset) == (0, 4)  # offsets 4-6

        # before the markers: read_committed stops at the first open transaction
        committed = fetch(conn, topic, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (7, 1)
        assert values(committed.records) == [b"p0"] and committed.aborted_transactions == []
        uncommitted = fetch(conn, topic, READ_UNCOMMITTED)
        assert uncommitted.last_stable_offset == 1 and uncommitted.aborted_transactions is None
        assert len(values(uncommitted.records)) == 7
        assert (latest(conn, topic, READ_COMMITTED), latest(conn, topic, READ_UNCOMMITTED)) == (1, 7)
        assert consume(broker, topic, "read_committed", 1) == [b"p0"]

        assert markers(conn, (aborting, False, topic, 0, 0), (committing, True, topic, 0, 0)) == [
            (topic, 0, 0),
            (topic, 0, 0),
        ]  # markers at offsets 7 and 8
        committed = fetch(conn, topic, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (9, 9)
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(aborting, 1)]
        assert latest(conn, topic, READ_COMMITTED) == 9

        # per-partition errors
        assert markers(conn, (committing, True, topic, 5, 0)) == [
            (topic, 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]

    assert consume(broker, topic, "read_committed", 4) == [b"p0", b"b0", b"b1", b"b2"]
    assert consume(broker, topic, "read_uncommitted", 7) == [b"p0", b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]


def test_a_fenced_coordinator_epoch_is_refused(broker: BrokerProcess) -> None:
    topic = unique("txn-fence")
    assert create_topic(broker.bootstrap, topic) == 0
    with RawConnection(broker.bootstrap) as conn:
        answer = conn.request(
            kp.ApiKey.INIT_PRODUCER_ID,
            4,
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        )
        pid = answer.producer_id
        assert produce(conn, topic, batch([b"x"], pid, transactional=True), "t").error_code == 0
        assert markers(conn, (pid, True, topic, 0, 5)) == [(topic, 0, 0)]
        assert markers(conn, (pid, False, topic, 0, 4)) == [
            (topic, 0, ErrorCode.TRANSACTION_COORDINATOR_FENCED)
        ]
        assert fetch(conn, topic, READ_COMMITTED).last_stable_offset == 2
