"""Recovery after an unclean stop: corrupt tails are cut at the first invalid batch, indexes rebuilt."""

from __future__ import annotations

import contextlib
import os

import pytest
from conftest import make_batch

from kctl.log.log import Log
from kctl.log.naming import SWAP_SUFFIX
from kctl.records.reader import iter_batches


def _fill(log: Log, batches: int = 10, count: int = 10) -> list[int]:
    return [
        log.append(make_batch(count, timestamp=1_700_000_000_000 + i * count)).last_offset
        for i in range(batches)
    ]


def _reopen(log: Log, **kwargs) -> Log:
    kwargs.setdefault("recovery_point", 0)
    return Log(log.directory, log.topic_partition, log.config, **kwargs)


def _offsets(log: Log) -> list[int]:
    result, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read_bytes(offset, 1 << 20)
        for batch in iter_batches(data):
            result += [r.offset for r in batch.records]
        offset = result[-1] + 1
    return result


def test_unclean_stop_keeps_everything_written(open_log):
    log = open_log({"index.interval.bytes": "500"})
    _fill(log)
    reopened = _reopen(log)  # no close(): as after kill -9
    assert reopened.log_end_offset == 100
    assert _offsets(reopened) == list(range(100))
    assert reopened.recovery_point == 100
    assert reopened.active_segment.offset_index.entries() == log.active_segment.offset_index.entries()


@pytest.mark.parametrize(
    "damage",
    ["truncated_batch", "flipped_byte", "garbage_appended", "zeroed_tail"],
)
def test_corrupt_tail_is_cut_at_the_first_invalid_batch(open_log, damage):
    log = open_log()
    _fill(log)
    path = log.active_segment.path
    size = os.path.getsize(path)
    batch_size = len(make_batch(10))
    with open(path, "r+b") as handle:
        if damage == "truncated_batch":
            handle.truncate(size - 17)
        elif damage == "flipped_byte":
            position = batch_size * 7 + 100  # inside the 8th batch's records
            handle.seek(position)
            byte = handle.read(1)
            handle.seek(position)
            handle.write(bytes([byte[0] ^ 0xFF]))
        elif damage == "garbage_appended":
            handle.seek(size)
            handle.write(os.urandom(333))
        else:
            handle.seek(size)
            handle.write(b"\x00" * 4096)  # preallocated zeros after a crash
    expected_end = {"truncated_batch": 90, "flipped_byte": 70, "garbage_appended": 100, "zeroed_tail": 100}[
        damage
    ]
    reopened = _reopen(log)
    assert reopened.log_end_offset == expected_end
    assert _offsets(reopened) == list(range(expected_end))
    assert os.path.getsize(path) == expected_end // 10 * batch_size
    assert [step.action for step in reopened.recovery_plan] == ["truncate"]
    assert reopened.append(make_batch(1)).first_offset == expected_end


def test_damage_in_an_older_segment_drops_the_later_segments(open_log):
    batch_size = len(make_batch(10))
    log = open_log({"segment.bytes": str(batch_size * 3)})
    _fill(log)
    assert len(log.segments) == 4
    second = log.segments[1].path
    with open(second, "r+b") as handle:
        handle.seek(batch_size + 80)
        handle.write(b"\xde\xad")
    reopened = _reopen(log)
    assert reopened.log_end_offset == 40
    assert [s.base_offset for s in reopened.segments] == [0, 30]
    assert [step.action for step in reopened.recovery_plan] == ["keep", "truncate", "delete", "delete"]


def test_recovery_starts_at_the_recovery_point_segment(open_log):
    batch_size = len(make_batch(10))
    log = open_log({"segment.bytes": str(batch_size * 3)})
    _fill(log)
    reopened = _reopen(log, recovery_point=60)
    assert [step.base_offset for step in reopened.recovery_plan] == [60, 90]


def test_clean_shutdown_skips_recovery(open_log):
    log = open_log()
    _fill(log)
    log.close()
    reopened = _reopen(log, recovery_point=100, needs_recovery=False)
    assert reopened.recovery_plan == [] and reopened.log_end_offset == 100


def test_missing_and_corrupt_indexes_are_rebuilt(open_log):
    log = open_log({"index.interval.bytes": "300"})
    _fill(log)
    expected = log.active_segment.offset_index.entries()
    expected_times = log.active_segment.time_index.entries()
    log.close()
    os.unlink(log.active_segment.offset_index.path)
    with open(log.active_segment.time_index.path, "r+b") as handle:
        handle.write(b"\xff" * 12)  # first entry's timestamp now larger than the rest
    reopened = _reopen(log, recovery_point=100, needs_recovery=False)
    assert reopened.active_segment.offset_index.entries() == expected
    assert reopened.active_segment.time_index.entries()[: len(expected_times)] == expected_times
    assert reopened.offset_for_timestamp(1_700_000_000_055)[0] == 55


def test_interrupted_compaction_swap_is_completed(open_log):
    batch_size = len(make_batch(10))
    log = open_log({"segment.bytes": str(batch_size * 2)})
    _fill(log, batches=6)
    first = log.segments[0]
    swap = first.path.with_name(first.path.name + SWAP_SUFFIX)
    # a compacted version of segment 0: only its second batch (offsets 10..19)
    data = first.read_batch_bytes(batch_size, batch_size)
    swap.write_bytes(data)
    log.close()
    os.unlink(first.path)  # crash after deleting the old segment, before renaming the swap
    reopened = _reopen(log, needs_recovery=True)
    assert not swap.exists()
    assert _offsets(reopened)[:10] == list(range(10, 20))
    assert reopened.log_end_offset == 60


def test_leftover_temporary_files_are_removed(open_log):
    log = open_log()
    _fill(log, batches=1)
    log.close()
    for name in ("00000000000000000000.log.cleaned", "00000000000000000000.log.deleted", "x.tmp"):
        (log.directory / name).write_bytes(b"junk")
    reopened = _reopen(log)
    assert sorted(os.listdir(reopened.directory)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]


def _open_files_under(directory) -> list[str]:
    """The names of the files under ``directory`` this process has open (Linux: /proc/self/fd)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(directory)):
                names.append(os.path.basename(target))
    return sorted(names)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_recovered_log_holds_no_index_descriptor(open_log):
    """Recovery rebuilds the indexes and appends write and fsync them; none of that keeps an index
    open: a broker hosting 10,000 one-segment logs holds 10,000 descriptors after a kill -9 and
    restart, not 30,000 (it ran out of descriptors at 20,000)."""
    log = open_log({"index.interval.bytes": "500"})
    _fill(log)
    reopened = _reopen(log)  # no close(): as after kill -9, so recovery rebuilds the indexes
    assert reopened.active_segment.offset_index.entries()  # recovery wrote index entries
    _fill(reopened, batches=5)
    reopened.flush()
    log.close()
    segment_files = sorted(os.path.basename(segment.path) for segment in reopened.segments)
    assert _open_files_under(log.directory) == segment_files  # each segment's .log, no index
    reopened.close()
    assert _open_files_under(log.directory) == []
