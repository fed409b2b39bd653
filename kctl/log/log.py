"""A partition's log: an ordered list of segments with one active segment at the end.

Owns the order of appends and their offsets, rolling, the flush policy and recovery point, reads by
offset and by timestamp, truncation, the log start offset, the high watermark, and retention. Batches
are appended as opaque bytes: only their 61-byte headers are read (to validate, assign offsets and
index); what an append stamps into them, a follower's offset checks and the idempotent producers'
duplicates are :mod:`kctl.log.append`'s. Loading a directory (and recovery) is :mod:`kctl.log.loader`'s.

Replication primitives: the leader appends with :meth:`Log.append` (``leader_epoch`` stamps each batch
and feeds the leader epoch cache, :mod:`kctl.log.leader_epoch`), a follower with
:meth:`Log.append_as_follower` (the leader's bytes, offsets and epochs kept); truncation and log start
offset increases keep the cache in step. The high watermark lies in [log start offset, log end offset];
in single-replica mode (``high_watermark_follows_log_end``, the default) each append moves it to the log
end offset, otherwise only :meth:`Log.update_high_watermark` does. Retention never deletes a segment
that is not wholly below it.

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
  per segment plus one at the log end.

Transactions (:mod:`kctl.log.transactions`): :meth:`Log.append_control_marker` writes COMMIT/ABORT markers,
which appends and the replay record in the producer state (an abort also in its segment's ``.txnindex``);
:attr:`Log.last_stable_offset` and :meth:`Log.aborted_transactions` serve read_committed fetches."""

from __future__ import annotations

import logging
import shutil
import threading
from bisect import bisect_right
from pathlib import Path

from kctl.log.append import AppendInfo as AppendInfo
from kctl.log.append import UnexpectedAppendOffsetError as UnexpectedAppendOffsetError
from kctl.log.append import check_as_follower, drop_duplicates, stamp_as_leader
from kctl.log.clock import SYSTEM_CLOCK, Clock
from kctl.log.config import LogConfig
from kctl.log.files import DEFAULT_FILE_IO, FileIO, FileRegion
from kctl.log.leader_epoch import LeaderEpochCache
from kctl.log.loader import TruncateHook, load_leader_epochs, load_segments
from kctl.log.naming import TopicPartition
from kctl.log.producer_state import ProducerStateManager
from kctl.log.recompress import recompress_for
from kctl.log.recovery import SegmentRecovery
from kctl.log.retention import RetentionDecision, SegmentSummary, plan_retention
from kctl.log.segment import MAX_RELATIVE_OFFSET, LogSegment
from kctl.log.transactions import AbortedTxn, collect_aborted, encode_marker, record_batches, replay
from kctl.log.validation import RecordBatchTooLargeError as RecordBatchTooLargeError
from kctl.log.validation import validate_append
from kctl.records.header import CONTROL_FLAG_MASK, BatchHeader, set_max_timestamp

logger = logging.getLogger("kctl.log")


class OffsetOutOfRangeError(Exception):
    """A read or truncation at an offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class Log:
    """One partition's log in ``directory``. Threads: see the contract in kctl.log.manager.LogManager."""

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
        high_watermark: int | None = None,
        high_watermark_follows_log_end: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.log_dir = self.directory.parent  # the log dir holding it (Path.parent costs µs per call)
        self.topic_partition = topic_partition
        self.config = config or LogConfig()
        self._file_io = file_io
        self._clock = clock
        self._lock = threading.RLock()
        #: counts changes of the log start, high watermark and log end offsets: a reader that kept
        #: them may keep them while this is unchanged (kctl.broker.idle_followers, the replica fetcher)
        self.offsets_version = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.recovery_plan: list[SegmentRecovery] = []
        self.set_aside: list[tuple[Path, int, str]] = []  # swap files not trusted: (path, bytes, why)
        self._load(needs_recovery, recovery_point, log_start_offset, on_truncate)
        needs_recovery = needs_recovery or bool(self.recovery_plan)  # a damaged tail after a clean stop
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self.log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self.first_dirty_offset = self.log_start_offset  # compaction: everything below is clean
        self.producer_state = ProducerStateManager(self.directory, file_io)
        self._load_producer_state(self.recovery_point if needs_recovery else self.log_end_offset)
        self.leader_epoch_cache = LeaderEpochCache(self.directory, file_io)
        load_leader_epochs(
            self.leader_epoch_cache,
            self.segments,
            {step.base_offset for step in self.recovery_plan},
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
        )
        self._high_watermark_follows_log_end = high_watermark_follows_log_end
        self.high_watermark = self.log_start_offset
        if high_watermark_follows_log_end:
            high_watermark = self.log_end_offset
        self.update_high_watermark(self.log_start_offset if high_watermark is None else high_watermark)
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
        self.segments, self.recovery_plan = load_segments(
            self.directory,
            self._file_io,
            self._new_segment,
            needs_recovery=needs_recovery,
            recovery_point=recovery_point,
            on_truncate=on_truncate,
            set_aside=self.set_aside,
        )
        self._base_offsets = [segment.base_offset for segment in self.segments]
        if not self.segments:
            self._append_segment(self._new_segment(max(log_start_offset, 0)))
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
        replay(self.producer_state, self.segments[self.segment_for(start) :], start)

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
        leader_epoch: int | None = None,
        is_marker: bool = False,
        from_coordinator: bool = False,
    ) -> AppendInfo:
        """Validate and append one or more whole batches as the leader (the producer path).

        Each batch gets the next offsets by rewriting its base offset; with ``leader_epoch`` its
        partition_leader_epoch is stamped too (both outside the CRC: byte rewrites, no per-record work),
        and an epoch larger than the cache's latest is recorded as starting at the first offset.
        Raises InvalidRecordBatch (corrupt or malformed; CORRUPT_MESSAGE), RecordBatchTooLargeError,
        ProducerStateError, or LogStorageError (nothing of this append is acknowledged, and none of it is
        left in the file). ``is_marker``: a control batch from :meth:`append_control_marker`;
        ``from_coordinator``: a batch the group coordinator writes for a transactional producer (its
        producer epoch is checked, its sequence is not)."""
        # patched in place: a writable view (a request frame the broker owns) is used as is
        data = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
        now = self._clock.time_ms()
        validated = validate_append(data, self.config, leader=not is_marker, now_ms=now)
        headers = [(batch.position, batch.header) for batch in validated]
        if (recompressed := recompress_for(data, headers, self.config)) is not None:  # compression.type
            data = recompressed
            validated = validate_append(data, self.config, leader=True, now_ms=now)
        max_deltas = {batch.position: batch.offset_delta_of_max_timestamp for batch in validated}
        for batch in validated:  # a wrong CreateTime max_timestamp is corrected, as Kafka does
            if batch.max_timestamp != batch.header.max_timestamp and not self.config.log_append_time:
                set_max_timestamp(data, batch.position, batch.header.size, batch.max_timestamp)
                validated[validated.index(batch)] = batch._replace(
                    header=batch.header._replace(max_timestamp=batch.max_timestamp)
                )
        batches = [(batch.position, batch.header) for batch in validated]
        with self._lock:
            duplicate, data, batches = drop_duplicates(
                self.producer_state,
                data,
                batches,
                from_coordinator=from_coordinator,
                log_start_offset=self.log_start_offset,
                knows_every_producer=self.knows_every_producer,
            )
            if duplicate is not None:
                return duplicate
            append_time = now if self.config.log_append_time else -1
            first_offset = self.log_end_offset
            stamped = stamp_as_leader(
                data,
                batches,
                first_offset,
                leader_epoch=leader_epoch,
                append_time=append_time,
                max_deltas=max_deltas,
            )
            if leader_epoch is not None and leader_epoch > self.leader_epoch_cache.latest_epoch:
                # recorded before the batches are written: the checkpoint never misses an epoch on disk
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
            last_offset = stamped.next_offset - 1
            self._write_batches(
                data,
                stamped.batches,
                first_offset,
                last_offset,
                stamped.records_count,
                now,
                stamped.offsets_of_max,
            )
            return AppendInfo(
                first_offset,
                last_offset,
                stamped.max_timestamp,
                stamped.offset_of_max_timestamp,
                append_time,
                stamped.records_count,
                len(stamped.batches),
                len(data),
                self.log_start_offset,
            )

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        *,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        """Append a COMMIT (``commit``) or ABORT marker ending ``producer_id``'s transaction
        (WriteTxnMarkers). Raises InvalidProducerEpochError, InvalidCoordinatorEpochError, LogStorageError."""
        with self._lock:
            self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            marker = encode_marker(
                producer_id, producer_epoch, coordinator_epoch, commit=commit, timestamp=self._clock.time_ms()
            )
            return self.append(bytearray(marker), leader_epoch=leader_epoch, is_marker=True)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches copied from the leader's log, as they are: offsets, timestamps and leader
        epochs are kept (the bytes written are the leader's bytes).

        Validates framing and CRCs; the first batch must not start below the log end offset and offsets
        must rise from batch to batch (UnexpectedAppendOffsetError). A gap is accepted, as Kafka does:
        compaction removes whole batches, so the leader's next batch may start above the offset fetched.
        ``max.message.bytes`` is not applied (the leader accepted the batches). Every leader epoch newer
        than the cache's latest is recorded at the base offset of its first batch; producer state is
        updated as on the leader."""
        batches = [
            (b.position, b.header) for b in validate_append(records, self.config, leader=False, now_ms=0)
        ]
        with self._lock:
            first_offset = batches[0][1].base_offset
            last_offset, records_count, max_timestamp, offset_of_max = check_as_follower(
                batches, self.log_end_offset
            )
            cache = self.leader_epoch_cache
            for _, header in batches:
                if header.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(header.partition_leader_epoch, header.base_offset)
            now = self._clock.time_ms()
            self._write_batches(records, batches, first_offset, last_offset, records_count, now)
            return AppendInfo(
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max,
                -1,
                records_count,
                len(batches),
                len(records),
                self.log_start_offset,
            )

    def _write_batches(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        first_offset: int,
        last_offset: int,
        records_count: int,
        now: int,
        offsets_of_max: list[int] | None = None,
    ) -> None:
        """Write validated batches with their final offsets to the (possibly new) active segment."""
        segment = self._maybe_roll(len(data), first_offset, last_offset, now)
        segment.append(data, batches, offsets_of_max)
        for position, header in batches:  # a marker (control batch) is decoded: it ends a transaction
            if header.attributes & CONTROL_FLAG_MASK:
                record_batches(self.producer_state, segment, data, [(position, header)])
            else:
                self.producer_state.record(header)
        self._unflushed_messages += records_count
        self._maybe_flush()
        if self._high_watermark_follows_log_end:
            self.high_watermark = last_offset + 1
        self.offsets_version += 1

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
        if not self._unflushed_messages:  # nothing to flush (read without the lock: an int)
            return False
        with self._lock:
            due = self._clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms
            if due and self._unflushed_messages:
                self.flush()
                return True
            return False

    def flush(self) -> None:
        """fsync every segment holding data above the recovery point, and the leader epoch checkpoint
        if it was written without (an election's epoch); advance the recovery point."""
        with self._lock:
            end = self.log_end_offset
            self.leader_epoch_cache.sync()
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
        """(max timestamp, offset of the first record carrying it) over the whole log; (-1, -1) when
        empty. The offset is kept exact by the append path; a segment whose indexes were rebuilt from
        batch headers only knows the batch, which is then decoded (one batch, as Kafka does)."""
        with self._lock:
            best, holder = (-1, -1), None
            for segment in self.segments:
                if segment.size and segment.max_timestamp > best[0]:
                    best, holder = (segment.max_timestamp, segment.offset_of_max_timestamp), segment
            if holder is None:
                return best
            return best[0], holder.first_offset_with_timestamp(best[0], best[1])

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
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            if self.producer_state.delete_snapshots_above(self.log_end_offset):
                self._file_io.fsync_dir(self.directory)  # a deleted snapshot must not come back
            self._reload_producer_state()
            self.update_high_watermark(min(self.high_watermark, self.log_end_offset))
            self.offsets_version += 1

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.segments, self._base_offsets = [], []
            self.producer_state.delete_all_snapshots()
            self.producer_state.clear()
            self._append_segment(self._new_segment(offset))
            self.leader_epoch_cache.clear()
            self._file_io.fsync_dir(self.directory)
            self.log_start_offset = self.recovery_point = self.high_watermark = offset
            self.offsets_version += 1

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords; never above the high watermark); whole segments
        below it go at the next retention run, and the leader epoch cache forgets the epochs below it."""
        with self._lock:
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self.high_watermark)
            if offset <= self.log_start_offset:
                return False
            self._set_log_start_offset(offset)
            return True

    def _set_log_start_offset(self, offset: int) -> None:
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.high_watermark = max(self.high_watermark, offset)
        self.offsets_version += 1

    # -- high watermark and leader epochs ------------------------------------------------------
    @property
    def high_watermark_follows_log_end(self) -> bool:
        """True in single-replica (embedded) mode: every append moves the high watermark to the log end
        offset. Replication turns it off and moves the high watermark with update_high_watermark."""
        return self._high_watermark_follows_log_end

    @high_watermark_follows_log_end.setter
    def high_watermark_follows_log_end(self, follows: bool) -> None:
        with self._lock:
            self._high_watermark_follows_log_end = follows
            if follows:
                self.high_watermark = self.log_end_offset
                self.offsets_version += 1

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark to ``offset`` clamped to [log start offset, log end offset]; return it.
        Consumers read below it (the caller passes it as ``max_offset`` to :meth:`read`)."""
        with self._lock:
            high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
            if high_watermark != self.high_watermark:
                self.high_watermark = high_watermark
                self.offsets_version += 1
            return high_watermark

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: every transaction below it is decided."""
        return self.producer_state.last_stable_offset(self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound) (Fetch v4+ read_committed)."""
        with self._lock:
            return collect_aborted(self.segments[self.segment_for(fetch_offset) :], fetch_offset, upper_bound)

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the log's cache, -1 when none."""
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) of ``requested_epoch`` as OffsetsForLeaderEpoch answers it (see
        :meth:`LeaderEpochCache.end_offset_for`)."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(requested_epoch, self.log_end_offset)

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int | None = None) -> bool:
        """Record that ``leader_epoch`` starts at ``start_offset`` (default: the log end offset), as a
        new leader does on election before it appends anything; ignored unless the epoch is new."""
        with self._lock:
            offset = self.log_end_offset if start_offset is None else start_offset
            # written without fsyncs: flush() makes it durable before the recovery point passes a
            # batch (kctl.log.leader_epoch); a failover elects thousands of leaders in one pass
            return self.leader_epoch_cache.assign(leader_epoch, offset, durable=False)

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
        config (time and size only when cleanup.policy includes delete) and the log start offset. Only
        segments wholly below the high watermark qualify: what followers may lack is never deleted."""
        delete_policy = self.config.delete
        decisions = plan_retention(
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
        below = 0
        while below < len(decisions) and decisions[below].next_offset <= self.high_watermark:
            below += 1
        return decisions[:below]

    @property
    def knows_every_producer(self) -> bool:
        """Whether the producer state holds every idempotent producer that ever wrote to this log:
        nothing was removed from it since offset 0 (retention, DeleteRecords, compaction) and it was
        never marked incomplete (``ProducerStateManager.mark_incomplete``: a producer expired, or this
        replica took the lead with an ISR of itself alone). Then a producer it does not know is new
        and must start at sequence 0 (:meth:`ProducerStateManager.check`)."""
        incomplete = self.producer_state.incomplete
        return self.log_start_offset == 0 and not self.config.compact and not incomplete

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
            self._set_log_start_offset(max(self.log_start_offset, self.segments[0].base_offset))
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            return decisions

    # -- compaction support --------------------------------------------------------------------
    def swap_in_segment(self, old: LogSegment, swap_path: Path) -> None:
        """Replace ``old`` by a finished ``<base>.log.swap`` file (compaction output) and rebuild its
        indexes. A crash between the steps is completed at load (:func:`kctl.log.loader.complete_swaps`)."""
        with self._lock:
            index = self.segments.index(old)
            aborted = list(old.txn_index.entries)  # the aborted transactions stay indexed
            old.delete()
            self._file_io.rename(swap_path, old.path)
            fresh = self._new_segment(old.base_offset)
            fresh.rebuild_indexes()
            for entry in aborted:
                fresh.txn_index.append(entry)
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
        return self.log_dir == Path(log_dir)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self.segments)})"
        )
