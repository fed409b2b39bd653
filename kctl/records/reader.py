"""Decoding RecordBatch v2 into records — the consumer's hot path.

This module owns the record-level decoder: :func:`decode_batch` validates one batch (header, length,
CRC-32C), decompresses its records section (bounded by ``max_decompressed_size``) and decodes every
record with absolute offsets (base_offset + offset_delta) and timestamps (base_timestamp +
timestamp_delta, or the batch's max_timestamp for LogAppendTime batches, as Kafka defines).
:func:`iter_batches` walks consecutive batches, ignoring a trailing partial batch as fetch responses
may end with one.

Every malformed input — lengths past the end, a records_count that does not match the records, bad
varints, negative lengths other than −1, header keys that are not UTF-8, bytes left over — raises
:class:`~kctl.records.header.InvalidRecordBatch`. Lengths are checked against the record before
anything is sliced, so a length field never makes the decoder allocate more than the batch holds.
The loop decodes one-byte varints inline and calls the general decoder only for longer ones.

For consumers, the pieces are exposed: :func:`records_section` (decompress) and
:func:`decode_section` (the strict loop, building each record with a caller's factory); the fast
path for batches without record headers, columns to build records from in bulk, is
:func:`kctl.records.columns.decode_columns`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kctl.records.compression import CompressionType, DecompressionError, decompress
from kctl.records.header import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidRecordBatch,
    parse_header,
    read_prefix,
    validate_batch,
)
from kctl.records.record import DecodedBatch, Header, Record
from kctl.records.varint import VarintError, decode_uvarint, decode_uvarlong, decode_varint

__all__ = [
    "decode_batch",
    "decode_records",
    "decode_section",
    "iter_batches",
    "records_section",
]

RecordFactory = Callable[[int, int, "bytes | None", "bytes | None", "list[Header]"], Any]
"""Builds one decoded record from (offset, timestamp, key, value, headers); ``Record`` by default."""

Buffer = bytes | bytearray | memoryview

# length, attributes, timestamp_delta, offset_delta, key length, value length, header count
MIN_RECORD_SIZE = 7
_CODECS = frozenset(int(codec) for codec in CompressionType)


def decode_batch(
    buf: Buffer,
    position: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int | None = None,
) -> DecodedBatch:
    """Decode the batch at ``position`` of ``buf`` with all its records.

    With ``verify_crc`` (the default) the CRC-32C is checked first. ``max_decompressed_size`` bounds
    the size of the decompressed records section (None: unbounded). Raises InvalidRecordBatch."""
    if verify_crc:
        header = validate_batch(buf, position)
    else:
        header = parse_header(buf, position)
        if position + header.size > len(buf):
            raise InvalidRecordBatch(
                f"batch of {header.size} bytes at position {position} runs past the end "
                f"({len(buf) - position} bytes available)",
                position,
            )
    return DecodedBatch(header, decode_records(buf, position, header, max_decompressed_size))


def iter_batches(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int | None = None,
) -> Iterator[DecodedBatch]:
    """Decode consecutive batches of ``buf``.

    A trailing partial batch (its length prefix or declared size runs past the end of ``buf``) is
    ignored; a complete batch that is corrupt raises InvalidRecordBatch."""
    end = len(buf)
    position = 0
    while end - position >= LOG_OVERHEAD:
        _, batch_length = read_prefix(buf, position)
        if position + LOG_OVERHEAD + batch_length > end:
            return  # partial batch at the end of a fetch response
        batch = decode_batch(
            buf, position, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
        )
        yield batch
        position += batch.header.size


def decode_records(
    buf: Buffer,
    position: int,
    header: BatchHeader,
    max_decompressed_size: int | None = None,
    make: RecordFactory = Record,
) -> list[Any]:
    """Decode the records of the batch at ``position`` whose (already validated) header is
    ``header``, each built by ``make(offset, timestamp, key, value, headers)`` (a ``Record`` by
    default). Raises InvalidRecordBatch for malformed records."""
    data, start, end = records_section(buf, position, header, max_decompressed_size)
    return decode_section(data, start, end, header, position, make)


def records_section(
    buf: Buffer, position: int, header: BatchHeader, max_decompressed_size: int | None = None
) -> tuple[bytes, int, int]:
    """The records section of the batch at ``position``: ``(data, start, end)`` — ``buf`` itself
    when it is uncompressed ``bytes``, else a copy or the decompressed bytes. Raises
    InvalidRecordBatch for an unknown codec or records that do not decompress (within
    ``max_decompressed_size``)."""
    start = position + HEADER_SIZE
    end = position + header.size
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec == CompressionType.NONE:
        if type(buf) is bytes:
            return buf, start, end
        data = bytes(memoryview(buf)[start:end])
        return data, 0, len(data)
    if codec not in _CODECS:
        raise InvalidRecordBatch(f"unknown compression codec {codec}", position)
    if header.records_count == 0 and start == end:
        return b"", 0, 0
    try:
        data = decompress(codec, memoryview(buf)[start:end], max_decompressed_size)
    except DecompressionError as exc:
        label = CompressionType(codec).label
        raise InvalidRecordBatch(f"cannot decompress {label} records: {exc}", position) from exc
    return data, 0, len(data)


def decode_section(
    data: bytes,
    pos: int,
    limit: int,
    header: BatchHeader,
    position: int,
    make: RecordFactory = Record,
) -> list[Any]:
    """Decode the ``header.records_count`` records of ``data[pos:limit]`` (a records section from
    ``records_section``), strictly: every length is checked, and the records must fill the section
    exactly. ``position`` (the batch's) is reported in errors. Raises InvalidRecordBatch."""
    count = header.records_count
    if count < 0:
        raise InvalidRecordBatch(f"negative records_count {count}", position)
    if count > (limit - pos) // MIN_RECORD_SIZE:
        raise InvalidRecordBatch(
            f"records_count {count} cannot fit in a records section of {limit - pos} bytes", position
        )

    records: list[Any] = []
    append = records.append
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.attributes & TIMESTAMP_TYPE_MASK
    max_timestamp = header.max_timestamp
    uvarint = decode_uvarint
    uvarlong = decode_uvarlong
    varint = decode_varint
    index = 0
    # Each varint below is read inline when it is 1 or 2 bytes long (lengths below 8 KiB, deltas
    # below 8192), else by the general decoder; ``b`` holds the raw (still zigzagged) value.
    try:
        for index in range(count):  # index is reported in errors
            # length
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            record_end = pos + ((b >> 1) ^ -(b & 1))
            if record_end > limit or record_end - pos < MIN_RECORD_SIZE - 1:
                raise _malformed(
                    f"length {record_end - pos} (records section has {limit - pos} bytes left)", index
                )
            # attributes (unused) and timestamp delta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 3
            else:
                b, pos = uvarlong(data, pos + 1)
            timestamp = max_timestamp if log_append_time else base_timestamp + ((b >> 1) ^ -(b & 1))
            # offset delta
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            offset = base_offset + ((b >> 1) ^ -(b & 1))
            # key
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            if not b & 1:
                b >>= 1
                if pos + b > record_end:
                    raise _malformed(f"key length {b} runs past the record's end", index)
                key: bytes | None = data[pos : pos + b]
                pos += b
            elif b == 1:
                key = None
            else:
                raise _malformed(f"negative key length {(b >> 1) ^ -1}", index)
            # value
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            if not b & 1:
                b >>= 1
                if pos + b > record_end:
                    raise _malformed(f"value length {b} runs past the record's end", index)
                value: bytes | None = data[pos : pos + b]
                pos += b
            elif b == 1:
                value = None
            else:
                raise _malformed(f"negative value length {(b >> 1) ^ -1}", index)
            # headers
            headers: list[Header] = []
            if data[pos] == 0:
                pos += 1
            else:
                header_count, pos = varint(data, pos)
                if not 0 <= header_count <= (record_end - pos) // 2:
                    raise _malformed(f"header count {header_count} does not fit the record", index)
                for _ in range(header_count):
                    size, pos = varint(data, pos)
                    if size < 0 or pos + size > record_end:
                        raise _malformed(f"header key length {size} does not fit the record", index)
                    header_key = data[pos : pos + size].decode()
                    pos += size
                    size, pos = varint(data, pos)
                    if size >= 0:
                        if pos + size > record_end:
                            raise _malformed(f"header value length {size} runs past the record's end", index)
                        header_value: bytes | None = data[pos : pos + size]
                        pos += size
                    elif size == -1:
                        header_value = None
                    else:
                        raise _malformed(f"negative header value length {size}", index)
                    headers.append((header_key, header_value))
            if pos != record_end:
                raise _malformed(f"fields end at {pos - record_end:+d} bytes from the record's length", index)
            append(make(offset, timestamp, key, value, headers))
    except _MalformedRecord as exc:
        raise InvalidRecordBatch(str(exc), position) from None
    except IndexError:
        raise InvalidRecordBatch(
            f"record {index} runs past the end of the records section", position
        ) from None
    except VarintError as exc:
        raise InvalidRecordBatch(f"record {index}: {exc}", position) from None
    except UnicodeDecodeError as exc:
        raise InvalidRecordBatch(f"record {index}: header key is not UTF-8: {exc}", position) from None
    if pos != limit:
        raise InvalidRecordBatch(f"{limit - pos} bytes left over after the batch's {count} records", position)
    return records


class _MalformedRecord(ValueError):
    pass


def _malformed(message: str, index: int) -> _MalformedRecord:
    return _MalformedRecord(f"record {index}: {message}")
