"""Log append and read: offset assignment, rolling, regions, timestamps, truncation, bad input."""

from __future__ import annotations

import errno
import os

import pytest
from conftest import make_batch

from kctl.log.files import FileIO, LogStorageError
from kctl.log.log import Log, OffsetOutOfRangeError, RecordBatchTooLargeError
from kctl.records.header import InvalidRecordBatch, parse_header, validate_batch
from kctl.records.reader import decode_batch, iter_batches


def test_append_assigns_consecutive_offsets(open_log):
    log = open_log()
    first = log.append(make_batch(5))
    second = log.append(make_batch(3))
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset) == (5, 7)
    assert log.log_end_offset == 8
    records = [r for batch in iter_batches(log.read_bytes(0, 1 << 20)) for r in batch.records]
    assert [r.offset for r in records] == list(range(8))
    assert records[5].key == b"key-0" and records[5].offset == 5


def test_several_batches_in_one_append(open_log):
    log = open_log()
    info = log.append(make_batch(2) + make_batch(4))
    assert (info.first_offset, info.last_offset, info.batches, info.records_count) == (0, 5, 2, 6)
    headers = [b.header for b in iter_batches(log.read_bytes(0, 1 << 20))]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (2, 5)]


def test_read_from_the_middle_of_a_batch_starts_at_that_batch(open_log):
    log = open_log()
    for _ in range(3):
        log.append(make_batch(10))
    data = log.read_bytes(15, 1 << 20)
    assert parse_header(data).base_offset == 10


def test_read_respects_max_bytes_but_returns_one_whole_batch(open_log):
    log = open_log()
    batch = make_batch(10, value_size=500)
    log.append(batch)
    log.append(batch)
    region = log.read(0, 100)
    assert region is not None and region.size == len(batch)
    region.release()
    region = log.read(0, len(batch) + 10)
    assert region.size == len(batch) + 10  # a partial second batch, as Kafka sends
    region.release()


def test_read_stops_at_max_offset(open_log):
    log = open_log()
    log.append(make_batch(10))
    log.append(make_batch(10))
    data = log.read_bytes(0, 1 << 20, max_offset=10)
    assert [b.header.base_offset for b in iter_batches(data)] == [0]
    assert log.read(10, 1 << 20, max_offset=10) is None


def test_read_at_end_is_empty_and_outside_range_raises(open_log):
    log = open_log()
    log.append(make_batch(3))
    assert log.read(3, 1000) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)


def test_segments_roll_by_size_and_reads_cross_segments(open_log):
    batch = make_batch(10, value_size=200)
    log = open_log({"segment.bytes": str(len(batch) * 3)})
    for _ in range(10):
        log.append(batch)
    assert len(log.segments) == 4  # 3 batches fit in each segment
    assert [s.base_offset for s in log.segments] == [0, 30, 60, 90]
    for offset in (0, 29, 30, 65, 99):
        assert decode_batch(log.read_bytes(offset, 1)).header.base_offset == offset // 10 * 10
    names = sorted(os.listdir(log.directory))
    assert "00000000000000000030.log" in names and "00000000000000000030.index" in names
    assert "00000000000000000030.timeindex" in names


def test_segments_roll_by_age(open_log, clock):
    log = open_log({"segment.ms": "1000"})
    log.append(make_batch(1))
    clock.advance(999)
    log.append(make_batch(1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(make_batch(1))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_sparse_index_is_written_and_used(open_log):
    log = open_log({"index.interval.bytes": "1000"})
    for _ in range(50):
        log.append(make_batch(5, value_size=100))
    entries = log.active_segment.offset_index.entries()
    assert len(entries) > 10
    for offset, position in entries:
        header = log.active_segment.read_header(position)
        assert header.last_offset == offset
    assert decode_batch(log.read_bytes(137, 1)).header.base_offset == 135


def test_offset_for_timestamp(open_log):
    log = open_log({"index.interval.bytes": "100"})
    for i in range(20):
        log.append(make_batch(10, timestamp=10_000 + i * 100))  # batch i: 10000+100i .. +9
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_505) == (55, 10_505)
    assert log.offset_for_timestamp(10_510) == (60, 10_600)
    assert log.offset_for_timestamp(99_999) is None
    assert log.max_timestamp_and_offset() == (11_909, 199)


def test_log_append_time_rewrites_timestamps_and_crc(open_log, clock):
    log = open_log({"message.timestamp.type": "LogAppendTime"})
    info = log.append(make_batch(3, timestamp=5))
    assert info.log_append_time == clock.time_ms()
    data = log.read_bytes(0, 1 << 20)
    header = validate_batch(data)  # CRC recomputed
    assert header.is_log_append_time and header.max_timestamp == clock.time_ms()
    assert {r.timestamp for r in decode_batch(data).records} == {clock.time_ms()}


def test_leader_epoch_is_stamped(open_log):
    log = open_log()
    log.append(make_batch(2), leader_epoch=7)
    assert parse_header(log.read_bytes(0, 1000)).partition_leader_epoch == 7


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC"),
        (lambda b: b + b"\x00" * 70, "runs past|trailing|magic|below the minimum"),
        (lambda b: b + b"junk", "trailing"),
        (lambda b: b[:40], "no record batch|truncated"),
        (lambda b: b"", "no record batch"),
    ],
)
def test_invalid_input_is_rejected_and_changes_nothing(open_log, mutate, message):
    log = open_log()
    log.append(make_batch(2))
    size = log.size_in_bytes
    with pytest.raises(InvalidRecordBatch, match=message):
        log.append(mutate(make_batch(2)))
    assert (log.log_end_offset, log.size_in_bytes) == (2, size)
    assert log.append(make_batch(1)).first_offset == 2


def test_batch_over_max_message_bytes_is_rejected(open_log):
    log = open_log({"max.message.bytes": "500"})
    with pytest.raises(RecordBatchTooLargeError):
        log.append(make_batch(10, value_size=100))
    assert log.log_end_offset == 0


class DiskFullAfter(FileIO):
    """Fails log writes with ENOSPC once ``budget`` bytes have been written (after a short write)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def write(self, fd, data):  # type: ignore[override]
        if self.budget <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        count = min(len(data), self.budget)
        self.budget -= count
        return super().write(fd, bytes(data[:count]))


def test_disk_full_acknowledges_nothing_and_leaves_no_partial_batch(tmp_path, clock, open_log):
    file_io = DiskFullAfter(budget=10_000)
    log = open_log(file_io=file_io)
    acknowledged = []
    with pytest.raises(LogStorageError):
        for _ in range(100):
            acknowledged.append(log.append(make_batch(5)).last_offset)
    assert log.log_end_offset == acknowledged[-1] + 1
    assert log.active_segment.size == os.path.getsize(log.active_segment.path)
    file_io.budget = 10**9  # space freed
    assert log.append(make_batch(1)).first_offset == acknowledged[-1] + 1
    log.close()
    reopened = Log(log.directory, log.topic_partition, log.config, clock=clock)
    assert reopened.log_end_offset == acknowledged[-1] + 2
    assert all(step.action == "keep" for step in reopened.recovery_plan)


def test_truncate_to_removes_whole_batches_and_segments(open_log):
    batch = make_batch(10)
    log = open_log({"segment.bytes": str(len(batch) * 2)})
    for _ in range(6):
        log.append(batch)
    log.truncate_to(35)
    assert log.log_end_offset == 30  # the batch holding 35 goes whole
    assert [s.base_offset for s in log.segments] == [0, 20]
    assert log.append(make_batch(1)).first_offset == 30
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.read(0, 100) is None


def test_reader_of_a_deleted_segment_reads_to_the_end(open_log, clock):
    batch = make_batch(10)
    log = open_log({"segment.bytes": str(len(batch))})
    for _ in range(3):
        log.append(batch)
    region = log.read(0, 1 << 20)
    assert region is not None
    path = region.path
    log.maybe_increment_log_start_offset(20)
    deleted = log.delete_old_segments(retention_ms=-1, retention_bytes=-1)
    assert [d.base_offset for d in deleted] == [0, 10]
    assert not path.exists()
    with region:
        assert len(decode_batch(region.read_bytes()).records) == 10
    assert log.log_start_offset == 20


def test_flush_messages_moves_the_recovery_point(open_log):
    log = open_log({"flush.messages": "20"})
    log.append(make_batch(10))
    assert log.recovery_point == 0 and log.unflushed_messages == 10
    log.append(make_batch(10))
    assert log.recovery_point == 20 and log.unflushed_messages == 0


def test_flush_ms_flushes_when_due(open_log, clock):
    log = open_log({"flush.ms": "1000"})
    log.append(make_batch(3))
    assert not log.flush_if_due() and log.recovery_point == 0
    clock.advance(1000)
    assert log.flush_if_due() and log.recovery_point == 3
