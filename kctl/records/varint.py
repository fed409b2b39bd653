"""Variable-length integers as Kafka encodes them.

This module owns the four integer encodings of the Kafka record format and protocol:

* **varint** — a signed 32-bit integer, zigzag-encoded, then written 7 bits per byte, least
  significant group first, high bit set on every byte but the last (at most 5 bytes). Record lengths,
  offset deltas, key/value/header lengths and header counts in RecordBatch v2 use it.
* **varlong** — the same for signed 64-bit integers (at most 10 bytes); record timestamp deltas.
* **uvarint** — an unsigned 32-bit integer without zigzag (at most 5 bytes); the protocol layer's
  flexible versions use it for compact string/array lengths and tagged fields.
* **uvarlong** — the unsigned 64-bit form (at most 10 bytes), for completeness.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise :class:`VarintError` (a
``ValueError``) on truncated input, on a value longer than its type allows, or on a value whose
payload bits do not fit the type — they never read more than 5 (or 10) bytes.
"""

from __future__ import annotations

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "VarintError",
    "decode_uvarint",
    "decode_uvarlong",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_uvarlong",
    "encode_varint",
    "encode_varlong",
    "uvarint_size",
    "varint_size",
    "varlong_size",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1

Buffer = bytes | bytearray | memoryview


class VarintError(ValueError):
    """A varint/varlong that is truncated, too long, or out of range for its type."""


def _encode_unsigned(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_unsigned(buf: Buffer, pos: int, max_bytes: int, bits: int, kind: str) -> tuple[int, int]:
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        limit = 7 * max_bytes
        start = pos
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= limit:
                raise VarintError(f"{kind} at position {start} is longer than {max_bytes} bytes")
    except IndexError:
        raise VarintError(f"truncated {kind} at position {pos}") from None
    if result >> bits:
        raise VarintError(f"{kind} at position {start} does not fit in {bits} bits")
    return result, pos


def encode_uvarint(value: int) -> bytes:
    """Encode an unsigned 32-bit integer (0 ≤ value < 2**32)."""
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"uvarint out of range: {value}")
    return _encode_unsigned(value)


def decode_uvarint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at ``pos``; return ``(value, new_pos)``."""
    return _decode_unsigned(buf, pos, 5, 32, "uvarint")


def encode_uvarlong(value: int) -> bytes:
    """Encode an unsigned 64-bit integer (0 ≤ value < 2**64)."""
    if not 0 <= value <= _UINT64_MAX:
        raise ValueError(f"uvarlong out of range: {value}")
    return _encode_unsigned(value)


def decode_uvarlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 64-bit varlong at ``pos``; return ``(value, new_pos)``."""
    return _decode_unsigned(buf, pos, 10, 64, "uvarlong")


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer with zigzag encoding."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 31))


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag signed 32-bit varint at ``pos``; return ``(value, new_pos)``."""
    raw, pos = _decode_unsigned(buf, pos, 5, 32, "varint")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer with zigzag encoding."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag signed 64-bit varlong at ``pos``; return ``(value, new_pos)``."""
    raw, pos = _decode_unsigned(buf, pos, 10, 64, "varlong")
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_size(value: int) -> int:
    """Bytes :func:`encode_uvarint` (or ``encode_uvarlong``) writes for a non-negative ``value``."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    return max(1, (value.bit_length() + 6) // 7)


def varint_size(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of range: {value}")
    return uvarint_size((value << 1) ^ (value >> 31))


def varlong_size(value: int) -> int:
    """Bytes :func:`encode_varlong` writes for ``value``."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of range: {value}")
    return uvarint_size((value << 1) ^ (value >> 63))

