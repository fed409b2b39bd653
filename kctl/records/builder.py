"""Encoding records into a RecordBatch v2 — the producer's hot path.

This module owns the record-level encoder: :class:`RecordBatchBuilder` appends records to one
``bytearray`` (behind a reserved 61-byte header) and :meth:`RecordBatchBuilder.build` compresses the
records section, fills in the header and writes the CRC-32C with :func:`kctl.records.header.write_crc`.

A record on the wire (all integers zigzag varints, the timestamp delta a varlong):

    length varint | attributes int8 (unused, 0) | timestamp_delta varlong | offset_delta varint |
    key_length varint | key | value_length varint | value | header_count varint |
    [header_key_length varint | header_key (UTF-8) | header_value_length varint | header_value]...

A length of −1 means null. Deltas are relative to the batch's base_offset and base_timestamp (the
first record's timestamp). Per record, :meth:`RecordBatchBuilder.append` does a few comparisons, table
look-ups of pre-encoded varints, one ``bytes.join`` and one ``bytearray`` extend.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from kctl.records.compression import CompressionType, compress
from kctl.records.header import (
    CONTROL_FLAG_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    write_crc,
)
from kctl.records.varint import INT32_MAX, encode_varint, encode_varlong

__all__ = ["RecordBatchBuilder", "encode_batch"]

HeaderInput = tuple[str | bytes, bytes | None]
RecordInput = tuple[int, bytes | None, bytes | None, Sequence[HeaderInput]]

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _BATCH_HEADER.size == HEADER_SIZE

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

# Pre-encoded zigzag varints for 0 <= n < _CACHE_SIZE (one or two bytes each): the lengths and
# deltas of typical records.
_CACHE_SIZE = 1 << 13
_VARINTS: tuple[bytes, ...] = tuple(
    bytes((n << 1,)) if n < 64 else bytes(((n << 1) & 0x7F | 0x80, n >> 6)) for n in range(_CACHE_SIZE)
)
assert all(_VARINTS[n] == encode_varint(n) for n in (0, 63, 64, 1000, _CACHE_SIZE - 1))
_NULL = b"\x01"  # varint -1: null key/value/header value
_ZERO = b"\x00"  # record attributes; also an empty header count
_EMPTY = b""


def _encode_headers(headers: Iterable[HeaderInput]) -> bytes:
    """header_count followed by each header, as one bytes object."""
    items = headers if isinstance(headers, (list, tuple)) else list(headers)
    out = bytearray(encode_varint(len(items)))
    for header_key, header_value in items:
        key_bytes = header_key.encode() if isinstance(header_key, str) else bytes(header_key)
        out += encode_varint(len(key_bytes))
        out += key_bytes
        if header_value is None:
            out += _NULL
        else:
            out += encode_varint(len(header_value))
            out += header_value
    return bytes(out)


class RecordBatchBuilder:
    """Accumulates records and builds one RecordBatch v2.

    ``compression`` accepts a CompressionType, its int id or its name. Producer fields default to
    "none" (−1) as a non-idempotent producer writes them; ``partition_leader_epoch`` to −1 as clients
    write it (the broker sets it)."""

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_buffer",
        "_compression",
        "_compression_level",
        "_count",
        "_is_control",
        "_is_transactional",
        "_last_offset_delta",
        "_log_append_time",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
    )

    def __init__(
        self,
        *,
        compression: CompressionType | int | str = CompressionType.NONE,
        base_offset: int = 0,
        log_append_time: bool = False,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        compression_level: int | None = None,
    ) -> None:
        if isinstance(compression, str):
            compression = CompressionType.from_name(compression)
        self._compression = CompressionType(compression)
        if is_transactional and producer_id == NO_PRODUCER_ID:
            raise ValueError("a transactional batch needs a producer id")
        if producer_id != NO_PRODUCER_ID and producer_epoch == NO_PRODUCER_EPOCH:
            raise ValueError("a batch with a producer id needs a producer epoch")
        self._base_offset = base_offset
        self._log_append_time = log_append_time
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control = is_control
        self._partition_leader_epoch = partition_leader_epoch
        self._compression_level = compression_level
        self._buffer = bytearray(HEADER_SIZE)  # header placeholder, then the records
        self._count = 0
        self._last_offset_delta = -1
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def last_offset_delta(self) -> int:
        """The largest offset delta appended so far (−1 before the first record)."""
        return self._last_offset_delta

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[HeaderInput] = (),
        offset_delta: int | None = None,
    ) -> None:
        """Append one record. ``offset_delta`` defaults to the previous delta + 1 (the number of
        records so far when no explicit deltas were given); explicit deltas must increase and may
        leave gaps. The builder is unchanged if this raises (e.g. TypeError for a str value)."""
        last = self._last_offset_delta
        if offset_delta is None:
            offset_delta = last + 1
        elif not last < offset_delta <= INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} must be above {last} and at most {INT32_MAX}")
        varints = _VARINTS
        if self._count:
            timestamp_delta = timestamp - self._base_timestamp
            if 0 <= timestamp_delta < _CACHE_SIZE:
                timestamp_part = varints[timestamp_delta]
            else:
                timestamp_part = encode_varlong(timestamp_delta)
        elif type(timestamp) is int:
            timestamp_part = _ZERO
        else:
            raise TypeError(f"timestamp must be an int (ms since the epoch), got {timestamp!r}")
        offset_part = varints[offset_delta] if offset_delta < _CACHE_SIZE else encode_varint(offset_delta)
        if key is None:
            key_part = _NULL
            key = _EMPTY
            size = 1
        else:
            size = len(key)
            key_part = varints[size] if size < _CACHE_SIZE else encode_varint(size)
            size += len(key_part)
        if value is None:
            value_part = _NULL
            value = _EMPTY
            size += 1
        else:
            value_size = len(value)
            value_part = varints[value_size] if value_size < _CACHE_SIZE else encode_varint(value_size)
            size += value_size + len(value_part)
        headers_part = _encode_headers(headers) if headers else _ZERO
        size += 1 + len(timestamp_part) + len(offset_part) + len(headers_part)
        self._buffer += _EMPTY.join(
            (
                varints[size] if size < _CACHE_SIZE else encode_varint(size),
                _ZERO,
                timestamp_part,
                offset_part,
                key_part,
                key,
                value_part,
                value,
                headers_part,
            )
        )
        if self._count:
            if timestamp > self._max_timestamp:
                self._max_timestamp = timestamp
        else:
            self._base_timestamp = self._max_timestamp = timestamp
        self._count += 1
        self._last_offset_delta = offset_delta

    def estimated_size_in_bytes(self) -> int:
        """Size of the batch if built now without compression: an upper bound in practice for a
        compressed batch (the codecs' framing overhead aside)."""
        return len(self._buffer)

    def build(self, *, last_offset_delta: int | None = None) -> bytes:
        """Return the complete batch: header, (compressed) records, CRC-32C.

        ``last_offset_delta`` overrides the header field (it may not be below the largest delta
        appended), so compaction can keep a batch's original last offset after dropping records.
        A batch without records is written uncompressed with timestamps −1. The builder stays
        usable: more records may be appended and build() called again."""
        count = self._count
        largest = max(self._last_offset_delta, 0)
        if last_offset_delta is None:
            last_offset_delta = largest
        elif not largest <= last_offset_delta <= INT32_MAX:
            raise ValueError(f"last_offset_delta {last_offset_delta} is below the largest delta {largest}")
        codec = self._compression if count else CompressionType.NONE
        attributes = int(codec)
        if self._log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self._is_control:
            attributes |= CONTROL_FLAG_MASK
        buffer = self._buffer
        if codec == CompressionType.NONE:
            out = buffer
        else:
            with memoryview(buffer) as view, view[HEADER_SIZE:] as records:
                payload = compress(codec, records, self._compression_level)
            out = bytearray(HEADER_SIZE)
            out += payload
        size = len(out)
        _BATCH_HEADER.pack_into(
            out,
            0,
            self._base_offset,
            size - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        write_crc(out, 0, size)
        return bytes(out)


def encode_batch(records: Iterable[RecordInput], **builder_kwargs: object) -> bytes:
    """Build one batch from ``(timestamp, key, value, headers)`` tuples; ``builder_kwargs`` go to
    :class:`RecordBatchBuilder`."""
    builder = RecordBatchBuilder(**builder_kwargs)  # type: ignore[arg-type]
    append = builder.append
    for timestamp, key, value, headers in records:
        append(timestamp, key, value, headers)
    return builder.build()
