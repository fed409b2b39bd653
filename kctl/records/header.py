"""Header-level view of RecordBatch v2 (magic 2): parse, validate and patch a batch without
touching its records.

This is everything the broker and the log need on their hot paths: a batch is handled as opaque
bytes, its 61-byte header is read with one ``struct`` call, its CRC-32C is checked over
attributes..end, and offsets, partition leader epoch or log-append time are patched in place.

Layout (big-endian):

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 | crc uint32 |
    attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64 |
    producer_id int64 | producer_epoch int16 | base_sequence int32 | records_count int32 | records...

``batch_length`` counts the bytes after itself, so a batch occupies ``batch_length + 12`` bytes.
The CRC covers everything from ``attributes`` to the end of the batch; base_offset, batch_length and
partition_leader_epoch are outside it, so the broker can assign offsets without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from kctl.records.crc import crc32c

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted by batch_length
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

MAGIC_V2 = 2

# attributes bits
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class InvalidRecordBatch(ValueError):
    """A batch whose framing, magic or CRC is wrong. ``position`` is its byte position."""

    def __init__(self, message: str, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header at ``position``. Raises InvalidRecordBatch if fewer than 61 bytes remain,
    the magic is not 2, or batch_length is too small to hold a header."""
    if len(buf) - position < HEADER_SIZE:
        raise InvalidRecordBatch(
            f"truncated batch header: {len(buf) - position} of {HEADER_SIZE} bytes", position
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, position))
    if header.magic != MAGIC_V2:
        raise InvalidRecordBatch(f"unsupported magic {header.magic} (only 2 is supported)", position)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(f"batch length {header.batch_length} is below the minimum", position)
    if header.last_offset_delta < 0:
        raise InvalidRecordBatch(f"negative last_offset_delta {header.last_offset_delta}", position)
    return header


def read_prefix(buf: bytes | bytearray | memoryview, position: int = 0) -> tuple[int, int]:
    """Return (base_offset, batch_length) from the 12-byte log overhead at ``position``."""
    return _PREFIX.unpack_from(buf, position)


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """CRC-32C of the batch at ``position`` spanning ``size`` bytes (attributes..end)."""
    view = memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size]
    try:
        return crc32c(view)
    finally:
        view.release()


def validate_batch(
    buf: bytes | bytearray | memoryview, position: int = 0, end: int | None = None
) -> BatchHeader:
    """Parse and fully validate the batch at ``position``: header, length within ``buf[:end]``, CRC.

    Returns the header; raises InvalidRecordBatch describing the first problem found."""
    limit = len(buf) if end is None else end
    header = parse_header(buf, position)
    if position + header.size > limit:
        raise InvalidRecordBatch(
            f"batch of {header.size} bytes at position {position} runs past the end "
            f"({limit - position} bytes available)",
            position,
        )
    computed = compute_crc(buf, position, header.size)
    if computed != header.crc:
        raise InvalidRecordBatch(
            f"CRC mismatch: stored {header.crc:#010x}, computed {computed:#010x}", position
        )
    return header


def iter_headers(
    buf: bytes | bytearray | memoryview, position: int = 0, end: int | None = None, *, check_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for consecutive batches in ``buf[position:end]``.

    Stops silently at a trailing partial header (fewer than 61 bytes left); raises InvalidRecordBatch
    for a batch that is malformed or, with ``check_crc``, fails its CRC, or whose declared size runs
    past ``end``."""
    limit = len(buf) if end is None else end
    while limit - position >= HEADER_SIZE:
        if check_crc:
            header = validate_batch(buf, position, limit)
        else:
            header = parse_header(buf, position)
            if position + header.size > limit:
                raise InvalidRecordBatch(
                    f"batch of {header.size} bytes at position {position} runs past the end", position
                )
        yield position, header
        position += header.size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Overwrite the batch's base_offset (not covered by the CRC)."""
    _INT64.pack_into(buf, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Overwrite the batch's partition_leader_epoch (not covered by the CRC)."""
    _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, size: int, timestamp_ms: int) -> None:
    """Mark the batch as LogAppendTime with max_timestamp ``timestamp_ms`` and recompute its CRC."""
    (attributes,) = _INT16.unpack_from(buf, position + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, position + CRC_OFFSET, compute_crc(buf, position, size))


def set_max_timestamp(buf: bytearray | memoryview, position: int, size: int, timestamp_ms: int) -> None:
    """Overwrite the batch's max_timestamp (CreateTime: the largest record timestamp) and its CRC."""
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, position + CRC_OFFSET, compute_crc(buf, position, size))


def write_crc(buf: bytearray | memoryview, position: int, size: int) -> int:
    """Compute and store the CRC of the batch at ``position``; return it."""
    crc = compute_crc(buf, position, size)
    _UINT32.pack_into(buf, position + CRC_OFFSET, crc)
    return crc
