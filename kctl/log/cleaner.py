"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

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

from kctl.log.clock import Clock
from kctl.log.log import Log
from kctl.log.naming import CLEANED_SUFFIX, SWAP_SUFFIX
from kctl.log.segment import LogSegment
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


def _cleanable_segments(log: Log, now_ms: int) -> list[LogSegment]:
    lag = log.config.min_compaction_lag_ms
    result = []
    for segment in log.segments[:-1]:
        if segment.size and lag > 0 and segment.max_timestamp > now_ms - lag:
            break
        result.append(segment)
    return result


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
    segments: list[LogSegment], max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> dict[bytes, int]:
    """key -> the largest offset holding that key in ``segments``."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        for header, data in _iter_batches(segment):
            if header.is_control:
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
    latest = build_offset_map(segments, max_decompressed_size)
    tombstone_horizon = now - log.config.delete_retention_ms
    before = after = removed = tombstones = 0
    cleaned = 0
    for segment in segments:
        output = segment.path.with_name(segment.path.name + CLEANED_SUFFIX)
        kept_bytes, dropped, dropped_tombstones, changed = _write_cleaned(
            segment, output, latest, tombstone_horizon, max_decompressed_size
        )
        before += segment.size
        if not changed:
            output.unlink(missing_ok=True)
            after += segment.size
            continue
        swap = segment.path.with_name(segment.path.name + SWAP_SUFFIX)
        os.replace(output, swap)
        log.swap_in_segment(segment, swap)
        after += kept_bytes
        removed += dropped
        tombstones += dropped_tombstones
        cleaned += 1
    log.first_dirty_offset = max(log.first_dirty_offset, segments[-1].next_offset)
    return CleanResult(cleaned, before, after, removed, tombstones)


def _write_cleaned(
    segment: LogSegment,
    output: os.PathLike[str],
    latest: dict[bytes, int],
    tombstone_horizon: int,
    max_decompressed_size: int,
) -> tuple[int, int, int, bool]:
    dropped = dropped_tombstones = 0
    written = 0
    changed = False
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for header, data in _iter_batches(segment):
            if header.is_control:
                os.write(fd, data)
                written += len(data)
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
