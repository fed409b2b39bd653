"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

Transactions (:mod:`kctl.log.cleaner_transactions`): only segments wholly below the last stable
offset are cleaned; the batches of aborted transactions are removed (and never enter the key map);
a COMMIT or ABORT marker with no data of its transaction left before it gets a delete horizon
(``delete.retention.ms`` ahead) and is removed by the first cleaning past it; the ``.txnindex`` keeps
the entries of the ABORT markers that stay.

One pass: build a map key -> latest offset over the cleanable segments (every segment but the active
one, and only those older than ``min.compaction.lag.ms``), then rewrite each cleanable segment keeping a
record only if it is the latest for its key; tombstones (null values) are kept until they are older than
``delete.retention.ms``, then dropped. Offsets never change (compacted logs have gaps): a rewritten batch
keeps its base offset and last offset delta. Batches left whole are copied as bytes; a batch left empty
is dropped. Each cleaned segment is written to ``<base>.log.cleaned``, renamed ``.swap`` once complete,
then swapped in under the log's lock — a crash at any point leaves either the old or the new segment.
Records with a null key are kept (Kafka refuses them on compacted topics at produce time).

Memory is bounded: a compressed batch is decompressed only up to the smaller of the broker's
``max.decompressed.batch.bytes`` and what produce accepts for the topic's ``max.message.bytes``
(:func:`kctl.records.validate.decompression_limit`); a batch past that (a decompression bomb) is kept
unchanged, with a logged reason, and never expanded in memory."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import NamedTuple

from kctl.log.cleaner_transactions import CleanedTransactions, delete_horizon, with_delete_horizon
from kctl.log.clock import Clock
from kctl.log.log import Log
from kctl.log.naming import CLEANED_SUFFIX, SWAP_SUFFIX
from kctl.log.segment import LogSegment
from kctl.log.transactions import AbortedTxn, marker_of
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import TIMESTAMP_TYPE_MASK, InvalidRecordBatch
from kctl.records.reader import decode_batch
from kctl.records.record import DecodedBatch
from kctl.records.validate import decompression_limit

log = logging.getLogger("kctl.log.cleaner")
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


@dataclass(frozen=True)
class CleanResult:
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int


def dirty_ratio(log: Log, first_dirty_offset: int) -> float:
    """Share of the cleanable bytes that lie at or above ``first_dirty_offset``."""
    cleanable = log.segments[:-1]
    total = sum(segment.size for segment in cleanable)
    if total == 0:
        return 0.0
    dirty = sum(segment.size for segment in cleanable if segment.next_offset > first_dirty_offset)
    return dirty / total


def _stable_offset(log: Log) -> int:
    """The log's last stable offset, read without changing its producer state (the cleaner runs in
    a thread of its own; copies of the containers are taken under the GIL)."""
    state = log.producer_state
    high_watermark = log.high_watermark
    unreplicated = [txn.first_offset for txn in list(state.unreplicated) if txn.last_offset >= high_watermark]
    return min([high_watermark, *list(state.ongoing.values()), *unreplicated])


def _cleanable_segments(log: Log, now_ms: int) -> list[LogSegment]:
    """The segments to clean: not the active one, none with data at or past the last stable offset
    (an open transaction's data is never cleaned), none younger than min.compaction.lag.ms."""
    lag = log.config.min_compaction_lag_ms
    stable = _stable_offset(log)
    result = []
    for segment in log.segments[:-1]:
        if segment.next_offset > stable:
            break
        if segment.size and lag > 0 and segment.max_timestamp > now_ms - lag:
            break
        result.append(segment)
    return result


def _aborted_transactions(log: Log, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions (``.txnindex`` entries of every segment) starting below ``upper_bound``."""
    return [
        entry
        for segment in list(log.segments)
        for entry in list(segment.txn_index.entries)
        if entry.first_offset < upper_bound
    ]


def _iter_batches(segment: LogSegment):
    for position, header in segment.iter_headers(0):
        yield header, segment.read_batch_bytes(position, header.size)


def _decode(data: bytes, max_decompressed_size: int) -> DecodedBatch | None:
    """The batch's records, or None when it cannot be decoded within the size limit (a batch that
    decompresses to something huge is kept as it is, never expanded in memory)."""
    try:
        return decode_batch(data, verify_crc=False, max_decompressed_size=max_decompressed_size)
    except InvalidRecordBatch as error:
        log.warning(
            "compaction keeps a batch it cannot decode within %d bytes, unchanged: %s",
            max_decompressed_size,
            error,
        )
        return None


def build_offset_map(
    segments: list[LogSegment],
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    aborted: list[AbortedTxn] | None = None,
) -> dict[bytes, int]:
    """key -> the largest offset holding that key in ``segments``, records of the ``aborted``
    transactions left out."""
    latest: dict[bytes, int] = {}
    transactions = CleanedTransactions(aborted or [])
    for segment in segments:
        for header, data in _iter_batches(segment):
            if header.is_control:
                transactions.on_control_batch(header, data)
                continue
            if transactions.on_data_batch(header):
                continue
            batch = _decode(data, max_decompressed_size)
            for record in batch.records if batch is not None else ():
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def needs_cleaning(log: Log) -> bool:
    """Whether the share of not-yet-cleaned bytes reaches ``min.cleanable.dirty.ratio``."""
    return dirty_ratio(log, log.first_dirty_offset) >= log.config.min_cleanable_dirty_ratio


def clean_log(
    log: Log, clock: Clock, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> CleanResult:
    """Compact ``log`` once; return what it removed. Afterwards everything below the active
    segment counts as clean (``log.first_dirty_offset``)."""
    # memory bound: never more than the topic's max.message.bytes allows produce to decompress
    max_decompressed_size = min(max_decompressed_size, decompression_limit(log.config.max_message_bytes))
    now = clock.time_ms()
    segments = _cleanable_segments(log, now)
    if not segments:
        return CleanResult(0, 0, 0, 0, 0)
    aborted = _aborted_transactions(log, segments[-1].next_offset)
    latest = build_offset_map(segments, max_decompressed_size, aborted)
    transactions = CleanedTransactions(aborted)
    tombstone_horizon = now - log.config.delete_retention_ms
    before = after = removed = tombstones = 0
    cleaned = 0
    for segment in segments:
        output = segment.path.with_name(segment.path.name + CLEANED_SUFFIX)
        kept_bytes, dropped, dropped_tombstones, changed = _write_cleaned(
            segment,
            output,
            latest,
            _Horizons(tombstone_horizon, now, log.config.delete_retention_ms),
            max_decompressed_size,
            transactions,
        )
        before += segment.size
        if not changed:
            output.unlink(missing_ok=True)
            after += segment.size
            continue
        swap = segment.path.with_name(segment.path.name + SWAP_SUFFIX)
        os.replace(output, swap)
        # the index keeps the aborts whose marker stays (the swap carries the segment's entries over)
        segment.txn_index.retain(transactions.aborted_kept(segment.txn_index.entries))
        log.swap_in_segment(segment, swap)
        after += kept_bytes
        removed += dropped
        tombstones += dropped_tombstones
        cleaned += 1
    log.first_dirty_offset = max(log.first_dirty_offset, segments[-1].next_offset)
    return CleanResult(cleaned, before, after, removed, tombstones)


class _Horizons(NamedTuple):
    tombstones: int  # tombstones older than this go
    now: int  # markers whose delete horizon is at or before this go
    delete_retention_ms: int  # a removable marker's delete horizon: now + this


def _write_cleaned(
    segment: LogSegment,
    output: os.PathLike[str],
    latest: dict[bytes, int],
    horizons: _Horizons,
    max_decompressed_size: int,
    transactions: CleanedTransactions,
) -> tuple[int, int, int, bool]:
    dropped = dropped_tombstones = 0
    written = 0
    changed = False
    tombstone_horizon = horizons.tombstones
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for header, data in _iter_batches(segment):
            if header.is_control:
                if transactions.on_control_batch(header, data):  # removable: no data of it is left
                    horizon = delete_horizon(header)
                    if horizon is not None and horizon <= horizons.now:
                        changed = True
                        continue
                    if horizon is None:
                        data = with_delete_horizon(data, horizons.now + horizons.delete_retention_ms)
                        changed = True
                    marker = marker_of(data)
                    if marker is not None and marker.is_abort:  # it stays a while: so does its entry
                        transactions.kept_abort(header.base_offset)
                os.write(fd, data)
                written += len(data)
                continue
            if transactions.on_data_batch(header):  # an aborted transaction's batch
                dropped += header.records_count
                changed = True
                continue
            batch = _decode(data, max_decompressed_size)
            if batch is None:
                os.write(fd, data)
                written += len(data)
                continue
            keep = []
            for record in batch.records:
                if record.key is not None and latest.get(record.key, record.offset) > record.offset:
                    dropped += 1
                    continue
                if record.value is None and record.key is not None and record.timestamp < tombstone_horizon:
                    dropped_tombstones += 1
                    continue
                keep.append(record)
            if len(keep) == len(batch.records):
                os.write(fd, data)
                written += len(data)
                continue
            changed = True
            if not keep:
                continue
            builder = RecordBatchBuilder(
                compression=header.compression,
                base_offset=header.base_offset,
                log_append_time=bool(header.attributes & TIMESTAMP_TYPE_MASK),
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                is_transactional=header.is_transactional,
                partition_leader_epoch=header.partition_leader_epoch,
            )
            for record in keep:
                builder.append(
                    record.timestamp,
                    record.key,
                    record.value,
                    record.headers,
                    offset_delta=record.offset - header.base_offset,
                )
            rebuilt = builder.build(last_offset_delta=header.last_offset_delta)
            os.write(fd, rebuilt)
            written += len(rebuilt)
        os.fsync(fd)
    finally:
        os.close(fd)
    return written, dropped, dropped_tombstones, changed
