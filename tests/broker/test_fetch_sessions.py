"""Fetch sessions (KIP-227) on a real broker process over raw sockets: sessions opened by full fetches
at epoch 0, incremental fetches adding, keeping and forgetting partitions and answered with only the
partitions that changed, each session error, sessionless fetches, and the cache's slots."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from raw_kafka import RawConnection, create_topic, produce, record_batch, running_broker, unique

import kctl.protocol as kp
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.testing import BrokerProcess

VERSION = 11  # topic names; sessions
ID_VERSION = 13  # topic ids


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, name="sessions") as running:
        yield running


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = unique("sessions")
    assert create_topic(broker.bootstrap, name, partitions=3) == 0
    return name


def parts(topic: str, offsets: dict[int, int], *, topic_id: uuid.UUID | None = None) -> list[Any]:
    if not offsets:
        return []
    return [
        FetchTopic(
            topic=topic,
            topic_id=topic_id or uuid.UUID(int=0),
            partitions=[
                FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                for p, o in offsets.items()
            ],
        )
    ]


def fetch(
    conn: RawConnection,
    topic: str,
    offsets: dict[int, int],
    *,
    session_id: int = 0,
    epoch: int = -1,
    forget: tuple[int, ...] = (),
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    version: int = VERSION,
    topic_id: uuid.UUID | None = None,
) -> Any:
    request = FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=parts(topic, offsets, topic_id=topic_id),
        forgotten_topics_data=[
            ForgottenTopic(topic=topic, topic_id=topic_id or uuid.UUID(int=0), partitions=list(forget))
        ]
        if forget
        else [],
        rack_id="",
    )
    return conn.request(kp.ApiKey.FETCH, version, request)


def answered(response: Any) -> dict[int, Any]:
    """The partitions of a one-topic response by index."""
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def topic_id_of(conn: RawConnection, topic: str) -> uuid.UUID:
    body = MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    [meta] = conn.request(kp.ApiKey.METADATA, 12, body).topics
    return meta.topic_id  # type: ignore[no-any-return]


def open_session(conn: RawConnection, topic: str, offsets: dict[int, int]) -> int:
    response = fetch(conn, topic, offsets, epoch=0)
    assert response.error_code == 0
    assert response.session_id != 0
    assert sorted(answered(response)) == sorted(offsets)
    return int(response.session_id)


def test_full_fetch_opens_a_session_and_incremental_fetches_carry_only_changes(
    broker: BrokerProcess, topic: str
) -> None:
    with RawConnection(broker.bootstrap) as conn:
        session = open_session(conn, topic, {0: 0, 1: 0, 2: 0})
        # nothing changed: an incremental fetch naming no partitions gets none back
        idle = fetch(conn, topic, {}, session_id=session, epoch=1)
        assert (idle.error_code, idle.session_id, idle.responses) == (0, session, [])
        assert produce(broker.bootstrap, topic, 1, record_batch(3)).error_code == 0
        # partition 1 has new records (and a new high watermark): only it is sent, read from the
        # fetch offset the session holds
        changed = fetch(conn, topic, {}, session_id=session, epoch=2)
        assert changed.session_id == session
        [(index, part)] = answered(changed).items()
        assert index == 1
        assert part.error_code == 0 and part.high_watermark == 3 and len(part.records) > 0
        # the fetcher moves on: it names the partition with its new offset; nothing new since
        moved = fetch(conn, topic, {1: 3}, session_id=session, epoch=3)
        assert moved.responses == []
        assert produce(broker.bootstrap, topic, 1, record_batch(2)).error_code == 0
        [(index, part)] = answered(fetch(conn, topic, {}, session_id=session, epoch=4)).items()
        assert (index, part.high_watermark) == (1, 5)
        assert bytes(part.records)[:8] == (3).to_bytes(8, "big")  # the batch at the session's offset 3


def test_an_incremental_fetch_long_polls_on_the_session_partitions(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        session = open_session(conn, topic, {0: 0, 2: 0})
        assert produce(broker.bootstrap, topic, 2, record_batch(1)).error_code == 0
        response = fetch(conn, topic, {}, session_id=session, epoch=1, max_wait_ms=30_000, min_bytes=1)
        assert list(answered(response)) == [2]


def test_partitions_are_added_and_forgotten(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        session = open_session(conn, topic, {0: 0})
        # an added partition is sent in its first response (the fetcher has not seen its offsets)
        added = fetch(conn, topic, {1: 0}, session_id=session, epoch=1)
        assert list(answered(added)) == [1]
        forgot = fetch(conn, topic, {}, session_id=session, epoch=2, forget=(0,))
        assert forgot.responses == []
        assert produce(broker.bootstrap, topic, 0, record_batch(1)).error_code == 0
        assert produce(broker.bootstrap, topic, 1, record_batch(1)).error_code == 0
        # partition 0 left the session: only partition 1's records come back
        assert list(answered(fetch(conn, topic, {}, session_id=session, epoch=3))) == [1]
        # forgetting the last partition closes the session: answered without one
        closed = fetch(conn, topic, {}, session_id=session, epoch=4, forget=(1,))
        assert (closed.error_code, closed.session_id, closed.responses) == (0, 0, [])
        gone = fetch(conn, topic, {}, session_id=session, epoch=5)
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_unknown_session_id_is_fetch_session_id_not_found(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        response = fetch(conn, topic, {0: 0}, session_id=123456789, epoch=1)
        assert (response.error_code, response.session_id, response.responses) == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            0,
            [],
        )


def test_wrong_epoch_is_invalid_fetch_session_epoch_and_keeps_the_session(
    broker: BrokerProcess, topic: str
) -> None:
    with RawConnection(broker.bootstrap) as conn:
        session = open_session(conn, topic, {0: 0})
        for wrong in (2, 7, 0x7FFFFFFF):
            response = fetch(conn, topic, {}, session_id=session, epoch=wrong)
            assert (response.error_code, response.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        assert fetch(conn, topic, {}, session_id=session, epoch=1).error_code == 0
        # the epoch moved on: the same epoch again is refused
        again = fetch(conn, topic, {}, session_id=session, epoch=1)
        assert again.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert fetch(conn, topic, {}, session_id=session, epoch=2).error_code == 0


def test_full_fetches_close_the_session_they_name(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        first = open_session(conn, topic, {0: 0})
        # epoch 0 naming the session: closed, and a new one opened
        second = fetch(conn, topic, {0: 0, 1: 0}, session_id=first, epoch=0)
        assert second.session_id not in (0, first)
        assert (
            fetch(conn, topic, {}, session_id=first, epoch=1).error_code
            == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        # epoch -1 (final) naming the session: closed, answered in full without a session
        final = fetch(conn, topic, {0: 0, 1: 0}, session_id=second.session_id, epoch=-1)
        assert (final.error_code, final.session_id, sorted(answered(final))) == (0, 0, [0, 1])
        after = fetch(conn, topic, {}, session_id=second.session_id, epoch=1)
        assert after.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetches_are_served_in_full(broker: BrokerProcess, topic: str) -> None:
    assert produce(broker.bootstrap, topic, 0, record_batch(2)).error_code == 0
    with RawConnection(broker.bootstrap) as conn:
        for version in (4, 6, VERSION):
            response = conn.request(
                kp.ApiKey.FETCH,
                version,
                FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=parts(topic, {0: 0, 1: 0, 2: 0}),
                    forgotten_topics_data=[],
                    rack_id="",
                ),
            )
            got = answered(response)
            assert sorted(got) == [0, 1, 2], version
            assert got[0].high_watermark == 2 and len(got[0].records) > 0
            if version >= 7:
                assert response.session_id == 0


def test_partition_errors_are_sent_every_time(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        response = fetch(conn, topic, {0: 0, 9: 0}, epoch=0)
        session = response.session_id
        assert answered(response)[9].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for epoch in (1, 2):
            got = answered(fetch(conn, topic, {}, session_id=session, epoch=epoch))
            assert list(got) == [9]
            assert got[9].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_sessions_by_topic_id_and_mixing_them_with_names(broker: BrokerProcess, topic: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        topic_id = topic_id_of(conn, topic)
        opened = fetch(conn, topic, {0: 0, 1: 0}, epoch=0, version=ID_VERSION, topic_id=topic_id)
        assert opened.session_id != 0 and sorted(answered(opened)) == [0, 1]
        assert opened.responses[0].topic_id == topic_id
        assert produce(broker.bootstrap, topic, 0, record_batch(1)).error_code == 0
        changed = fetch(
            conn, topic, {}, session_id=opened.session_id, epoch=1, version=ID_VERSION, topic_id=topic_id
        )
        assert list(answered(changed)) == [0]
        mixed = fetch(conn, topic, {}, session_id=opened.session_id, epoch=2, version=VERSION)
        assert mixed.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_full_cache_evicts_by_kafkas_rules(tmp_path_factory: pytest.TempPathFactory) -> None:
    properties = {"max.incremental.fetch.session.cache.slots": "1"}
    with running_broker(tmp_path_factory, properties, name="one-slot") as small:
        topic = unique("slots")
        assert create_topic(small.bootstrap, topic, partitions=3) == 0
        with RawConnection(small.bootstrap) as conn:
            consumer = open_session(conn, topic, {0: 0, 1: 0})
            # a second consumer with a session as big: no slot (the first is not evictable yet)
            assert fetch(conn, topic, {0: 0, 1: 0, 2: 0}, epoch=0).session_id == 0
            # a follower's session is worth more: it takes the consumer's slot
            follower = fetch(conn, topic, {0: 0}, epoch=0, replica_id=7)
            assert follower.session_id not in (0, consumer)
            evicted = fetch(conn, topic, {}, session_id=consumer, epoch=1)
            assert evicted.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            # and a consumer cannot take a follower's
            assert fetch(conn, topic, {0: 0, 1: 0, 2: 0}, epoch=0).session_id == 0
            assert fetch(conn, topic, {}, session_id=follower.session_id, epoch=1).error_code == 0
