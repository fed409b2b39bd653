"""Record-level validation of a RecordBatch v2 without building records: the structural walk that
produce (on append), ``kctl log verify`` and the cleaner use to prove a batch decodes.

:func:`walk_records` steps over each record's varint fields (length, attributes, timestamp delta,
offset delta, key, value, header count and each header's lengths) and checks that they fit the record
and that the records fill the section exactly, without slicing keys or values into objects. On the
way it finds the largest timestamp and the index of the first record carrying it (ListOffsets'
max-timestamp answer, kept per batch without another scan), and — when asked — collects Kafka's
per-record errors: a record without a key (compacted topics) and a CreateTime timestamp outside
``[low, high]``.

:func:`walk_batch` does that for a whole batch: an unknown codec (5-7) is refused, a compressed
records section is decompressed within a bound (:func:`decompression_limit`), and the records are
walked. Malformed input raises :class:`~kctl.records.header.InvalidRecordBatch` (the broker answers
CORRUPT_MESSAGE); :class:`InvalidRecordError` is the subclass for a batch that decodes but breaks a
rule (INVALID_RECORD); :class:`RecordValidationError` carries the per-record errors."""

from __future__ import annotations

from typing import NamedTuple

from kctl.records.compression import CompressionType, DecompressionError, decompress
from kctl.records.header import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidRecordBatch,
)
from kctl.records.varint import VarintError, decode_uvarint, decode_uvarlong

__all__ = [
    "InvalidRecordError",
    "RecordError",
    "RecordValidationError",
    "RecordsSummary",
    "decompression_limit",
    "walk_batch",
    "walk_lengths",
    "walk_records",
]

NO_TIMESTAMP = -1
MIN_DECOMPRESSION_LIMIT = 32 * 1024 * 1024
DECOMPRESSION_FACTOR = 32
_CODECS = frozenset(int(codec) for codec in CompressionType)
Buffer = bytes | bytearray | memoryview


def decompression_limit(max_message_bytes: int) -> int:
    """The largest decompressed records section accepted for a batch of at most ``max_message_bytes``
    compressed bytes: 32 times that, at least 32 MiB (a decompression bomb stops there)."""
    return max(MIN_DECOMPRESSION_LIMIT, DECOMPRESSION_FACTOR * max(max_message_bytes, 0))


class InvalidRecordError(InvalidRecordBatch):
    """A batch that is well framed but breaks a rule Kafka enforces on append (INVALID_RECORD)."""


class RecordError(NamedTuple):
    """One rejected record: its index in the batch and why (Produce v8+ ``record_errors``)."""

    batch_index: int
    message: str


class RecordValidationError(InvalidRecordError):
    """Records that parse but that the topic refuses; ``invalid_timestamp`` selects INVALID_TIMESTAMP
    over INVALID_RECORD, as Kafka does when any of the errors is a timestamp's."""

    def __init__(self, message: str, record_errors: list[RecordError], invalid_timestamp: bool) -> None:
        super().__init__(message, 0)
        self.record_errors = record_errors
        self.invalid_timestamp = invalid_timestamp


class RecordsSummary(NamedTuple):
    """What the walk learned: the largest record timestamp (-1 when none) and the offset delta of the
    first record carrying it; the per-record errors found (empty unless checks were asked for)."""

    max_timestamp: int
    offset_delta_of_max_timestamp: int
    record_errors: list[RecordError]


def _skip_bytes(data: Buffer, pos: int, record_end: int, index: int, what: str) -> int:
    """Step over a varint-length-prefixed byte string (-1 = null); return the position after it."""
    b = data[pos]
    if b < 0x80:
        pos += 1
    else:
        b, pos = decode_uvarint(data, pos)
    if b & 1:
        if b != 1:
            raise InvalidRecordBatch(f"record {index}: negative {what} length {(b >> 1) ^ -1}")
        return pos
    pos += b >> 1
    if pos > record_end:
        raise InvalidRecordBatch(f"record {index}: {what} length {b >> 1} runs past the record's end")
    return pos


def walk_records(
    data: Buffer,
    pos: int,
    limit: int,
    header: BatchHeader,
    *,
    key_required: bool = False,
    timestamp_low: int | None = None,
    timestamp_high: int | None = None,
    compacted: bool = False,
) -> RecordsSummary:
    """Walk the ``header.records_count`` records of ``data[pos:limit]`` (an uncompressed records
    section). Raises InvalidRecordBatch for records that do not parse, InvalidRecordError for offset
    deltas that are not the records' indexes (with ``compacted``: that do not rise within the batch's
    offset range, as compaction leaves them); per-record errors (a null key with ``key_required``, a
    CreateTime timestamp outside ``[timestamp_low, timestamp_high]``) are returned, not raised."""
    count = header.records_count
    if count < 0 or count > (limit - pos) // 7:
        raise InvalidRecordBatch(
            f"records_count {count} cannot fit in a records section of {limit - pos} bytes"
        )
    base_timestamp = header.base_timestamp
    log_append_time = header.attributes & TIMESTAMP_TYPE_MASK
    check_time = not log_append_time and (timestamp_low is not None or timestamp_high is not None)
    low = timestamp_low if timestamp_low is not None else -(2**63)
    high = timestamp_high if timestamp_high is not None else 2**63
    max_timestamp, index_of_max = NO_TIMESTAMP, 0
    previous_delta, last_delta = -1, header.last_offset_delta
    errors: list[RecordError] = []
    index = 0
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            record_end = pos + ((b >> 1) ^ -(b & 1))
            if record_end > limit or record_end - pos < 6:
                raise InvalidRecordBatch(
                    f"record {index}: length {record_end - pos} "
                    f"(records section has {limit - pos} bytes left)"
                )
            b = data[pos + 1]  # after the attributes byte: the timestamp delta
            if b < 0x80:
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 3
            else:
                b, pos = decode_uvarlong(data, pos + 1)
            timestamp = base_timestamp + ((b >> 1) ^ -(b & 1))
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                b, pos = decode_uvarint(data, pos)
            delta = (b >> 1) ^ -(b & 1)
            if delta != index and not (compacted and previous_delta < delta <= last_delta):
                raise InvalidRecordError(f"record {index}: offset delta {delta} is not its index")
            previous_delta = delta
            keyless = key_required and data[pos] == 1
            if keyless:
                errors.append(RecordError(index, "Compacted topic cannot accept message without key"))
            for what in ("key", "value"):
                b = data[pos]
                if b == 1:
                    pos += 1
                    continue
                if b < 0x80:
                    pos += 1
                elif (c := data[pos + 1]) < 0x80:
                    b = (b & 0x7F) | c << 7
                    pos += 2
                else:
                    b, pos = decode_uvarint(data, pos)
                if b & 1:
                    raise InvalidRecordBatch(f"record {index}: negative {what} length {(b >> 1) ^ -1}")
                pos += b >> 1
                if pos > record_end:
                    raise InvalidRecordBatch(
                        f"record {index}: {what} length {b >> 1} runs past the record's end"
                    )
            b = data[pos]
            if b == 0:
                pos += 1
            else:
                if b >= 0x80:
                    b, pos = decode_uvarint(data, pos)
                else:
                    pos += 1
                headers = (b >> 1) ^ -(b & 1)
                if not 0 <= headers <= (record_end - pos) // 2:
                    raise InvalidRecordBatch(
                        f"record {index}: header count {headers} does not fit the record"
                    )
                for _ in range(headers):
                    if data[pos] == 1:
                        raise InvalidRecordBatch(f"record {index}: a header key is null")
                    pos = _skip_bytes(data, pos, record_end, index, "header key")
                    pos = _skip_bytes(data, pos, record_end, index, "header value")
            if pos != record_end:
                raise InvalidRecordBatch(
                    f"record {index}: fields end at {pos - record_end:+d} bytes from the record's length"
                )
            if timestamp > max_timestamp:
                max_timestamp, index_of_max = timestamp, index
            if check_time and not keyless and timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
                errors.append(
                    RecordError(
                        index,
                        f"Timestamp {timestamp} of message with offset {index} is out of range. "
                        f"The timestamp should be within [{low}, {high}]",
                    )
                )
    except IndexError:
        raise InvalidRecordBatch(f"record {index} runs past the end of the records section") from None
    except VarintError as exc:
        raise InvalidRecordBatch(f"record {index}: {exc}") from None
    if pos != limit:
        raise InvalidRecordBatch(f"{limit - pos} bytes left over after the batch's {count} records")
    if log_append_time:
        max_timestamp, index_of_max = header.max_timestamp, 0
    return RecordsSummary(max_timestamp, index_of_max, errors)


MIN_RUN = 16
"""Records a run of one size must cover for :func:`walk_lengths` to keep looking for runs."""


def _same_size_prefix(data: Buffer, pos: int, size: int, width: int, n: int) -> int:
    """How many of the ``n`` records from ``pos`` on, at ``size`` bytes each, begin with the same
    ``width`` length bytes as the first (so each is ``size`` bytes long: by induction, the first is,
    so the second begins at ``pos + size``, and so on). One byte column per varint byte, compared at
    C speed: ``lstrip`` of the column's first byte leaves the records that differ."""
    end = pos + n * size
    for offset in range(width):
        column = bytes(data[pos + offset : end : size])
        n -= len(column.lstrip(column[:1]))
        end = pos + n * size
    return n


def walk_lengths(data: Buffer, pos: int, limit: int, header: BatchHeader) -> RecordsSummary:
    """The cheap walk for a well-formed uncompressed batch with nothing per-record to check: each
    record's length varint is read and the record stepped over; the records must fill the section
    exactly. The fields inside a record are covered by the CRC and not parsed (:func:`walk_records`
    parses them), and timestamps are not read: the summary names the batch's last offset delta for
    its max timestamp, which ListOffsets resolves by decoding that one batch when asked.

    Records of one size (fixed-size values: a batch is a few such runs, split where an offset delta's
    varint grows a byte) are stepped over a run at a time (:func:`_same_size_prefix`); once a run
    covers fewer than ``MIN_RUN`` records, the rest of the batch is walked a record at a time."""
    count = header.records_count
    if count < 0 or count > (limit - pos) // 7:
        raise InvalidRecordBatch(
            f"records_count {count} cannot fit in a records section of {limit - pos} bytes"
        )
    index = 0
    runs = count >= MIN_RUN
    try:
        # A record length is a zigzag varint: even and at least 12 (6 bytes) when valid. Lengths only
        # move ``pos`` forward, so one that runs past the section shows in the final comparison.
        while index < count:
            start = pos
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            if b & 1 or b < 12:
                raise InvalidRecordBatch(f"record {index}: length {(b >> 1) ^ -(b & 1)} is too small")
            pos += b >> 1
            index += 1
            if runs:
                size = pos - start
                n = min(count - index + 1, (limit - start) // size)
                same = _same_size_prefix(data, start, size, size - (b >> 1), n) if n > 1 else 1
                if same < MIN_RUN:
                    runs = False  # sizes vary: a record at a time from here
                else:
                    pos = start + same * size
                    index += same - 1
    except IndexError:
        raise InvalidRecordBatch(f"record {index} runs past the end of the records section") from None
    except VarintError as exc:
        raise InvalidRecordBatch(f"record {index}: {exc}") from None
    if pos != limit:
        raise InvalidRecordBatch(
            f"the batch's {count} records end {pos - limit:+d} bytes from the end of the records section"
        )
    return RecordsSummary(header.max_timestamp, header.last_offset_delta, [])


def walk_batch(
    buf: Buffer,
    position: int,
    header: BatchHeader,
    *,
    max_decompressed_size: int | None,
    key_required: bool = False,
    timestamp_low: int | None = None,
    timestamp_high: int | None = None,
    compacted: bool = False,
) -> RecordsSummary:
    """Validate the records of the (framed, CRC-checked) batch at ``position``: codec, decompression
    within ``max_decompressed_size``, then :func:`walk_records` when there is something per record to
    check (keys, timestamp bounds, ``compacted`` offsets: every field parsed), else the cheaper
    :func:`walk_lengths`. Errors carry the batch's position."""
    start = position + HEADER_SIZE
    end = position + header.size
    codec = header.attributes & COMPRESSION_CODEC_MASK
    try:
        if codec == CompressionType.NONE:
            data: Buffer = buf
        else:
            if codec not in _CODECS:
                raise InvalidRecordBatch(f"unknown compression codec {codec}")
            try:
                data = decompress(codec, memoryview(buf)[start:end], max_decompressed_size)
            except DecompressionError as exc:
                raise InvalidRecordBatch(
                    f"cannot decompress {CompressionType(codec).label} records: {exc}"
                ) from None
            start, end = 0, len(data)
        if not key_required and not compacted and timestamp_low is None and timestamp_high is None:
            return walk_lengths(data, start, end, header)
        return walk_records(
            data,
            start,
            end,
            header,
            key_required=key_required,
            timestamp_low=timestamp_low,
            timestamp_high=timestamp_high,
            compacted=compacted,
        )
    except InvalidRecordBatch as error:
        error.position = position
        raise
