"""Readers and writers of the wire primitives, used by the generated struct codecs.

This module owns the byte-level encodings: big-endian fixed-width integers, unsigned varints, the
classic (int16/int32 length, -1 = null) and compact (unsigned varint length + 1, 0 = null) forms of
strings, bytes, records and arrays, and the tagged-field section of flexible structs.

Every reader takes ``(buf, pos, end)`` — ``buf`` a memoryview, ``end`` the limit it may read up to —
checks each length or count against ``end - pos`` *before* slicing or allocating, and returns
``(value, new_pos)``. Every problem raises ``ProtocolDecodeError`` naming the field and offset.
Writers append ``bytes`` (or, for records, the caller's buffer or file-region object) to a list.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError
from kctl.protocol.types import ZERO_UUID

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")

NULL_INT16 = b"\xff\xff"
NULL_INT32 = b"\xff\xff\xff\xff"
NULL_COMPACT = b"\x00"
EMPTY_TAGS = b"\x00"

_ZERO_UUID_BYTES = bytes(16)
_UV1 = tuple(bytes((i,)) for i in range(128))


# --------------------------------------------------------------------------------------------- errors


def truncated(what: str, need: int, pos: int, end: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(
        f"truncated input: {what} needs {need} bytes at offset {pos}, {max(end - pos, 0)} remain"
    )


def _too_long(name: str, kind: str, length: int, pos: int, end: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(
        f"{name}: {kind} length {length} exceeds the {end - pos} bytes remaining at offset {pos}"
    )


def _null(name: str, kind: str, pos: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"{name}: null {kind} at offset {pos} where the field is not nullable")


def _negative(name: str, kind: str, length: int, pos: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"{name}: invalid negative {kind} length {length} at offset {pos}")


def null_not_allowed(name: str) -> ProtocolEncodeError:
    return ProtocolEncodeError(f"{name}: None given for a non-nullable field")


# --------------------------------------------------------------------------------------------- varints


def read_uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes, 32-bit value)."""
    if pos >= end:
        raise truncated("unsigned varint", 1, pos, end)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    start = pos
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise truncated("unsigned varint", pos - start + 1, start, end)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise ProtocolDecodeError(f"unsigned varint longer than 5 bytes at offset {start}")
    if value > 0xFFFFFFFF:
        raise ProtocolDecodeError(f"unsigned varint {value} does not fit 32 bits at offset {start}")
    return value, pos


def uvarint(value: int) -> bytes:
    """Encode an unsigned 32-bit varint."""
    if value < 0x80:
        if value < 0:
            raise ProtocolEncodeError(f"negative value {value} for an unsigned varint")
        return _UV1[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value > 0xFFFFFFFF:
        raise ProtocolEncodeError(f"value {value} does not fit an unsigned 32-bit varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# --------------------------------------------------------------------------------------------- uuid


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    if raw == _ZERO_UUID_BYTES:
        return ZERO_UUID
    return uuid.UUID(bytes=raw)


def uuid_to_bytes(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 16:
        return bytes(value)
    if value is None:
        return _ZERO_UUID_BYTES
    raise ProtocolEncodeError(f"expected a uuid.UUID or 16 bytes, got {value!r}")


# --------------------------------------------------------------------------------------------- strings


def _decode_utf8(buf: memoryview, pos: int, n: int, name: str) -> str:
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolDecodeError(f"{name}: invalid UTF-8 in string at offset {pos}: {e.reason}") from None


def read_string(buf: memoryview, pos: int, end: int, name: str) -> tuple[str, int]:
    if end - pos < 2:
        raise truncated(f"{name} (string length)", 2, pos, end)
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            raise _null(name, "string", pos - 2)
        raise _negative(name, "string", n, pos - 2)
    if n > end - pos:
        raise _too_long(name, "string", n, pos, end)
    return _decode_utf8(buf, pos, n, name), pos + n


def read_nullable_string(buf: memoryview, pos: int, end: int, name: str) -> tuple[str | None, int]:
    if end - pos < 2:
        raise truncated(f"{name} (string length)", 2, pos, end)
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise _negative(name, "string", n, pos - 2)
    if n > end - pos:
        raise _too_long(name, "string", n, pos, end)
    return _decode_utf8(buf, pos, n, name), pos + n


def read_compact_string(buf: memoryview, pos: int, end: int, name: str) -> tuple[str, int]:
    start = pos
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        raise _null(name, "string", start)
    n -= 1
    if n > end - pos:
        raise _too_long(name, "string", n, pos, end)
    return _decode_utf8(buf, pos, n, name), pos + n


def read_compact_nullable_string(buf: memoryview, pos: int, end: int, name: str) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        raise _too_long(name, "string", n, pos, end)
    return _decode_utf8(buf, pos, n, name), pos + n


def write_string(out: list[Any], value: str, name: str) -> None:
    if value is None:
        raise null_not_allowed(name)
    b = value.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ProtocolEncodeError(f"{name}: string of {len(b)} bytes exceeds 32767")
    out.append(INT16.pack(len(b)) + b)


def write_nullable_string(out: list[Any], value: str | None, name: str) -> None:
    if value is None:
        out.append(NULL_INT16)
        return
    b = value.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ProtocolEncodeError(f"{name}: string of {len(b)} bytes exceeds 32767")
    out.append(INT16.pack(len(b)) + b)


def write_compact_string(out: list[Any], value: str, name: str) -> None:
    if value is None:
        raise null_not_allowed(name)
    b = value.encode("utf-8")
    n = len(b) + 1
    out.append((_UV1[n] if n < 0x80 else uvarint(n)) + b)


def write_compact_nullable_string(out: list[Any], value: str | None, name: str) -> None:
    if value is None:
        out.append(NULL_COMPACT)
        return
    b = value.encode("utf-8")
    n = len(b) + 1
    out.append((_UV1[n] if n < 0x80 else uvarint(n)) + b)


# --------------------------------------------------------------------------------------------- bytes


def read_bytes(buf: memoryview, pos: int, end: int, name: str) -> tuple[bytes, int]:
    if end - pos < 4:
        raise truncated(f"{name} (bytes length)", 4, pos, end)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            raise _null(name, "bytes", pos - 4)
        raise _negative(name, "bytes", n, pos - 4)
    if n > end - pos:
        raise _too_long(name, "bytes", n, pos, end)
    return bytes(buf[pos : pos + n]), pos + n


def read_nullable_bytes(buf: memoryview, pos: int, end: int, name: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise truncated(f"{name} (bytes length)", 4, pos, end)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise _negative(name, "bytes", n, pos - 4)
    if n > end - pos:
        raise _too_long(name, "bytes", n, pos, end)
    return bytes(buf[pos : pos + n]), pos + n


def read_compact_bytes(buf: memoryview, pos: int, end: int, name: str) -> tuple[bytes, int]:
    start = pos
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        raise _null(name, "bytes", start)
    n -= 1
    if n > end - pos:
        raise _too_long(name, "bytes", n, pos, end)
    return bytes(buf[pos : pos + n]), pos + n


def read_compact_nullable_bytes(buf: memoryview, pos: int, end: int, name: str) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        raise _too_long(name, "bytes", n, pos, end)
    return bytes(buf[pos : pos + n]), pos + n


def flat(view: memoryview) -> memoryview:
    """A byte-format, one-dimensional view, so that ``len()`` is its byte size."""
    if view.format == "B" and view.ndim == 1:
        return view
    return view.cast("B")


#: what the bytes writers accept
BytesLike = bytes | bytearray | memoryview


def _bytes_len(value: Any, name: str) -> int:
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value)
    if t is memoryview:
        return value.nbytes
    raise ProtocolEncodeError(f"{name}: expected bytes, bytearray or memoryview, got {t.__name__}")


def write_bytes(out: list[Any], value: BytesLike, name: str) -> None:
    if value is None:
        raise null_not_allowed(name)
    out.append(INT32.pack(_bytes_len(value, name)))
    out.append(flat(value) if type(value) is memoryview else value)


def write_nullable_bytes(out: list[Any], value: BytesLike | None, name: str) -> None:
    if value is None:
        out.append(NULL_INT32)
        return
    out.append(INT32.pack(_bytes_len(value, name)))
    out.append(flat(value) if type(value) is memoryview else value)


def write_compact_bytes(out: list[Any], value: BytesLike, name: str) -> None:
    if value is None:
        raise null_not_allowed(name)
    out.append(uvarint(_bytes_len(value, name) + 1))
    out.append(flat(value) if type(value) is memoryview else value)


def write_compact_nullable_bytes(out: list[Any], value: BytesLike | None, name: str) -> None:
    if value is None:
        out.append(NULL_COMPACT)
        return
    out.append(uvarint(_bytes_len(value, name) + 1))
    out.append(flat(value) if type(value) is memoryview else value)


# --------------------------------------------------------------------------------------------- records


def read_records(buf: memoryview, pos: int, end: int, nullable: bool, name: str) -> tuple[Any, int]:
    """Records as a zero-copy memoryview slice of ``buf`` (or None)."""
    if end - pos < 4:
        raise truncated(f"{name} (records length)", 4, pos, end)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        if n == -1:
            raise _null(name, "records", pos - 4)
        raise _negative(name, "records", n, pos - 4)
    if n > end - pos:
        raise _too_long(name, "records", n, pos, end)
    return buf[pos : pos + n], pos + n


def read_compact_records(buf: memoryview, pos: int, end: int, nullable: bool, name: str) -> tuple[Any, int]:
    start = pos
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        if nullable:
            return None, pos
        raise _null(name, "records", start)
    n -= 1
    if n > end - pos:
        raise _too_long(name, "records", n, pos, end)
    return buf[pos : pos + n], pos + n


def records_size(value: Any, name: str) -> int:
    """Byte size of a records value: bytes-like, or a region object with an int ``size``."""
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value)
    if t is memoryview:
        return value.nbytes
    size = getattr(value, "size", None)
    if type(size) is not int or size < 0:
        raise ProtocolEncodeError(
            f"{name}: records must be bytes, memoryview, None or an object with an int size; got {t.__name__}"
        )
    return size


def write_records(out: list[Any], value: Any, nullable: bool, name: str) -> None:
    if value is None:
        if not nullable:
            raise null_not_allowed(name)
        out.append(NULL_INT32)
        return
    n = records_size(value, name)
    out.append(INT32.pack(n))
    out.append(flat(value) if type(value) is memoryview else value)


def write_compact_records(out: list[Any], value: Any, nullable: bool, name: str) -> None:
    if value is None:
        if not nullable:
            raise null_not_allowed(name)
        out.append(NULL_COMPACT)
        return
    n = records_size(value, name) + 1
    out.append(_UV1[n] if n < 0x80 else uvarint(n))
    out.append(flat(value) if type(value) is memoryview else value)


# --------------------------------------------------------------------------------------------- arrays


def read_count(
    buf: memoryview, pos: int, end: int, min_size: int, nullable: bool, name: str
) -> tuple[int, int]:
    """Read a classic int32 array count; -1 (null) is returned as -1 when nullable.

    ``min_size`` is the smallest encoding of one element: the count must fit the bytes left."""
    if end - pos < 4:
        raise truncated(f"{name} (array length)", 4, pos, end)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            if nullable:
                return -1, pos
            raise _null(name, "array", pos - 4)
        raise _negative(name, "array", n, pos - 4)
    if n * min_size > end - pos:
        raise ProtocolDecodeError(
            f"{name}: array of {n} elements (at least {min_size} bytes each) exceeds the "
            f"{end - pos} bytes remaining at offset {pos}"
        )
    return n, pos


def read_compact_count(
    buf: memoryview, pos: int, end: int, min_size: int, nullable: bool, name: str
) -> tuple[int, int]:
    start = pos
    n, pos = read_uvarint(buf, pos, end)
    if n == 0:
        if nullable:
            return -1, pos
        raise _null(name, "array", start)
    n -= 1
    if n * min_size > end - pos:
        raise ProtocolDecodeError(
            f"{name}: array of {n} elements (at least {min_size} bytes each) exceeds the "
            f"{end - pos} bytes remaining at offset {pos}"
        )
    return n, pos


def read_fixed_array(buf: memoryview, pos: int, n: int, fmt: str, size: int) -> tuple[list[Any], int]:
    """``n`` fixed-width elements (count already checked against the bytes left)."""
    if n == 0:
        return [], pos
    return list(struct.unpack_from(f">{n}{fmt}", buf, pos)), pos + n * size


def write_count(out: list[Any], value: Any, nullable: bool, name: str) -> bool:
    """Write a classic array count; return False when the array is null (nothing more to write)."""
    if value is None:
        if not nullable:
            raise null_not_allowed(name)
        out.append(NULL_INT32)
        return False
    out.append(INT32.pack(len(value)))
    return True


def write_compact_count(out: list[Any], value: Any, nullable: bool, name: str) -> bool:
    if value is None:
        if not nullable:
            raise null_not_allowed(name)
        out.append(NULL_COMPACT)
        return False
    n = len(value) + 1
    out.append(_UV1[n] if n < 0x80 else uvarint(n))
    return True


def write_fixed_array(out: list[Any], value: Any, fmt: str) -> None:
    if value:
        out.append(struct.pack(f">{len(value)}{fmt}", *value))


# --------------------------------------------------------------------------------------------- tags


def skip_tagged_fields(buf: memoryview, pos: int, end: int) -> int:
    """Skip a tagged-field section whose tags are all unknown; return the position after it."""
    if pos < end and buf[pos] == 0:
        return pos + 1
    count, pos = read_uvarint(buf, pos, end)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise _too_long("tagged field", "value", size, pos, end)
        pos += size
    return pos


def read_tag_header(buf: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """Read one tag's (tag, value end, value start)."""
    tag, pos = read_uvarint(buf, pos, end)
    size, pos = read_uvarint(buf, pos, end)
    if size > end - pos:
        raise _too_long(f"tagged field {tag}", "value", size, pos, end)
    return tag, pos + size, pos


def check_tag_consumed(tag: int, pos: int, tend: int) -> None:
    if pos != tend:
        raise ProtocolDecodeError(f"tagged field {tag}: {tend - pos} unread bytes left in its value")


def write_tags(out: list[Any], tags: list[tuple[int, list[Any]]]) -> None:
    """Write a tagged-field section from ``(tag, chunks)`` pairs in ascending tag order."""
    out.append(uvarint(len(tags)))
    for tag, chunks in tags:
        data = b"".join(chunks)
        out.append(uvarint(tag) + uvarint(len(data)))
        out.append(data)
