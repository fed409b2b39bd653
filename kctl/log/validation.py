"""What a log checks before it appends batches (Kafka's LogValidator): framing and CRC of every batch,
and for the leader (batches from producers) the rules Kafka applies to client batches —
``max.message.bytes``, no control batches, a positive record count equal to last_offset_delta + 1, a
producer id's sequence not negative, a known codec, records that parse (compressed ones within a
bounded decompression), offset deltas that are the records' indexes, keys on compacted topics and
CreateTime timestamps within ``message.timestamp.before/after.max.ms`` (per-record errors).

The record walk is :func:`kctl.records.validate.walk_batch`: a structural pass over varint lengths,
no record objects. Its max-timestamp finding is returned so the append path indexes the exact offset
of a batch's largest timestamp without another scan. :func:`check_produce_records` is the request-level
rule of Produce v3+: exactly one batch per partition, magic 2."""

from __future__ import annotations

from typing import NamedTuple

from kctl.log.config import LogConfig
from kctl.records.header import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    InvalidRecordBatch,
    iter_headers,
    read_prefix,
)
from kctl.records.validate import (
    InvalidRecordError,
    RecordError,
    RecordValidationError,
    decompression_limit,
    walk_batch,
)

__all__ = [
    "RecordBatchTooLargeError",
    "UnsupportedCompressionError",
    "ValidatedBatch",
    "check_produce_records",
    "validate_append",
]

ZSTD = 4
FIRST_ZSTD_PRODUCE_VERSION = 7


class ValidatedBatch(NamedTuple):
    """A batch of an append: its position in the data, its header, and the offset delta of its first
    record with the largest timestamp (the batch's last offset delta when the records were not walked)."""

    position: int
    header: BatchHeader
    offset_delta_of_max_timestamp: int
    max_timestamp: int  # the records' (the header's when they were not walked)


class RecordBatchTooLargeError(ValueError):
    """A batch larger than ``max.message.bytes``."""


class UnsupportedCompressionError(InvalidRecordError):
    """zstd in a Produce request older than v7 (UNSUPPORTED_COMPRESSION_TYPE)."""


def check_produce_records(records: bytes | bytearray | memoryview, version: int) -> None:
    """Produce v3+ carry exactly one magic-2 batch per partition (InvalidRecordError otherwise; zstd
    before v7: UnsupportedCompressionError). Reads two prefixes and a byte, nothing more."""
    size = len(records)
    if size <= MAGIC_OFFSET:
        raise InvalidRecordError(
            f"Produce requests with version {version} must have at least one record batch"
        )
    _, batch_length = read_prefix(records, 0)
    magic = records[MAGIC_OFFSET]
    if magic != 2:
        raise InvalidRecordError(
            f"Produce requests with version {version} are only allowed to contain record batches "
            "with magic version 2"
        )
    if batch_length >= 0 and LOG_OVERHEAD + batch_length < size:
        raise InvalidRecordError(
            f"Produce requests with version {version} are only allowed to contain exactly one record batch"
        )
    if version < FIRST_ZSTD_PRODUCE_VERSION and size > 22 and records[22] & 0x07 == ZSTD:
        raise UnsupportedCompressionError(f"zstd compression needs Produce v{FIRST_ZSTD_PRODUCE_VERSION}+")


def validate_append(
    data: bytes | bytearray | memoryview,
    config: LogConfig,
    *,
    leader: bool,
    now_ms: int,
) -> list[ValidatedBatch]:
    """Every batch of ``data`` validated (see the module docstring); raises InvalidRecordBatch (or its
    subclasses InvalidRecordError / RecordValidationError) for the first problem, or
    RecordBatchTooLargeError."""
    batches: list[ValidatedBatch] = []
    end = 0
    limit = config.max_message_bytes
    inflate_limit = decompression_limit(limit)
    low = high = None
    if leader and not config.log_append_time:
        if config.message_timestamp_before_max_ms < 2**63 - 1:
            low = now_ms - config.message_timestamp_before_max_ms
        if config.message_timestamp_after_max_ms < 2**63 - 1:
            high = now_ms + config.message_timestamp_after_max_ms
    for position, header in iter_headers(data, check_crc=True):
        if not leader:
            if header.records_count <= 0:
                raise InvalidRecordBatch("batch has no records", position)
            batches.append(ValidatedBatch(position, header, header.last_offset_delta, header.max_timestamp))
            end = position + header.size
            continue
        if header.size > limit:
            raise RecordBatchTooLargeError(f"batch of {header.size} bytes exceeds max.message.bytes={limit}")
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"invalid reported count {header.records_count} for record batch", position
            )
        if header.is_control:
            raise InvalidRecordError("control batches are written by the broker, not by producers", position)
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"inconsistent batch offset range and record count: {header.records_count} records but "
                f"last_offset_delta {header.last_offset_delta}",
                position,
            )
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(f"invalid sequence number {header.base_sequence}", position)
        summary = walk_batch(
            data,
            position,
            header,
            max_decompressed_size=inflate_limit,
            key_required=config.compact,
            timestamp_low=low,
            timestamp_high=high,
        )
        if summary.record_errors:
            raise _record_errors(summary.record_errors, position)
        batches.append(
            ValidatedBatch(position, header, summary.offset_delta_of_max_timestamp, summary.max_timestamp)
        )
        end = position + header.size
    if not batches:
        raise InvalidRecordBatch("no record batch in the request", 0)
    if end != len(data):
        raise InvalidRecordBatch(f"{len(data) - end} trailing bytes after the last batch", end)
    return batches


def _record_errors(errors: list[RecordError], position: int) -> RecordValidationError:
    timestamps = any(error.message.startswith("Timestamp") for error in errors)
    if timestamps:
        message = "One or more records have been rejected due to invalid timestamp"
    else:
        shown = ", ".join(f"record {e.batch_index}: {e.message}" for e in errors[:3])
        message = (
            f"One or more records have been rejected due to {len(errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]"
        )
    error = RecordValidationError(message, errors, timestamps)
    error.position = position
    return error
