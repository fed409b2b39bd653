"""A follower's idle partitions in an incremental fetch session (kctl.broker.idle_followers): read
once in full, then only stamped caught up, until anything a full read depends on moves. On real
partitions and logs in a temporary directory; the fetch handler's pass (``_read_all``) over a stub
of the replica manager that counts the full reads."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from kctl.broker.apis.fetch import _read_all
from kctl.broker.fetch_session import CachedPartition
from kctl.broker.partition import Partition
from kctl.broker.replica_manager import PartitionRead
from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder

FOLLOWER = 2


def batch(count: int = 1) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


def leader(path: Path, tp: TopicPartition) -> Partition:
    log = Log(path / f"{tp.topic}-{tp.partition}", tp, LogConfig(), high_watermark_follows_log_end=False)
    partition = Partition(
        tp, log, leader_id=-1, leader_epoch=-1, replicas=(1, 2, 3), isr=(), broker_id=1, replicated=True
    )
    partition.make_leader(0, (1, 2, 3), (1, 2, 3), 0, 0, now_ms=1000)
    return partition


class Replicas:
    """What ``_read_all`` uses of the replica manager; ``fetch`` reads as the leader would (records
    when the follower is behind, the follower recorded, the high watermark advanced) and counts."""

    def __init__(self, partitions: dict[TopicPartition, Partition]) -> None:
        self.partitions = partitions
        self.fenced = False
        self.now = 2000
        self.full_reads: list[TopicPartition] = []

    def now_ms(self) -> int:
        return self.now

    def fetch(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, **kwargs: object) -> PartitionRead:
        self.full_reads.append(tp)
        partition = self.partitions.get(tp)
        if partition is None:
            return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        replica_id = int(kwargs["replica_id"])  # type: ignore[call-overload]
        partition.record_follower_fetch(replica_id, fetch_offset, self.now)
        partition.maybe_advance_high_watermark()
        log = partition.log
        region = log.read(fetch_offset, max_bytes) if fetch_offset < log.log_end_offset else None
        return PartitionRead(
            ErrorCode.NONE,
            log.high_watermark,
            log.last_stable_offset,
            log.log_start_offset,
            region,
            None,
            partition,
        )


class Session:
    """A follower's fetch session over ``count`` partitions, each caught up by a first fetch."""

    def __init__(self, path: Path, count: int = 4) -> None:
        self.tps = [TopicPartition("t", p) for p in range(count)]
        self.partitions = {tp: leader(path, tp) for tp in self.tps}
        self.replicas = Replicas(self.partitions)
        self.broker = SimpleNamespace(replicas=self.replicas)
        self.cached = [
            CachedPartition(("t", tp.partition), tp, uuid.UUID(int=0), 0, 0, 1 << 20) for tp in self.tps
        ]

    def fetch(self, *, respond: bool = True) -> list[TopicPartition]:
        """One pass as the handler makes it; the partitions read in full, with what the response
        sends recorded as ``_responses`` does (not when ``respond`` is false: a pass that parks)."""
        self.replicas.full_reads = []
        reads, _, hosted, _ = _read_all(self.broker, self.cached, 1 << 20, FOLLOWER, False, frozenset(), None)  # type: ignore[arg-type]
        hosted_here = [tp for tp in self.tps if tp in self.partitions]
        assert sorted(p.topic_partition for p in hosted) == hosted_here  # each hosted one parks the fetch
        for cached, read in reads:
            if not respond:
                if read.records is not None:
                    read.records.release()
                continue
            size = read.records.size if read.records is not None else 0
            cached.changed(
                read.error_code, size, read.high_watermark, read.last_stable_offset, read.log_start_offset
            )
            if read.records is not None:
                read.records.release()
        return self.replicas.full_reads

    def follower_fetched_to(self, tp: TopicPartition, offset: int) -> None:
        """The follower names ``tp`` again at ``offset`` (as an incremental request does)."""
        cached = self.cached[tp.partition]
        cached.fetch_offset = offset
        cached.idle = None


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session(tmp_path)


def test_idle_partitions_are_read_once_then_only_stamped_caught_up(session: Session) -> None:
    assert session.fetch() == session.tps  # the first fetch reads every partition
    session.replicas.now = 9000
    assert session.fetch() == []  # nothing moved: nothing read
    for partition in session.partitions.values():
        state = partition.followers[FOLLOWER]
        assert (state.last_caught_up_ms, state.last_fetch_ms) == (9000, 9000)


def test_an_append_makes_its_partition_read_and_its_records_sent(session: Session) -> None:
    session.fetch()
    tp = session.tps[2]
    session.partitions[tp].log.append(batch(3), leader_epoch=0)
    assert session.fetch() == [tp]
    session.follower_fetched_to(tp, 3)  # the follower got the records and fetches from 3
    assert session.fetch() == [tp]  # its next request names it: read, the high watermark moves
    assert session.partitions[tp].high_watermark == 0  # follower 3 has not fetched yet
    assert session.fetch() == [tp]  # not idle while the high watermark is behind the log end
    session.partitions[tp].record_follower_fetch(3, 3, now_ms=2000)
    session.partitions[tp].maybe_advance_high_watermark()
    assert session.fetch() == [tp]  # the high watermark moved: sent once more
    assert session.fetch() == []


@pytest.mark.parametrize(
    "change",
    [
        "leader_epoch",
        "isr",
        "replicas",
        "log_start",
        "deleted",
        "fenced",
        "follower",
        "truncated",
        "high_watermark",
        "log_replaced",
    ],
)
def test_anything_a_full_read_depends_on_makes_the_partition_read_again(
    session: Session, change: str
) -> None:
    session.fetch()
    tp = session.tps[1]
    partition = session.partitions[tp]
    if change == "leader_epoch":
        partition.make_leader(1, (1, 2, 3), (1, 2, 3), 1, 0, now_ms=2000)
    elif change == "isr":
        partition.update_state((1, 2), (1, 2, 3), 1, 0)
    elif change == "replicas":
        partition.update_state((1, 2, 3), (1, 2, 3, 4), 1, 0)
    elif change in ("log_start", "high_watermark"):
        partition.log.append(batch(2), leader_epoch=0)
        partition.record_follower_fetch(FOLLOWER, 2, now_ms=2000)
        partition.record_follower_fetch(3, 2, now_ms=2000)
        partition.maybe_advance_high_watermark()
        session.follower_fetched_to(tp, 2)
        session.fetch()
        assert session.fetch() == []
        if change == "log_start":
            assert partition.log.maybe_increment_log_start_offset(1)  # DeleteRecords
        else:
            assert partition.log.update_high_watermark(1) == 1  # below the log end again
    elif change == "deleted":
        del session.partitions[tp]
    elif change == "follower":  # led elsewhere now
        partition.make_follower(3, 1, (2, 3), (1, 2, 3), 1, 0)
    elif change == "truncated":
        partition.log.truncate_fully_and_start_at(0)
    elif change == "log_replaced":  # a move to another log directory (kctl.broker.log_dir_moves)
        partition.log = Log(partition.log.directory.parent / "moved" / "t-1", tp, LogConfig())
        partition.state_changed()
    elif change == "fenced":
        session.replicas.fenced = True
    read = session.fetch()
    assert read == (session.tps if change == "fenced" else [tp])


def test_a_partition_read_in_a_pass_that_parked_is_read_again_until_its_offsets_are_sent(
    session: Session,
) -> None:
    """A pass before the fetch parks reads the partition idle with a new high watermark, but sends
    nothing: the next pass must read it again, or the follower would never learn it."""
    session.fetch()
    tp = session.tps[0]
    partition = session.partitions[tp]
    partition.log.append(batch(2), leader_epoch=0)
    for replica in (FOLLOWER, 3):
        partition.record_follower_fetch(replica, 2, now_ms=2000)
    partition.maybe_advance_high_watermark()
    session.follower_fetched_to(tp, 2)
    assert session.fetch(respond=False) == [tp]  # idle now, high watermark 2: not sent yet
    assert session.fetch() == [tp]
    assert session.cached[0].high_watermark == 2
    assert session.fetch() == []
