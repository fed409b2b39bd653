"""A partition's log: an ordered list of segments with one active segment at the end.

Owns offset assignment, rolling, the flush policy and recovery point, reads by offset and by timestamp,
truncation, the log start offset, and retention. Batches are appended as opaque bytes: only their
61-byte headers are read (to validate, assign offsets and index).

Idempotent-producer state (:mod:`kctl.log.producer_state`) lives in memory and in producer snapshots,
``<offset>.snapshot`` files beside the segments:

- written when a segment is rolled (the state as of the new segment's base offset) and when the log is
  closed (as of the log end offset); never by an append;
- loaded at start: the newest valid snapshot at or above the oldest segment's base offset and at or
  below the *trusted end* — the log end offset after a clean stop, the recovery point after an unclean
  one (a snapshot above the recovery point may describe batches the crash lost) — then the batch headers
  from its offset to the log end are replayed. With none, every segment's headers are replayed (one
  61-byte read per batch, no CRC: far cheaper than recovery's scan). Snapshots above the trusted end
  are deleted;
- deleted above the new log end on truncation (the state is then reloaded from the newest remaining
  snapshot and replay), all of them when the log is truncated fully, and below the oldest segment's base
  offset when retention deletes segments (the newest snapshot is always kept), so there is at most one
  per segment plus one at the log end."""

from __future__ import annotations

import logging
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kctl.log import recovery
from kctl.log.clock import SYSTEM_CLOCK, Clock
from kctl.log.config import LogConfig
from kctl.log.files import DEFAULT_FILE_IO, FileIO, FileRegion
from kctl.log.index import CorruptIndexError
from kctl.log.naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TopicPartition,
    base_offset_of,
)
from kctl.log.producer_state import ProducerStateManager
from kctl.log.recovery import DELETE, TRUNCATE, SegmentRecovery, plan_recovery
from kctl.log.retention import RetentionDecision, SegmentSummary, plan_retention
from kctl.log.segment import MAX_RELATIVE_OFFSET, LogSegment
from kctl.records.header import (
    BatchHeader,
    InvalidRecordBatch,
    iter_headers,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

logger = logging.getLogger("kctl.log")
TruncateHook = Callable[[SegmentRecovery], None]


class OffsetOutOfRangeError(Exception):
    """A read or truncation at an offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLargeError(ValueError):
    """A batch larger than ``max.message.bytes``."""


@dataclass(frozen=True)
class AppendInfo:
    """Where an append landed."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    records_count: int
    batches: int
    size: int
    log_start_offset: int
    duplicate: bool = False  # an idempotent producer's retry of batches already written


class Log:
    """The log of one partition, in ``directory`` (``<log.dir>/<topic>_<partition>``)."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        needs_recovery: bool = True,
        file_io: FileIO = DEFAULT_FILE_IO,
        clock: Clock = SYSTEM_CLOCK,
        on_truncate: TruncateHook | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.topic_partition = topic_partition
        self.config = config or LogConfig()
        self._file_io = file_io
        self._clock = clock
        self._lock = threading.RLock()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.recovery_plan: list[SegmentRecovery] = []
        self._load(needs_recovery, recovery_point, log_start_offset, on_truncate)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self.log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self.first_dirty_offset = self.log_start_offset  # compaction: everything below is clean
        self.producer_state = ProducerStateManager(self.directory, file_io)
        self._load_producer_state(self.recovery_point if needs_recovery else self.log_end_offset)
        if self.recovery_plan:
            for step in self.recovery_plan:
                if step.action != "keep":
                    logger.warning(
                        "%s: recovery %s %s: kept %d of %d bytes (%s)",
                        self.topic_partition,
                        "truncated" if step.action == "truncate" else "removed",
                        step.path.name,
                        step.valid_bytes,
                        step.size,
                        step.reason,
                    )
            self.flush()  # what recovery validated is made durable, so it need not be validated again

    # -- loading and recovery ------------------------------------------------------------------
    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            file_io=self._file_io,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self._clock.time_ms(),
        )

    def _load(
        self,
        needs_recovery: bool,
        recovery_point: int,
        log_start_offset: int,
        on_truncate: TruncateHook | None,
    ) -> None:
        self._remove_temporary_files()
        self._complete_swaps()
        bases = sorted(
            base
            for path in self.directory.iterdir()
            if path.name.endswith(LOG_SUFFIX) and (base := base_offset_of(path)) is not None
        )
        for path in self.directory.iterdir():  # indexes whose segment is gone
            base = base_offset_of(path)
            if (
                base is not None
                and base not in bases
                and path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))
            ):
                self._file_io.remove(path)
        if needs_recovery and bases:
            start = max(0, bisect_right(bases, recovery_point) - 1)
            candidates = [(base, self.directory / f"{base:020d}{LOG_SUFFIX}") for base in bases[start:]]
            self.recovery_plan = plan_recovery(candidates, self._file_io)
        damaged = {step.base_offset: step for step in self.recovery_plan if step.action != "keep"}
        recovered = {step.base_offset for step in self.recovery_plan}
        for base in bases:
            step = damaged.get(base)
            if step is not None and on_truncate is not None:
                on_truncate(step)
            segment = self._new_segment(base)
            if step is not None and step.action == DELETE:
                segment.delete()
                continue
            if step is not None and step.action == TRUNCATE:
                segment.truncate_bytes(step.valid_bytes)
            if base in recovered:
                segment.rebuild_indexes()
            else:
                self._check_indexes(segment)
            self.segments.append(segment)
            self._base_offsets.append(base)
        if not self.segments:
            start = bases[0] if bases else max(log_start_offset, 0)
            self._append_segment(self._new_segment(start))
        self.segments[-1].created_ms = self._rolling_base(self.segments[-1])

    def _load_producer_state(self, trusted_end: int) -> None:
        """Producer state at start: delete the snapshots above ``trusted_end``, then load the newest
        valid one and replay the batch headers after it."""
        if self.producer_state.delete_snapshots_above(trusted_end):
            self._file_io.fsync_dir(self.directory)  # a deleted snapshot must not come back
        self._reload_producer_state()

    def _reload_producer_state(self) -> None:
        """Rebuild the producer state from the newest valid snapshot at or below the log end offset (and
        not below the oldest segment: the batches between would be missing) plus the batch headers from
        its offset to the log end; from every segment's headers when there is no such snapshot."""
        first_base = self.segments[0].base_offset
        loaded = self.producer_state.load_latest_snapshot(first_base, self.log_end_offset)
        start = first_base if loaded is None else loaded
        record = self.producer_state.record
        for segment in self.segments[self.segment_for(start) :]:
            position = 0
            if segment.base_offset < start:
                found = segment.translate_offset(start)
                if found is None:
                    continue
                position = found[0]
            for _, header in segment.iter_headers(position):
                if header.last_offset >= start:
                    record(header)

    def _take_producer_snapshot(self, offset: int, *, sync_directory: bool = True) -> None:
        """Snapshot the producer state as of ``offset``. A failure is logged, not raised: a missing
        snapshot only means a longer replay at the next start."""
        try:
            self.producer_state.take_snapshot(offset, sync_directory=sync_directory)
        except OSError as error:
            logger.warning(
                "%s: could not write the producer snapshot at %d: %s", self.topic_partition, offset, error
            )

    def _rolling_base(self, segment: LogSegment) -> int:
        now = self._clock.time_ms()
        first = segment.first_batch_max_timestamp() if segment.size else None
        return now if first is None or first < 0 else min(first, now)

    def _check_indexes(self, segment: LogSegment) -> None:
        try:
            segment.offset_index.sanity_check(segment.size)
            segment.time_index.sanity_check(segment.next_offset - 1 if segment.size else segment.base_offset)
        except CorruptIndexError:
            segment.rebuild_indexes()
        if segment.size and not segment.offset_index.path.exists():
            segment.rebuild_indexes()

    def _remove_temporary_files(self) -> None:
        for path in list(self.directory.iterdir()):
            if path.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
                self._file_io.remove(path)

    def _complete_swaps(self) -> None:
        """Finish a compaction swap interrupted by a crash: a ``.log.swap`` replaces what it covers."""
        swaps = sorted(p for p in self.directory.iterdir() if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX))
        for swap in swaps:
            base = base_offset_of(swap)
            if base is None:
                continue
            scan = recovery.scan_path(swap, base, self._file_io)
            last = scan.last_offset if scan.last_offset is not None else base
            for path in list(self.directory.iterdir()):
                other = base_offset_of(path)
                if (
                    other is not None
                    and base <= other <= last
                    and path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX))
                ):
                    self._file_io.remove(path)
            self._file_io.rename(swap, swap.with_name(swap.name.removesuffix(SWAP_SUFFIX)))
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # rebuilt from the log on load
                stale = swap.with_name(f"{base:020d}{suffix}{SWAP_SUFFIX}")
                if stale.exists():
                    self._file_io.remove(stale)

    def _append_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    # -- state ---------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def segment_for(self, offset: int) -> int:
        """Index in ``segments`` of the segment whose range holds ``offset``."""
        return max(0, bisect_right(self._base_offsets, offset) - 1)

    # -- appending -----------------------------------------------------------------------------
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        """Validate and append one or more whole batches.

        With ``assign_offsets`` (the producer path) each batch gets the next offsets by rewriting its
        base offset; otherwise (replication, compaction) offsets must rise above the log end offset.
        Raises InvalidRecordBatch (corrupt or malformed; CORRUPT_MESSAGE), RecordBatchTooLargeError, or
        LogStorageError (nothing of this append is acknowledged, and none of it is left in the file)."""
        # patched in place: a writable view (a request frame the broker owns) is used as is
        data = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
        batches = self._validate(data, assign_offsets)
        with self._lock:
            if assign_offsets:
                duplicate, data, batches = self._drop_duplicates(data, batches)
                if duplicate is not None:
                    return duplicate
            now = self._clock.time_ms()
            append_time = now if self.config.log_append_time else -1
            next_offset = self.log_end_offset
            first_offset = next_offset if assign_offsets else batches[0][1].base_offset
            records_count = 0
            max_timestamp, offset_of_max = -1, first_offset
            assigned: list[tuple[int, BatchHeader]] = []
            for position, header in batches:
                if assign_offsets:
                    set_base_offset(data, position, next_offset)
                    header = header._replace(base_offset=next_offset)
                elif header.base_offset < next_offset:
                    raise InvalidRecordBatch(
                        f"batch base offset {header.base_offset} is below the log end offset {next_offset}",
                        position,
                    )
                if leader_epoch is not None:
                    set_partition_leader_epoch(data, position, leader_epoch)
                if append_time >= 0:
                    set_log_append_time(data, position, header.size, append_time)
                    header = header._replace(max_timestamp=append_time, attributes=header.attributes | 0x08)
                if header.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
                records_count += header.records_count
                next_offset = header.next_offset
                assigned.append((position, header))
            last_offset = next_offset - 1
            segment = self._maybe_roll(len(data), first_offset, last_offset, now)
            segment.append(data, assigned)
            for _, header in assigned:
                self.producer_state.record(header)
            self._unflushed_messages += records_count
            self._maybe_flush()
            return AppendInfo(
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max,
                append_time,
                records_count,
                len(assigned),
                len(data),
                self.log_start_offset,
            )

    def _drop_duplicates(
        self, data: bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
    ) -> tuple[AppendInfo | None, bytearray | memoryview, list[tuple[int, BatchHeader]]]:
        """Check idempotent producers' sequences (raises ProducerStateError); drop batches already
        written. Returns (the original AppendInfo if every batch was a duplicate, data, batches)."""
        duplicates = {}
        for position, header in batches:
            original = self.producer_state.check(header)
            if original is not None:
                duplicates[position] = original
        if not duplicates:
            return None, data, batches
        if len(duplicates) == len(batches):
            first, last = duplicates[batches[0][0]], duplicates[batches[-1][0]]
            info = AppendInfo(
                first.first_offset,
                last.last_offset,
                last.max_timestamp,
                last.last_offset,
                -1,
                0,
                0,
                0,
                self.log_start_offset,
                duplicate=True,
            )
            return info, data, batches
        kept = bytearray()
        kept_batches = []
        for position, header in batches:
            if position not in duplicates:
                kept_batches.append((len(kept), header))
                kept += data[position : position + header.size]
        return None, kept, kept_batches

    def _validate(self, data: bytearray | memoryview, assign_offsets: bool) -> list[tuple[int, BatchHeader]]:
        batches: list[tuple[int, BatchHeader]] = []
        end = 0
        limit = self.config.max_message_bytes
        for position, header in iter_headers(data, check_crc=True):
            if header.size > limit:
                raise RecordBatchTooLargeError(
                    f"batch of {header.size} bytes exceeds max.message.bytes={limit}"
                )
            if header.records_count <= 0:
                raise InvalidRecordBatch("batch has no records", position)
            if assign_offsets and header.is_control:
                raise InvalidRecordBatch(
                    "control batches are written by the broker, not by producers", position
                )
            if assign_offsets and header.records_count != header.last_offset_delta + 1:
                raise InvalidRecordBatch(
                    f"batch declares {header.records_count} records but last_offset_delta "
                    f"{header.last_offset_delta}",
                    position,
                )
            batches.append((position, header))
            end = position + header.size
        if not batches:
            raise InvalidRecordBatch("no record batch in the request", 0)
        if end != len(data):
            raise InvalidRecordBatch(f"{len(data) - end} trailing bytes after the last batch", end)
        return batches

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, now: int) -> LogSegment:
        segment = self.active_segment
        config = self.config
        if segment.size == 0:
            if last_offset - segment.base_offset <= MAX_RELATIVE_OFFSET:
                return segment
        elif (
            segment.size <= config.segment_bytes - size
            and now - segment.created_ms < config.segment_ms
            and last_offset - segment.base_offset <= MAX_RELATIVE_OFFSET
            and not (segment.offset_index.is_full or segment.time_index.is_full)
        ):
            return segment
        return self.roll(first_offset)

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``base_offset`` (default: the log end offset)."""
        with self._lock:
            old = self.active_segment
            new_base = self.log_end_offset if base_offset is None else base_offset
            if old.size == 0 and old.base_offset == new_base:
                return old
            old.on_become_inactive()
            if old.size == 0:  # an empty active segment is replaced rather than kept
                old.delete()
                self.segments.pop()
                self._base_offsets.pop()
            # every batch below new_base is recorded: the state as of the new segment's base offset
            self._take_producer_snapshot(new_base, sync_directory=False)  # fsynced with the new segment
            segment = self._new_segment(new_base)
            self._append_segment(segment)
            self._file_io.fsync_dir(self.directory)
            return segment

    # -- flushing ------------------------------------------------------------------------------
    def _maybe_flush(self) -> None:
        if self._unflushed_messages >= self.config.flush_messages or (
            self.config.flush_ms < 2**62
            and self._clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()

    def flush_if_due(self) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush; return whether it flushed."""
        with self._lock:
            due = self._clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms
            if due and self._unflushed_messages:
                self.flush()
                return True
            return False

    def flush(self) -> None:
        """fsync every segment holding data above the recovery point; advance the recovery point."""
        with self._lock:
            end = self.log_end_offset
            for segment in self.segments[self.segment_for(self.recovery_point) :]:
                if segment.flushed_size != segment.size or segment is self.active_segment:
                    segment.flush()
            self.recovery_point = end
            self._unflushed_messages = 0
            self._last_flush_ms = self._clock.monotonic_ms()

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    # -- reading -------------------------------------------------------------------------------
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> FileRegion | None:
        """A file region with the batches from ``offset`` on (at most ``max_bytes``, but at least one whole
        batch when ``min_one_batch``), not past ``max_offset`` (exclusive, e.g. the high watermark).
        None when there is nothing to read yet. The region may end with a partial batch, as Kafka's does;
        the caller must ``release()`` it."""
        with self._lock:
            end = self.log_end_offset
            if offset < self.log_start_offset or offset > end:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
            upper = end if max_offset is None else min(max_offset, end)
            if offset >= upper:
                return None
            for segment in self.segments[self.segment_for(offset) :]:
                if segment.base_offset >= upper:
                    return None
                max_position = None
                if upper < segment.next_offset:
                    found = segment.translate_offset(upper)
                    max_position = found[0] if found else None
                region = segment.read(offset, max_bytes, max_position, min_one_batch)
                if region is not None:
                    return region
            return None

    def read_bytes(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Like :meth:`read` but returns the bytes (tools and tests)."""
        region = self.read(offset, max_bytes, max_offset=max_offset)
        if region is None:
            return b""
        with region:
            return region.read_bytes()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``; None if none."""
        with self._lock:
            for segment in self.segments:
                if segment.max_timestamp < timestamp:
                    continue
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
            return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(max timestamp, offset of the batch holding it) over the whole log; (-1, -1) when empty."""
        with self._lock:
            best = (-1, -1)
            for segment in self.segments:
                if segment.size and segment.max_timestamp > best[0]:
                    best = (segment.max_timestamp, segment.offset_of_max_timestamp)
            return best

    # -- truncation and start offset -----------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (a batch holding ``offset`` goes whole,
        so the log end offset becomes that batch's base offset)."""
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
                self.segments.pop().delete()
                self._base_offsets.pop()
            self.active_segment.truncate_to(offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            if self.producer_state.delete_snapshots_above(self.log_end_offset):
                self._file_io.fsync_dir(self.directory)  # a deleted snapshot must not come back
            self._reload_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.segments, self._base_offsets = [], []
            self.producer_state.delete_all_snapshots()
            self.producer_state.clear()
            self._append_segment(self._new_segment(offset))
            self._file_io.fsync_dir(self.directory)
            self.log_start_offset = self.recovery_point = offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); whole segments below it go at the next
        retention run."""
        with self._lock:
            if offset > self.log_end_offset:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
            if offset <= self.log_start_offset:
                return False
            self.log_start_offset = offset
            return True

    # -- retention -----------------------------------------------------------------------------
    def segment_summaries(self) -> list[SegmentSummary]:
        with self._lock:
            return [
                SegmentSummary(
                    base_offset=segment.base_offset,
                    next_offset=segment.next_offset,
                    size=segment.size,
                    max_timestamp=segment.max_timestamp if segment.size else -1,
                    modified_ms=int(segment.path.stat().st_mtime * 1000),
                    is_active=segment is self.active_segment,
                )
                for segment in self.segments
            ]

    def plan_retention(
        self,
        *,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        log_start_offset: int | None = None,
    ) -> list[RetentionDecision]:
        """The segments the retention rules would delete now (nothing is changed). Rules default to the
        config (time and size only when cleanup.policy includes delete) and the log start offset."""
        delete_policy = self.config.delete
        return plan_retention(
            self.segment_summaries(),
            now_ms=self._clock.time_ms(),
            retention_ms=retention_ms
            if retention_ms is not None
            else (self.config.retention_ms if delete_policy else -1),
            retention_bytes=retention_bytes
            if retention_bytes is not None
            else (self.config.retention_bytes if delete_policy else -1),
            log_start_offset=self.log_start_offset if log_start_offset is None else log_start_offset,
        )

    def remove_expired_producers(self, expiration_ms: int) -> int:
        """Forget idempotent producers silent for longer than ``expiration_ms`` (by their last batch's
        max timestamp); the next snapshot no longer holds them. Returns how many were forgotten."""
        with self._lock:
            return len(self.producer_state.remove_expired(self._clock.time_ms(), expiration_ms))

    def delete_old_segments(self, **rules: int | None) -> list[RetentionDecision]:
        """Apply retention (see :meth:`plan_retention`); delete whole segments, oldest first, and move the
        log start offset up. The active segment is rolled first when it must go too."""
        with self._lock:
            decisions = self.plan_retention(**rules)
            if not decisions:
                return []
            if any(decision.base_offset == self.active_segment.base_offset for decision in decisions):
                self.roll()
            doomed = {decision.base_offset for decision in decisions}
            keep = [segment for segment in self.segments if segment.base_offset not in doomed]
            for segment in self.segments:
                if segment.base_offset in doomed:
                    segment.delete()
            self.segments = keep
            self._base_offsets = [segment.base_offset for segment in keep]
            self.producer_state.delete_snapshots_before(self.segments[0].base_offset)
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            return decisions

    # -- compaction support --------------------------------------------------------------------
    def swap_in_segment(self, old: LogSegment, swap_path: Path) -> None:
        """Replace ``old`` by a finished ``<base>.log.swap`` file (compaction output) and rebuild its
        indexes. A crash between the steps is completed by recovery (see ``_complete_swaps``)."""
        with self._lock:
            index = self.segments.index(old)
            old.delete()
            self._file_io.rename(swap_path, old.path)
            fresh = self._new_segment(old.base_offset)
            fresh.rebuild_indexes()
            self.segments[index] = fresh

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Flush, snapshot the producer state at the log end offset, and close the segments."""
        with self._lock:
            self.active_segment.on_become_inactive()
            self.flush()
            self._take_producer_snapshot(self.log_end_offset)
            for segment in self.segments:
                segment.close()

    def delete(self) -> None:
        """Delete the whole partition directory."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.segments, self._base_offsets = [], []
            shutil.rmtree(self.directory, ignore_errors=True)

    def parent_dir_is(self, log_dir: Path) -> bool:
        return self.directory.parent == Path(log_dir)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self.segments)})"
        )
