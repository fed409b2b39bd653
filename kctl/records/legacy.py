"""The message formats before RecordBatch: magic 0 and magic 1 (Kafka 0.8 - 0.10, the seeds' format),
read-only, for the offline tools on logs that old brokers wrote.

A log entry is ``offset int64, message_size int32`` then the message: ``crc int32`` (CRC-32, not
CRC-32C, over everything after it), ``magic int8``, ``attributes int8`` (bits 0-2 the codec, bit 3
with magic 1 the timestamp type), with magic 1 ``timestamp int64``, then ``key`` and ``value`` as
int32-length-prefixed bytes (-1: null). A compressed message is a *wrapper*: its value is a
compressed message set of inner messages. With magic 0 the inner offsets are absolute; with magic 1
they are relative (0..n-1) and the wrapper carries the offset of the last inner message (KIP-31).
Nothing here writes these formats: kctl's broker only ever writes RecordBatch v2 (Produce v0-2's
message sets are converted to it by :mod:`kctl.records.upconvert`).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from kctl.records.compression import CompressionType, decompress

LOG_OVERHEAD = 12
"""offset int64 + message_size int32, before every message."""
_ENTRY = struct.Struct(">qi")
_V0_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
"""crc + magic + attributes (+ timestamp) + the two length prefixes."""
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
MAX_INNER_BYTES = 64 * 1024 * 1024
"""A wrapper's value never decompresses to more than this (a bomb is reported, not expanded)."""


class InvalidLegacyMessage(ValueError):
    """Bytes that cannot be framed as a magic 0/1 message."""


@dataclass(frozen=True)
class LegacyRecord:
    """One message as a record: its absolute offset, timestamp (-1 with magic 0), key and value."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class LegacyMessage:
    """One log entry of a magic 0/1 log: a plain message or a compressed wrapper."""

    offset: int
    size: int  # the whole entry, LOG_OVERHEAD included
    magic: int
    attributes: int
    timestamp: int
    crc_stored: int
    crc_computed: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & _TIMESTAMP_TYPE_BIT)

    @property
    def crc_ok(self) -> bool:
        return self.crc_stored == self.crc_computed


def _bytes(data: bytes | memoryview, position: int, end: int) -> tuple[bytes | None, int]:
    if position + 4 > end:
        raise InvalidLegacyMessage("a length prefix runs past the message")
    (length,) = _LENGTH.unpack_from(data, position)
    position += 4
    if length < 0:
        return None, position
    if position + length > end:
        raise InvalidLegacyMessage(f"{length} bytes run past the message")
    return bytes(data[position : position + length]), position + length


def parse_message(data: bytes | memoryview, position: int = 0) -> LegacyMessage:
    """The log entry at ``position`` of ``data``; InvalidLegacyMessage when it cannot be framed
    (a CRC mismatch is not an error here: see ``crc_ok``)."""
    available = len(data) - position
    if available < LOG_OVERHEAD:
        raise InvalidLegacyMessage(f"{available} bytes are too few for a message header")
    offset, message_size = _ENTRY.unpack_from(data, position)
    if message_size > available - LOG_OVERHEAD:
        raise InvalidLegacyMessage(
            f"message of {message_size} bytes is truncated: only {available - LOG_OVERHEAD} bytes remain"
        )
    start = position + LOG_OVERHEAD
    end = start + message_size
    if message_size < MIN_MESSAGE_SIZE[0]:
        raise InvalidLegacyMessage(f"message size {message_size} is below the smallest message")
    crc_stored, magic, attributes = _V0_HEAD.unpack_from(data, start)
    if magic not in (0, 1):
        raise InvalidLegacyMessage(f"magic {magic} is not a legacy message format")
    if message_size < MIN_MESSAGE_SIZE[magic]:
        raise InvalidLegacyMessage(f"message size {message_size} is below the smallest magic {magic} message")
    cursor = start + 6
    timestamp = -1
    if magic == 1:
        (timestamp,) = _TIMESTAMP.unpack_from(data, cursor)
        cursor += 8
    key, cursor = _bytes(data, cursor, end)
    value, cursor = _bytes(data, cursor, end)
    crc_computed = zlib.crc32(data[start + 4 : end]) & 0xFFFFFFFF
    size = LOG_OVERHEAD + message_size
    return LegacyMessage(offset, size, magic, attributes, timestamp, crc_stored, crc_computed, key, value)


def iter_messages(data: bytes | memoryview) -> list[LegacyMessage]:
    """Every entry of a message set, in order; InvalidLegacyMessage at the first that cannot be framed."""
    messages, position = [], 0
    while position < len(data):
        message = parse_message(data, position)
        messages.append(message)
        position += message.size
    return messages


def records_of(message: LegacyMessage, *, check_crc: bool = False) -> list[LegacyRecord]:
    """The records a log entry holds: itself, or a wrapper's inner messages with absolute offsets;
    ``check_crc``: InvalidLegacyMessage for an entry or inner message whose CRC-32 does not match."""
    if check_crc:
        _check_crc(message, "message")
    if message.codec == 0:
        return [LegacyRecord(message.offset, message.timestamp, message.key, message.value)]
    if message.value is None:
        raise InvalidLegacyMessage("a compressed wrapper message has no value")
    try:
        inner_bytes = decompress(CompressionType(message.codec), message.value, MAX_INNER_BYTES)
    except (ValueError, OSError) as error:
        raise InvalidLegacyMessage(f"the wrapper's value cannot be decompressed: {error}") from None
    inner = iter_messages(inner_bytes)
    if not inner:
        return []
    if check_crc:
        for inner_message in inner:
            _check_crc(inner_message, "inner message")
    # magic 1: relative inner offsets, the wrapper holds the last one's absolute offset (KIP-31)
    shift = message.offset - inner[-1].offset if message.magic == 1 else 0
    timestamp = message.timestamp if message.log_append_time else None
    return [
        LegacyRecord(m.offset + shift, m.timestamp if timestamp is None else timestamp, m.key, m.value)
        for m in inner
    ]


def _check_crc(message: LegacyMessage, what: str) -> None:
    if not message.crc_ok:
        raise InvalidLegacyMessage(
            f"{what} at offset {message.offset} fails its CRC "
            f"(stored {message.crc_stored:#010x}, computed {message.crc_computed:#010x})"
        )
