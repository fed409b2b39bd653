"""Column-wise decoding of records whose sizes vary — the consumer's path for a batch that
``kctl.records.columns`` cannot cut into same-layout runs.

This module owns :func:`decode_varying`: the records of a batch section (null keys, no record
headers, the usual producer's batch of values of varying size) as one ``ColumnRun``, with no Python
per record. The fields before a record's value (length, attributes, timestamp delta, offset delta,
null key, value length) take the same number of bytes in every record of such a batch — one more
from offset delta 64 on — and a record ends with its header count, 0. So the section, after a pad
byte 0, is a sequence of separators (the header count 0 of the record before, then the fields before
a value) and values, and one ``re.split`` with a pattern built from the first record's layout (the
width of each varint, any attributes) cuts it at C speed into both.

A value may hold bytes that look like a separator, so the pieces are then checked, each check one
C-speed operation on a column of the separators (joined, each column of bytes a stride slice): as
many pieces as records, separators of exactly the layout's length (their total), the offset deltas exactly the
consecutive ones, every value length varint the canonical varint of its value's length, the last
record's header count 0. Then, record by record, the record loop would parse exactly these fields
and values, in sequence, to the section's end (the record length field is stepped over, as the loop
does), so the columns are what it would give. Anything else — headers, keys, null values, mixed
widths, values over ``MAX_VALUE`` bytes, deltas past 8191, a malformed section, a value that cut the
section wrongly — returns None and the caller's other paths decide.
"""

from __future__ import annotations

import re
from typing import Any

from kctl.records.columns import ZIGZAG, ColumnRun

__all__ = ["MAX_VALUE", "decode_varying", "sizes_vary"]

MAX_VALUE = 8191
"""The longest value this path takes (a value length varint of at most two bytes)."""

# the canonical varint of each value length: one byte (below 64; 0xFF, never valid, above) or two
# (low, high: from 64 to MAX_VALUE; 0x00 and 0xFF, never valid, below)
_ONE = bytes(v << 1 if v < 64 else 0xFF for v in range(MAX_VALUE + 1))
_LOW = bytes(((v << 1) & 0x7F) | 0x80 if v >= 64 else 0 for v in range(MAX_VALUE + 1))
_HIGH = bytes((v << 1) >> 7 if v >= 64 else 0xFF for v in range(MAX_VALUE + 1))
# the varint bytes of the offset deltas 0..63 (one byte) and 64..8191 (two bytes: low, high)
_DELTA1 = bytes(range(0, 128, 2))
_DELTA2_LOW = bytes(range(0x80, 0x100, 2)) * 127
_DELTA2_HIGH = b"".join(bytes((high,)) * 64 for high in range(1, 128))
_LOW_BITS = bytes.maketrans(bytes(range(256)), bytes(range(128)) * 2)
_SHIFTED = [byte << 7 for byte in range(128)]

_VARINT = (rb"[\x00-\x7f]", rb"[\x80-\xff][\x00-\x7f]")  # one byte, two bytes
_PATTERNS: dict[tuple[int, int, int], re.Pattern[bytes]] = {}


def _pattern(length_width: int, ts_width: int, value_width: int) -> re.Pattern[bytes]:
    """The separator of a layout: header count 0, length, attributes (any), timestamp delta, offset
    delta (one byte or two), null key, value length; as one group (``split`` keeps it)."""
    key = (length_width, ts_width, value_width)
    found = _PATTERNS.get(key)
    if found is None:
        found = _PATTERNS[key] = re.compile(
            rb"(\x00"
            + _VARINT[length_width - 1]
            + rb"."
            + _VARINT[ts_width - 1]
            + rb"(?:"
            + _VARINT[0]
            + rb"|"
            + _VARINT[1]
            + rb")\x01"
            + _VARINT[value_width - 1]
            + rb")",
            re.DOTALL,
        )
    return found


def decode_varying(data: bytes, pos: int, limit: int, count: int) -> tuple[ColumnRun, int] | None:
    """The ``count`` records of ``data[pos:limit]`` as one run of columns and ``limit``, or None when
    the batch is not one this path takes (see the module's docstring)."""
    if count < 2:
        return None
    section = b"\0" + data[pos:limit]
    try:
        layout = _layout(section)
    except IndexError:
        return None
    if layout is None:
        return None
    length_width, ts_width, value_width = layout
    parts = _pattern(length_width, ts_width, value_width).split(section)
    if len(parts) != 2 * count + 1 or parts[0] or parts[-1][-1:] != b"\0":
        return None
    separators = parts[1::2]
    values = parts[2::2]
    values[-1] = values[-1][:-1]
    size = 1 + length_width + 1 + ts_width + 1 + 1 + value_width  # with a one-byte offset delta
    first = separators[0][size - value_width - 2]
    if first >= 0x80:
        return None
    first >>= 1
    if first + count > 8192:
        return None
    one = min(count, 64 - first)
    lengths = list(map(len, values))
    ts_columns: list[bytes] = []
    ts_highs: list[bytes] = []
    begin = 0
    for offset_width in (1, 2) if one < count else (1,):
        end = one if offset_width == 1 else count
        n = end - begin
        stride = size + offset_width - 1
        joined = b"".join(separators[begin:end])
        if len(joined) != n * stride:  # (no separator is shorter than the first segment's or
            return None  # longer than the second's: the total says each is of the stride)
        at = 2 + length_width  # the timestamp delta
        ts_columns.append(joined[at::stride])
        if ts_width == 2:
            ts_highs.append(joined[at + 1 :: stride])
        at += ts_width
        if offset_width == 1:
            if joined[at::stride] != _DELTA1[first : first + n]:
                return None
        else:
            low = first + begin - 64
            if (
                joined[at::stride] != _DELTA2_LOW[low : low + n]
                or joined[at + 1 :: stride] != _DELTA2_HIGH[low : low + n]
            ):
                return None
        at += offset_width + 1  # past the null key
        mine = lengths[begin:end]
        try:
            if value_width == 1:
                if joined[at::stride] != bytes(map(_ONE.__getitem__, mine)):
                    return None
            elif joined[at::stride] != bytes(map(_LOW.__getitem__, mine)) or joined[
                at + 1 :: stride
            ] != bytes(map(_HIGH.__getitem__, mine)):
                return None
        except IndexError:  # a value over MAX_VALUE bytes
            return None
        begin = end
    ts_column = b"".join(ts_columns)
    timestamps: list[int] | int
    if ts_width == 2:
        raw: Any = map(
            int.__or__, ts_column.translate(_LOW_BITS), map(_SHIFTED.__getitem__, b"".join(ts_highs))
        )
        timestamps = list(map(ZIGZAG.__getitem__, raw))
    elif ts_column.count(ts_column[0]) == count:
        timestamps = ZIGZAG[ts_column[0]]
    else:
        timestamps = list(map(ZIGZAG.__getitem__, ts_column))
    return ColumnRun(range(first, first + count), timestamps, None, values), limit


def sizes_vary(data: bytes, pos: int, limit: int) -> bool:
    """Whether the first two records from ``pos`` differ in length (their length fields: one or two
    bytes): a batch for ``decode_varying`` rather than for same-layout runs."""
    if pos + 2 > limit:
        return False
    b = data[pos]
    if b < 0x80:
        second = pos + 1 + (b >> 1)
        return second < limit and data[second] != b
    c = data[pos + 1]
    second = pos + 2 + (((b & 0x7F) | c << 7) >> 1)
    return second + 1 < limit and (data[second] != b or data[second + 1] != c)


def _layout(section: bytes) -> tuple[int, int, int] | None:
    """The widths of the length, timestamp delta and value length varints of the first record (at 1),
    or None when it does not start such a batch (a null key is required). Raises IndexError."""
    if section[1] < 0x80:
        length_width = 1
    elif section[2] < 0x80:
        length_width = 2
    else:
        return None
    at = 1 + length_width + 1
    if section[at] < 0x80:
        ts_width = 1
    elif section[at + 1] < 0x80:
        ts_width = 2
    else:
        return None
    at += ts_width
    if section[at] >= 0x80 or section[at + 1] != 1:  # a first offset delta of one byte, a null key
        return None
    at += 2
    if section[at] < 0x80:
        value_width = 1
    elif section[at + 1] < 0x80:
        value_width = 2
    else:
        return None
    return length_width, ts_width, value_width
