"""The log's replication primitives on real files: leader epochs stamped by the leader's append, the
follower's append of the leader's bytes, truncation of log + epoch cache + producer state, the KIP-101 /
KIP-279 divergence scenarios between two logs, and the high watermark with its checkpoint."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from conftest import make_batch

from kctl.common.topic_partition import TopicPartition
from kctl.log.checkpoint import read_checkpoint, write_checkpoint
from kctl.log.clock import ManualClock
from kctl.log.config import LogConfig
from kctl.log.files import FileIO
from kctl.log.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kctl.log.log import Log, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from kctl.log.manager import LogManager
from kctl.log.naming import LEADER_EPOCH_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kctl.log.producer_state import OutOfOrderSequenceError
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import InvalidRecordBatch, iter_headers, set_base_offset, validate_batch

TP = TopicPartition("topic", 0)
T0 = 1_700_000_000_000


def open_at(directory: Path, clock: ManualClock, **kwargs: object) -> Log:
    kwargs.setdefault("needs_recovery", False)
    config = LogConfig().with_overrides({"segment.bytes": "4000"})  # a few batches per segment
    return Log(directory, TP, config, clock=clock, **kwargs)  # type: ignore[arg-type]


def idempotent_batch(producer_id: int, sequence: int, count: int = 5) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    for i in range(count):
        builder.append(T0 + i, b"k%d" % i, b"v%d" % (sequence + i))
    return builder.build()


def log_bytes(log: Log) -> bytes:
    return b"".join(segment.path.read_bytes() for segment in log.segments)


def epochs_on_disk(log: Log) -> list[tuple[int, int]]:
    """(base_offset, partition_leader_epoch) of every batch, read from the segment files."""
    data = log_bytes(log)
    return [(header.base_offset, header.partition_leader_epoch) for _, header in iter_headers(data)]


def replicate(follower: Log, leader: Log) -> None:
    """What a replica fetcher does: fetch from the follower's log end offset, append as follower."""
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read_bytes(follower.log_end_offset, 1 << 20))


def truncate_to_divergence(follower: Log, leader: Log) -> int:
    """KIP-101/KIP-279: ask the leader for the end offset of the follower's latest epoch; when the leader
    answers for an earlier epoch, the follower's own end of that epoch bounds the truncation too."""
    epoch = follower.latest_epoch
    leader_epoch, leader_end = leader.end_offset_for_epoch(epoch)
    assert leader_epoch >= 0, "this test's leaders always know an epoch"
    end = leader_end
    if leader_epoch != epoch:
        _, own_end = follower.end_offset_for_epoch(leader_epoch)
        end = min(leader_end, own_end)
    follower.truncate_to(min(end, follower.log_end_offset))
    return follower.log_end_offset


def cache(log: Log) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in log.leader_epoch_cache.entries]


# -- the leader's append ---------------------------------------------------------------------------
def test_leader_append_stamps_epochs_on_disk_and_crcs_stay_valid(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=3)
    log.append(make_batch(10), leader_epoch=3)
    log.append(make_batch(10), leader_epoch=5)
    data = log_bytes(log)
    assert epochs_on_disk(log) == [(0, 3), (10, 3), (20, 5)]
    position = 0
    while position < len(data):  # bytes 12..15 of each batch, and its CRC untouched by the rewrite
        assert struct.unpack_from(">i", data, position + 12)[0] in (3, 5)
        position += validate_batch(data, position).size
    assert cache(log) == [(3, 0), (5, 20)]
    assert read_leader_epoch_checkpoint(log.directory / LEADER_EPOCH_CHECKPOINT) == [
        EpochEntry(3, 0),
        EpochEntry(5, 20),
    ]
    log.append(make_batch(1), leader_epoch=4)  # a stale epoch is stamped but not recorded
    assert cache(log) == [(3, 0), (5, 20)]


def test_append_without_leader_epoch_is_unchanged(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    batch = make_batch(10)
    log.append(batch)
    assert epochs_on_disk(log) == [(0, -1)]
    assert log_bytes(log)[12:] == batch[12:]  # only the base offset (0 already) could differ
    assert log.latest_epoch == -1
    assert not (log.directory / LEADER_EPOCH_CHECKPOINT).exists()
    log.close()
    reopened = open_at(log.directory, clock, needs_recovery=True)
    assert not (reopened.directory / LEADER_EPOCH_CHECKPOINT).exists()


class SyncRecordingIO(FileIO):
    """Records fsyncs (by the file or directory name) and the recovery point moves between them."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._names: dict[int, str] = {}

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self._names[fd] = Path(path).name
        return fd

    def fsync(self, fd: int) -> None:
        self.events.append(f"fsync {self._names.get(fd, '?')}")
        super().fsync(fd)

    def fsync_dir(self, directory: Path) -> None:
        self.events.append(f"fsync_dir {Path(directory).name}")
        super().fsync_dir(directory)


def test_an_elected_leaders_epoch_is_written_durably_before_the_recovery_point_moves(tmp_path, clock):
    """At a failover a broker is elected leader of thousands of partitions in one pass: the epoch it
    records before appending is not written then, but by the next flush, durably, before the
    recovery point passes a batch of that epoch."""
    file_io = SyncRecordingIO()
    log = open_at(tmp_path / "topic_0", clock, file_io=file_io)
    log.append(make_batch(10), leader_epoch=0)
    log.flush()
    file_io.events.clear()
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    written = path.read_bytes()
    assert log.assign_epoch_start_offset(1)
    assert file_io.events == [] and path.read_bytes() == written  # nothing written on the election
    assert log.end_offset_for_epoch(0) == (0, 10)  # but known at once
    log.append(make_batch(5), leader_epoch=1)
    assert file_io.events == [] and log.recovery_point == 10
    log.flush()
    synced = file_io.events.index(f"fsync {LEADER_EPOCH_CHECKPOINT}.tmp")
    assert file_io.events[synced + 1] == "fsync_dir topic_0"
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(1, 10)]
    assert log.recovery_point == 15
    file_io.events.clear()
    log.append(make_batch(5), leader_epoch=1)
    log.flush()  # written once: not again
    assert f"fsync {LEADER_EPOCH_CHECKPOINT}.tmp" not in file_io.events
    log.append(make_batch(5), leader_epoch=2)  # an epoch met on an append is durable at once
    assert file_io.events[-2:] == [f"fsync {LEADER_EPOCH_CHECKPOINT}.tmp", "fsync_dir topic_0"]
    log.close()
    reopened = open_at(log.directory, clock, needs_recovery=True)
    assert cache(reopened) == [(0, 0), (1, 10), (2, 20)]


def test_an_elected_leaders_epoch_is_written_by_a_truncation_or_a_clean_close(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=0)
    assert log.assign_epoch_start_offset(1)
    log.append(make_batch(5), leader_epoch=1)
    log.append(make_batch(5), leader_epoch=1)
    assert log.assign_epoch_start_offset(2)
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    log.truncate_to(20)  # nothing cut: not written
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0)]
    log.truncate_to(15)  # epoch 2 (no batch) goes; epoch 1 is written with the truncation
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(1, 10)]
    assert log.assign_epoch_start_offset(3)
    log.close()
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(3, 15)]


def test_an_elected_leaders_epoch_lost_with_the_page_cache_comes_back_from_its_batches(tmp_path, clock):
    """The power-loss side: the election's checkpoint never reached the disk (the file is as the last
    durable write left it) and the batches of the new epoch are above the recovery point: recovery
    adds the epoch back from them."""
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=0)
    log.flush()
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    durable = path.read_bytes()
    assert log.assign_epoch_start_offset(3)
    log.append(make_batch(4), leader_epoch=3)
    recovery_point = log.recovery_point
    path.write_bytes(durable)  # what a power cut leaves of the unsynced checkpoint
    reopened = open_at(log.directory, clock, needs_recovery=True, recovery_point=recovery_point)
    assert reopened.log_end_offset == 14
    assert cache(reopened) == [(0, 0), (3, 10)]
    assert reopened.end_offset_for_epoch(0) == (0, 10)


def test_new_leader_records_its_epoch_before_appending(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=0)
    assert log.assign_epoch_start_offset(1)  # elected at the log end offset
    assert not log.assign_epoch_start_offset(1)
    assert log.end_offset_for_epoch(0) == (0, 10)
    log.append(make_batch(10), leader_epoch=1)
    assert cache(log) == [(0, 0), (1, 10)]


# -- the follower's append -------------------------------------------------------------------------
def test_follower_copy_of_a_leader_log_is_byte_identical(tmp_path, clock):
    leader = open_at(tmp_path / "leader" / "topic_0", clock)
    for sequence, epoch in enumerate((0, 0, 2, 2, 2, 7)):
        leader.append(make_batch(7, value_size=150), leader_epoch=epoch)
        leader.append(idempotent_batch(42, sequence * 5), leader_epoch=epoch)
        clock.advance(10)
    assert len(leader.segments) >= 2
    follower = open_at(tmp_path / "follower" / "topic_0", clock)
    clock.advance(1000)  # the follower keeps the leader's timestamps, whatever its own clock says
    offset = 0
    while offset < leader.log_end_offset:  # batch by batch, as small fetches would bring them
        info = follower.append_as_follower(leader.read_bytes(offset, 1, max_offset=leader.log_end_offset))
        assert info.first_offset == offset
        offset = info.last_offset + 1
    assert log_bytes(follower) == log_bytes(leader)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert cache(follower) == cache(leader) == [(0, 0), (2, 24), (7, 60)]
    assert follower.producer_state.producers.keys() == leader.producer_state.producers.keys()
    assert list(follower.producer_state.producers[42].batches) == list(
        leader.producer_state.producers[42].batches
    )
    # the replicated producer state recognises a retry as the leader's does, and refuses a gap alike
    retry = next(header for _, header in iter_headers(idempotent_batch(42, 25)))
    assert follower.producer_state.check(retry) == leader.producer_state.check(retry) is not None
    gap = next(header for _, header in iter_headers(idempotent_batch(42, 0)))
    for log in (leader, follower):
        with pytest.raises(OutOfOrderSequenceError):
            log.producer_state.check(gap)


def test_non_contiguous_or_corrupt_follower_appends_are_refused(tmp_path, clock):
    leader = open_at(tmp_path / "leader" / "topic_0", clock)
    for _ in range(3):
        leader.append(make_batch(10), leader_epoch=1)
    follower = open_at(tmp_path / "follower" / "topic_0", clock)
    follower.append_as_follower(leader.read_bytes(0, 1))
    assert follower.log_end_offset == 10
    before = log_bytes(follower)
    with pytest.raises(UnexpectedAppendOffsetError, match="below the log end offset 10") as caught:
        follower.append_as_follower(leader.read_bytes(0, 1))  # overlaps what the follower holds
    assert (caught.value.first_offset, caught.value.log_end_offset) == (0, 10)
    second, third = leader.read_bytes(10, 1), leader.read_bytes(20, 1)
    with pytest.raises(UnexpectedAppendOffsetError, match="offsets must rise"):
        follower.append_as_follower(third + second)
    flipped = bytearray(second)
    flipped[-1] ^= 0xFF
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        follower.append_as_follower(bytes(flipped))
    assert log_bytes(follower) == before and follower.log_end_offset == 10
    # a gap is accepted: compaction removes whole batches, so the leader's next batch may start later
    follower.append_as_follower(third)
    assert follower.log_end_offset == 30 and epochs_on_disk(follower) == [(0, 1), (20, 1)]


def test_follower_append_ignores_max_message_bytes_and_keeps_timestamps(tmp_path, clock):
    leader = open_at(tmp_path / "leader" / "topic_0", clock)
    leader.config = leader.config.with_overrides({"message.timestamp.type": "LogAppendTime"})
    leader.append(make_batch(10, value_size=500), leader_epoch=0)
    data = leader.read_bytes(0, 1 << 20)
    follower_config = LogConfig().with_overrides({"max.message.bytes": "1000"})
    follower = Log(tmp_path / "follower" / "topic_0", TP, follower_config, clock=ManualClock(5))
    info = follower.append_as_follower(data)
    assert info.max_timestamp == leader.max_timestamp_and_offset()[0] == clock.time_ms()
    assert log_bytes(follower) == log_bytes(leader)


# -- truncation ------------------------------------------------------------------------------------
def test_truncation_covers_log_cache_and_producer_state(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    for epoch, sequence in ((1, 0), (1, 5), (2, 10), (3, 15)):
        log.append(idempotent_batch(7, sequence), leader_epoch=epoch)
    assert cache(log) == [(1, 0), (2, 10), (3, 15)]
    log.truncate_to(12)  # the batch holding 12 (offsets 10..14) goes whole
    assert log.log_end_offset == 10
    assert cache(log) == [(1, 0)]
    assert read_leader_epoch_checkpoint(log.directory / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(1, 0)]
    assert log.producer_state.producers[7].last_sequence == 9
    log.append(idempotent_batch(7, 10), leader_epoch=4)  # sequence 10 is the next one again
    assert cache(log) == [(1, 0), (4, 10)]
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert cache(log) == [] and not (log.directory / LEADER_EPOCH_CHECKPOINT).exists()
    assert log.producer_state.producers == {}


def test_log_start_offset_increases_truncate_the_cache_from_the_start(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    for epoch in (0, 0, 1, 1, 2, 2, 2):
        log.append(make_batch(10, value_size=300), leader_epoch=epoch)
    assert cache(log) == [(0, 0), (1, 20), (2, 40)]
    assert log.maybe_increment_log_start_offset(25)
    assert cache(log) == [(1, 25), (2, 40)]
    log.close()
    log = open_at(log.directory, clock, log_start_offset=45)  # the start offset checkpointed later
    assert cache(log) == [(2, 45)]
    log.delete_old_segments()  # the segments wholly below offset 45 go
    assert log.segments[0].base_offset <= 45 == log.log_start_offset
    assert cache(log) == [(2, 45)]
    log.roll()
    clock.advance(60_000)
    log.delete_old_segments(retention_ms=0)  # retention moves the start offset to a segment base
    assert log.log_start_offset == 70 and cache(log) == [(2, 70)]


# -- recovery -------------------------------------------------------------------------------------
def test_recovery_drops_epochs_the_crash_lost(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=0)
    log.flush()
    size = log.active_segment.size
    log.append(make_batch(10), leader_epoch=1)  # the checkpoint records epoch 1 before the batch
    os.truncate(log.active_segment.path, size + 30)  # the crash tore the epoch-1 batch
    reopened = open_at(log.directory, clock, needs_recovery=True, recovery_point=10)
    assert reopened.log_end_offset == 10
    assert cache(reopened) == [(0, 0)]
    assert read_leader_epoch_checkpoint(reopened.directory / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(0, 0)]


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_missing_or_torn_checkpoint_is_rebuilt_from_the_batches(tmp_path, clock, damage):
    log = open_at(tmp_path / "topic_0", clock)
    for epoch in (0, 2, 2, 5):
        log.append(make_batch(10), leader_epoch=epoch)
    log.close()
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("0\n3\n0 0\n2 1")
    reopened = open_at(log.directory, clock, needs_recovery=True)
    assert cache(reopened) == [(0, 0), (2, 10), (5, 30)]
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 30)]


def test_recovered_batches_add_epochs_the_checkpoint_missed(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    log.append(make_batch(10), leader_epoch=0)
    log.append(make_batch(10), leader_epoch=3)
    (log.directory / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n0 0\n")  # as if written before epoch 3
    reopened = open_at(log.directory, clock, needs_recovery=True, recovery_point=10)
    assert cache(reopened) == [(0, 0), (3, 10)]


# -- divergence (KIP-101, KIP-279) ----------------------------------------------------------------
def test_kip101_follower_keeps_what_the_leader_has_despite_its_high_watermark(tmp_path, clock):
    """Truncating to the high watermark on restart would drop offsets 10..19, which the leader has."""
    leader = open_at(tmp_path / "a" / "topic_0", clock, high_watermark_follows_log_end=False)
    follower = open_at(tmp_path / "b" / "topic_0", clock, high_watermark_follows_log_end=False)
    leader.append(make_batch(10, start=0), leader_epoch=0)
    leader.append(make_batch(10, start=10), leader_epoch=0)
    replicate(follower, leader)
    follower.update_high_watermark(10)  # the follower had not yet learnt that 10..19 were committed
    assert truncate_to_divergence(follower, leader) == 20
    assert log_bytes(follower) == log_bytes(leader)


def test_kip101_diverged_logs_converge_after_a_leader_change(tmp_path, clock):
    a = open_at(tmp_path / "a" / "topic_0", clock)
    b = open_at(tmp_path / "b" / "topic_0", clock)
    a.append(make_batch(10, start=0), leader_epoch=0)  # A leads epoch 0
    replicate(b, a)
    a.append(make_batch(10, start=10), leader_epoch=0)  # m2: only on A
    # both stop; B comes back first and leads epoch 1, writing m3 at the offset where A has m2
    b.assign_epoch_start_offset(1)
    b.append(make_batch(5, start=100), leader_epoch=1)
    # A follows B: B says epoch 0 ended at 10; A drops m2 and fetches m3
    assert b.end_offset_for_epoch(0) == (0, 10)
    assert truncate_to_divergence(a, b) == 10
    replicate(a, b)
    assert log_bytes(a) == log_bytes(b)
    assert cache(a) == cache(b) == [(0, 0), (1, 10)]
    assert epochs_on_disk(a) == [(0, 0), (10, 1)]


def test_kip279_divergence_across_several_leader_changes(tmp_path, clock):
    a = open_at(tmp_path / "a" / "topic_0", clock)
    b = open_at(tmp_path / "b" / "topic_0", clock)
    a.append(make_batch(10, start=0), leader_epoch=0)
    replicate(b, a)
    # B leads epoch 1 briefly and writes a batch nobody copies
    b.assign_epoch_start_offset(1)
    b.append(make_batch(3, start=500), leader_epoch=1)
    # A leads epoch 2 without B's epoch-1 batch, and writes two batches
    a.assign_epoch_start_offset(2)
    a.append(make_batch(4, start=10), leader_epoch=2)
    a.append(make_batch(4, start=14), leader_epoch=2)
    # B follows A: A never saw epoch 1, so it answers for epoch 0 (ending where epoch 2 starts)
    assert a.end_offset_for_epoch(1) == (0, 10)
    assert truncate_to_divergence(b, a) == 10
    assert cache(b) == [(0, 0)]
    replicate(b, a)
    assert log_bytes(b) == log_bytes(a)
    assert cache(b) == cache(a) == [(0, 0), (2, 10)]


def test_kip279_follower_ahead_in_an_epoch_the_leader_ended_earlier(tmp_path, clock):
    a = open_at(tmp_path / "a" / "topic_0", clock)
    b = open_at(tmp_path / "b" / "topic_0", clock)
    a.append(make_batch(10, start=0), leader_epoch=1)
    replicate(b, a)
    a.append(make_batch(10, start=10), leader_epoch=1)
    replicate(b, a)
    a.append(make_batch(10, start=20), leader_epoch=1)  # only on A
    # B leads epoch 2 from offset 20 and writes; A (still holding 20..29 of epoch 1) follows
    b.assign_epoch_start_offset(2)
    b.append(make_batch(2, start=900), leader_epoch=2)
    assert truncate_to_divergence(a, b) == 20
    replicate(a, b)
    assert log_bytes(a) == log_bytes(b)


# -- the high watermark ---------------------------------------------------------------------------
def test_high_watermark_follows_the_log_end_in_single_replica_mode(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock)
    assert log.high_watermark == 0
    log.append(make_batch(10))
    assert log.high_watermark == 10
    log.truncate_to(5)
    assert log.high_watermark == log.log_end_offset == 0
    log.append(make_batch(10))
    log.close()
    assert open_at(log.directory, clock, high_watermark=3).high_watermark == 10


def test_high_watermark_bounds_reads_and_retention_when_replicated(tmp_path, clock):
    log = open_at(tmp_path / "topic_0", clock, high_watermark_follows_log_end=False)
    for _ in range(6):
        log.append(make_batch(10, value_size=300), leader_epoch=0)
    assert log.high_watermark == 0
    assert log.update_high_watermark(1000) == 60  # never above the log end offset
    assert log.update_high_watermark(-5) == 0  # never below the log start offset
    log.update_high_watermark(30)
    assert log.read(30, 1 << 20, max_offset=log.high_watermark) is None
    visible, offset = [], 0
    while data := log.read_bytes(offset, 1 << 20, max_offset=log.high_watermark):
        visible += [h.base_offset for _, h in iter_headers(data)]
        offset = visible[-1] + 10
    assert visible == [0, 10, 20]
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(31)  # DeleteRecords stops at the high watermark
    # retention may only delete segments wholly below the high watermark
    planned = log.plan_retention(retention_bytes=0)
    assert [decision.next_offset for decision in planned] == [10, 20, 30]  # one batch per segment
    log.delete_old_segments(retention_bytes=0)
    assert log.log_start_offset == 30
    log.update_high_watermark(50)
    log.truncate_to(45)  # the batch holding 45 goes whole: the high watermark follows the log end down
    assert log.log_end_offset == log.high_watermark == 40
    log.high_watermark_follows_log_end = True
    assert log.high_watermark == log.log_end_offset


def test_high_watermark_checkpoint_survives_a_restart(tmp_path, clock):
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    log = manager.get_or_create_log(TP)
    for _ in range(4):
        log.append(make_batch(10), leader_epoch=0)
    log.update_high_watermark(30)
    manager.close()
    assert read_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {TP: 30}
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    assert manager.get_log(TP).high_watermark == 30
    manager.close()


def test_high_watermark_is_clamped_after_unclean_recovery(tmp_path, clock):
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    log = manager.get_or_create_log(TP)
    for epoch in (0, 0, 0, 1):
        log.append(make_batch(10), leader_epoch=epoch)
    log.update_high_watermark(40)
    manager.checkpoint()  # the periodic checkpoint: high watermark 40
    path, segment_size = log.active_segment.path, log.active_segment.size
    manager._release_locks()  # the process dies without closing anything
    os.truncate(path, segment_size - 50)  # and the last batch was torn
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    recovered = manager.get_log(TP)
    assert recovered.log_end_offset == 30
    assert recovered.high_watermark == 30
    assert cache(recovered) == [(0, 0)]
    manager.close()
    assert read_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {TP: 30}


def test_corrupt_replication_checkpoint_starts_high_watermarks_at_the_log_start(tmp_path, clock):
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    manager.get_or_create_log(TP).append(make_batch(10))
    manager.close()
    (tmp_path / REPLICATION_OFFSET_CHECKPOINT).write_text("0\n2\ntopic 0 5\n")
    manager = LogManager([tmp_path], broker_id=0, clock=clock, high_watermark_follows_log_end=False)
    assert manager.get_log(TP).high_watermark == 0
    manager.close()
    write_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {TP: 7})
    manager = LogManager([tmp_path], broker_id=0, clock=clock)  # single-replica mode: the log end
    assert manager.get_log(TP).high_watermark == 10
    manager.close()


def test_set_base_offset_is_what_a_follower_must_never_need(tmp_path, clock):
    """A follower given batches with client-style base offsets (0) refuses them instead of renumbering."""
    follower = open_at(tmp_path / "topic_0", clock)
    follower.append_as_follower(make_batch(10))
    raw = bytearray(make_batch(10))
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(bytes(raw))
    set_base_offset(raw, 0, 9)  # overlaps the last offset held, by one
    with pytest.raises(UnexpectedAppendOffsetError, match="starts at offset 9, below the log end offset 10"):
        follower.append_as_follower(bytes(raw))
    set_base_offset(raw, 0, 10)
    follower.append_as_follower(bytes(raw))
    assert follower.log_end_offset == 20
