"""Column-wise decoding of a records section — the consumer's fast path for the usual batch.

This module owns :func:`decode_columns`: it turns the records of a batch without record headers into
columns (offset deltas, timestamp deltas, keys, values) that a caller turns into its own record
objects at C speed (``map``/``zip``), in as little per-record Python as possible.

Runs. Producers write batches whose records mostly share one layout: the same width of every varint,
the same key and value lengths, no headers. Such a run of records has a fixed stride, so its fields
are columns of bytes at fixed distances: ``data[start:stop:stride]`` gives one byte of every record
at once, and one ``struct`` format (cached per layout and run length) slices every key and value in
a single call. :func:`decode_columns` decodes the first record of a run with scalar code, derives its
layout, bounds the run (the records left, the bytes left, a window of ``WINDOW`` records doubled
after each run that filled it, up to ``MAX_WINDOW``, and the offset delta whose varint grows a byte
at delta 64 and 8192), and validates it on its columns before using any of it: every byte of the
length, key length and value length varints equal to the first record's, every header count 0,
every timestamp delta as wide as the first one's (one byte: below 0x80; they may differ), and the
offset deltas exactly the consecutive ones (``range``). The run is the longest prefix for which all
of this holds (found at C speed: ``lstrip``, ``translate``/``find``, bisected comparisons); by
induction every record of it parses as the first one did, field for field, so it yields exactly
what the record loop would. The next run starts at the first record that broke it.

Fewer than ``MIN_RUN`` records before a bound (say delta 64) are read by the record loop
(:func:`_loop`, validating costs a few microseconds) and runs resume after them; a run that holds
for fewer than ``MIN_RUN`` records hands the rest of the batch on, as does a record that cannot
start one (varints over two bytes, headers, a malformed record): to
:func:`kctl.records.varying.decode_varying` (records whose sizes vary, decoded as columns after one
walk over their length fields) and, when it does not take them, to the record loop. The loop steps
over each record's length field (the fields are parsed in sequence, must end exactly at the
section's end, and the batch's CRC covers them) and returns None for record headers or deltas past
8191, where ``decode_section`` in :mod:`kctl.records.reader` takes over. A malformed section raises ValueError
or IndexError (then ``decode_section`` says what is wrong).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kctl.records.varint import decode_uvarint

__all__ = ["MAX_WINDOW", "MIN_RUN", "WINDOW", "ZIGZAG", "ColumnRun", "decode_columns"]

ZIGZAG: list[int] = [0] * (1 << 14)
"""The zigzag decoding of every varint of one or two bytes (raw value -> signed value)."""
ZIGZAG[0::2] = range(1 << 13)  # even raw values: 0, 1, 2, ...
ZIGZAG[1::2] = range(-1, -(1 << 13) - 1, -1)  # odd ones: -1, -2, ...

MIN_RUN = 32
"""Runs shorter than this are read by the record loop (validating a run costs a few microseconds)."""
WINDOW = 512
"""The records a run is first validated over; doubled after each run that held to its end (up to
``MAX_WINDOW``), so that a batch of short runs costs a bounded number of column bytes per record."""
MAX_WINDOW = 2048
"""The most records in one run (which bounds the size of a cached ``struct`` format)."""

# The varint bytes of the offset deltas 0..63 (one byte) and 64..8191 (two bytes: low, high).
_DELTA1 = bytes(range(0, 128, 2))
_DELTA2_LOW = bytes(range(0x80, 0x100, 2)) * 127  # ((delta << 1) & 0x7F) | 0x80
_DELTA2_HIGH = b"".join(bytes((high,)) * 64 for high in range(1, 128))  # (delta << 1) >> 7

_STRUCTS: dict[tuple[int, int, int, int, int, int], struct.Struct] = {}
_MAX_STRUCTS = 32  # of at most 2 * MAX_WINDOW format codes each


class ColumnRun(NamedTuple):
    """Consecutive records of a batch as columns, all of one length.

    ``offset_deltas``: a ``range`` when consecutive (the usual case), else a list; ``timestamp_deltas``:
    an int when every record of the run has that delta, else a sequence; ``keys``/``values``: None
    when every one is null. Deltas are decoded (signed), relative to the batch's base offset and base
    timestamp."""

    offset_deltas: Sequence[int]
    timestamp_deltas: Sequence[int] | int
    keys: Sequence[bytes | None] | None
    values: Sequence[bytes | None] | None


def decode_columns(data: bytes, pos: int, limit: int, count: int) -> list[ColumnRun] | None:
    """Decode the ``count`` records of ``data[pos:limit]`` into runs of columns, in order.

    Returns None for a batch it does not handle (record headers, deltas past 8191: ``decode_section``
    does); raises ValueError or IndexError for a malformed one."""
    runs: list[ColumnRun] = []
    index = 0
    window = WINDOW
    while index < count:
        layout = _layout(data, pos, limit)
        if layout is None:
            break
        size, bound = layout[0], layout[1]
        n = min(count - index, (limit - pos) // size, bound, window)
        if n < MIN_RUN:
            if n == count - index:
                break  # the end of the batch: the loop reads it
            segment = _loop(data, pos, max(n, 1))  # up to where a run may start again
            if segment is None:
                return None
            run, pos = segment
            runs.append(run)
            index += len(run.offset_deltas)
            continue
        columns = _run(data, pos, n, layout)
        if columns is None:
            break  # fewer than MIN_RUN records hold: the loop reads the rest of the batch
        runs.append(columns)
        m = len(columns.offset_deltas)
        pos += m * size
        index += m
        window = min(window * 2, MAX_WINDOW) if m == n else WINDOW
    if index < count:
        from kctl.records.varying import decode_varying  # (it builds on this module's columns)

        segment = decode_varying(data, pos, limit, count - index) or _loop(data, pos, count - index)
        if segment is None:
            return None
        run, pos = segment
        runs.append(run)
    if pos != limit:
        raise ValueError("the records do not end at the section's end")
    return runs


# (size, run bound, length width, timestamp delta width, offset delta width, first offset delta,
#  key position, key length (-1: null), value position, value length (-1: null), header position)
_Layout = tuple[int, int, int, int, int, int, int, int, int, int, int]


def _layout(data: bytes, pos: int, limit: int) -> _Layout | None:
    """The layout of the record at ``pos`` (positions relative to it), or None when it cannot start
    a run: malformed, a length or delta over two bytes, a negative offset delta, headers."""
    try:
        b = data[pos]
        if b < 0x80:
            length_width = 1
        elif (c := data[pos + 1]) < 0x80:
            b = (b & 0x7F) | c << 7
            length_width = 2
        else:
            return None
        if b & 1:
            return None
        size = length_width + (b >> 1)
        if pos + size > limit:
            return None
        at = length_width + 1  # past the attributes
        if data[pos + at] < 0x80:
            ts_width = 1
        elif data[pos + at + 1] < 0x80:
            ts_width = 2
        else:
            return None
        at += ts_width
        b = data[pos + at]
        if b < 0x80:
            offset_width, bound = 1, 64
        elif (c := data[pos + at + 1]) < 0x80:
            b = (b & 0x7F) | c << 7
            offset_width, bound = 2, 8192
        else:
            return None
        if b & 1 or (offset_width == 2 and b < 0x80):
            return None  # a negative delta, or one of two bytes that fits one
        first_delta = b >> 1
        at += offset_width
        key_at, key_length, at = _field(data, pos, at)
        value_at, value_length, at = _field(data, pos, at)
        if data[pos + at] != 0 or at + 1 != size:
            return None
    except (IndexError, ValueError):
        return None
    return (
        size,
        bound - first_delta,
        length_width,
        ts_width,
        offset_width,
        first_delta,
        key_at,
        key_length,
        value_at,
        value_length,
        at,
    )


def _field(data: bytes, pos: int, at: int) -> tuple[int, int, int]:
    """A key or value at ``pos + at``: (where its bytes start, its length or -1 for null, where the
    next field starts), relative to ``pos``. Raises ValueError for a negative length but -1."""
    raw, end = decode_uvarint(data, pos + at)
    if raw == 1:
        return end - pos, -1, end - pos
    if raw & 1:
        raise ValueError("negative length")
    return end - pos, raw >> 1, end - pos + (raw >> 1)


def _run(data: bytes, pos: int, n: int, layout: _Layout) -> ColumnRun | None:
    """The longest run of the ``n`` records from ``pos`` that share ``layout`` (the first one's), or
    None when it is shorter than ``MIN_RUN``."""
    (size, _, length_width, ts_width, offset_width, first_delta,
     key_at, key_length, value_at, value_length, header_at) = layout  # fmt: skip
    stop = pos + n * size
    # every byte of the length and of the key and value lengths as the first record's; no headers
    key_length_at = length_width + 1 + ts_width + offset_width
    value_length_at = key_at + max(key_length, 0)
    m = n
    for at in (*range(length_width), *range(key_length_at, key_at), *range(value_length_at, value_at)):
        m = min(m, _same(data[pos + at : stop : size], data[pos + at]))
    m = min(m, _same(data[pos + header_at : stop : size], 0))
    # consecutive offset deltas
    at = pos + key_length_at - offset_width
    if offset_width == 1:
        m = min(m, _equal(data[at:stop:size], _DELTA1[first_delta : first_delta + n]))
    else:
        start = first_delta - 64
        m = min(m, _equal(data[at:stop:size], _DELTA2_LOW[start : start + n]))
        m = min(m, _equal(data[at + 1 : stop : size], _DELTA2_HIGH[start : start + n]))
    # timestamp deltas: one byte each, or all the same
    at = pos + length_width + 1
    column = data[at:stop:size]
    high = b""
    if ts_width == 1:
        m = min(m, _ascii(column))
    else:  # a low byte with the continuation bit, a high byte without
        high = data[at + 1 : stop : size]
        m = min(m, _continued(column), _ascii(high))
    if m < MIN_RUN:
        return None
    if m < n:
        column, high = column[:m], high[:m]
    timestamp_deltas: Sequence[int] | int
    if column.count(column[0]) == m and (ts_width == 1 or high.count(high[0]) == m):
        timestamp_deltas = ZIGZAG[column[0] if ts_width == 1 else (column[0] & 0x7F) | high[0] << 7]
    elif ts_width == 1:
        timestamp_deltas = list(map(ZIGZAG.__getitem__, column))
    else:
        raw = map(int.__or__, column.translate(_LOW_BITS), map(_SHIFTED.__getitem__, high))
        timestamp_deltas = list(map(ZIGZAG.__getitem__, raw))
    keys: Sequence[bytes | None] | None = None
    values: Sequence[bytes | None] | None = None
    if key_length >= 0 or value_length >= 0:
        fields = _struct(size, m, key_at, key_length, value_at, value_length).unpack_from(data, pos)
        if key_length >= 0 and value_length >= 0:
            keys, values = fields[0::2], fields[1::2]
        elif key_length >= 0:
            keys = fields
        else:
            values = fields
    return ColumnRun(range(first_delta, first_delta + m), timestamp_deltas, keys, values)


_BYTES = [bytes((byte,)) for byte in range(256)]
_HIGH_BIT = bytes.maketrans(bytes(range(256)), bytes(128) + b"\x01" * 128)
_LOW_BITS = bytes.maketrans(bytes(range(256)), bytes(range(128)) * 2)
_SHIFTED = [byte << 7 for byte in range(128)]


def _same(column: bytes, byte: int) -> int:
    """How many bytes of ``column`` from the first are ``byte``."""
    return len(column) - len(column.lstrip(_BYTES[byte]))


def _ascii(column: bytes) -> int:
    """How many bytes of ``column`` from the first are below 0x80."""
    if column.isascii():
        return len(column)
    return column.translate(_HIGH_BIT).find(1)


def _continued(column: bytes) -> int:
    """How many bytes of ``column`` from the first are 0x80 or above."""
    at = column.translate(_HIGH_BIT).find(0)
    return len(column) if at < 0 else at


def _equal(column: bytes, expected: bytes) -> int:
    """How many bytes of ``column`` from the first are those of ``expected`` (as long)."""
    if column == expected:
        return len(column)
    low, high = 0, len(column)  # column[:low] == expected[:low], column[:high] != expected[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if column[:middle] == expected[:middle]:
            low = middle
        else:
            high = middle
    return low


def _struct(
    size: int, n: int, key_at: int, key_length: int, value_at: int, value_length: int
) -> struct.Struct:
    """A ``struct`` unpacking the non-null keys and values of ``n`` records of ``size`` bytes."""
    cache_key = (size, n, key_at, key_length, value_at, value_length)
    compiled = _STRUCTS.get(cache_key)
    if compiled is None:
        parts: list[str] = []
        at = 0
        for field_at, field_length in ((key_at, key_length), (value_at, value_length)):
            if field_length >= 0:
                if field_at > at:
                    parts.append(f"{field_at - at}x")
                parts.append(f"{field_length}s")
                at = field_at + field_length
        if size > at:
            parts.append(f"{size - at}x")
        if len(_STRUCTS) >= _MAX_STRUCTS:
            _STRUCTS.clear()
        compiled = _STRUCTS[cache_key] = struct.Struct("<" + "".join(parts) * n)
    return compiled


def _loop(data: bytes, pos: int, count: int) -> tuple[ColumnRun, int] | None:
    """Decode ``count`` records from ``pos`` one by one: (their columns, the position after them), or
    None for a record with headers or a delta past 8191. Each record's length field is stepped over,
    not compared with its fields (see the module's docstring)."""
    offset_deltas: list[int] = []
    timestamp_deltas: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    add_offset, add_delta = offset_deltas.append, timestamp_deltas.append
    add_key, add_value = keys.append, values.append
    uvarint = decode_uvarint
    for _ in range(count):
        # length: stepped over (see above)
        if data[pos] < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            pos += 2
        else:
            _, pos = uvarint(data, pos)
        # attributes (unused), timestamp delta
        b = data[pos + 1]
        if b < 0x80:
            pos += 2
        elif (c := data[pos + 2]) < 0x80:
            b = (b & 0x7F) | c << 7
            pos += 3
        else:
            return None
        add_delta(b)
        # offset delta
        b = data[pos]
        if b < 0x80:
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            b = (b & 0x7F) | c << 7
            pos += 2
        else:
            return None
        add_offset(b)
        # key
        b = data[pos]
        if b == 1:
            add_key(None)
            pos += 1
        else:
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            if b & 1:
                raise ValueError("negative key length")
            b = pos + (b >> 1)
            add_key(data[pos:b])
            pos = b
        # value
        b = data[pos]
        if b == 1:
            add_value(None)
            pos += 1
        else:
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | c << 7
                pos += 2
            else:
                b, pos = uvarint(data, pos)
            if b & 1:
                raise ValueError("negative value length")
            b = pos + (b >> 1)
            add_value(data[pos:b])
            pos = b
        # headers
        if data[pos]:
            return None
        pos += 1
    # consecutive offset deltas (the usual case) as a range, a timestamp delta they share as an int
    zigzag = ZIGZAG.__getitem__
    first = offset_deltas[0] if offset_deltas else 0
    offsets: Sequence[int]
    if not first & 1 and offset_deltas == list(range(first, first + 2 * count, 2)):
        offsets = range(first >> 1, (first >> 1) + count)
    else:
        offsets = list(map(zigzag, offset_deltas))
    timestamps: Sequence[int] | int
    if timestamp_deltas and timestamp_deltas.count(timestamp_deltas[0]) == count:
        timestamps = ZIGZAG[timestamp_deltas[0]]
    else:
        timestamps = list(map(zigzag, timestamp_deltas))
    return ColumnRun(offsets, timestamps, keys, values), pos
