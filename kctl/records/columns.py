"""Column-wise decoding of a records section — the consumer's fast path for the usual batch.

This module owns :func:`decode_columns`: it turns the records of a batch without record headers into
columns (offset deltas, timestamp deltas, keys, values) that a caller turns into its own record
objects at C speed (``map``/``zip``), in as little per-record Python as possible.

Runs. Producers write batches whose records mostly share one layout: the same width of every varint,
the same key and value lengths, no headers. Such a run of records has a fixed stride, so its fields
are columns of bytes at fixed distances: ``data[start:stop:stride]`` gives one byte of every record
at once, and one ``struct`` format (cached per layout and run length) slices every key and value in
a single call. :func:`decode_columns` decodes the first record of a run with scalar code, derives its
layout, bounds the run (the records left, the bytes left, and the offset delta whose varint grows a
byte at delta 64 and 8192), and validates the whole run on its columns before using it: every byte
of the length, key length and value length varints equal to the first record's, every header count
0, every one-byte timestamp delta below 0x80 (they may differ), and the offset deltas exactly the
consecutive ones the run expects (``range``). By induction every record of a validated run parses
as the first one did, field for field, so the run yields exactly what the record loop would.

Anything else — a run that does not validate, varying sizes, long varints — is read by the record
loop (:func:`_loop`) for the rest of the batch: it steps over each record's length field (the
fields are parsed in sequence, must end exactly at the section's end, and the batch's CRC covers
them) and returns None for record headers or deltas past 8191, where ``decode_section`` in
:mod:`kctl.records.reader` takes over. A malformed section raises ValueError or IndexError (then
``decode_section`` says what is wrong).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kctl.records.varint import decode_uvarint

__all__ = ["MIN_RUN", "ZIGZAG", "ColumnRun", "decode_columns"]

ZIGZAG: list[int] = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]
"""The zigzag decoding of every varint of one or two bytes (raw value -> signed value)."""

MIN_RUN = 16
"""Runs shorter than this are read by the record loop (validating a run costs a few microseconds)."""

# The varint bytes of the offset deltas 0..63 (one byte) and 64..8191 (two bytes: low, high).
_DELTA1 = bytes(range(0, 128, 2))
_DELTA2_LOW = bytes(((delta << 1) & 0x7F) | 0x80 for delta in range(64, 8192))
_DELTA2_HIGH = bytes((delta << 1) >> 7 for delta in range(64, 8192))

_STRUCTS: dict[tuple[int, int, int, int, int, int], struct.Struct] = {}
_MAX_STRUCTS = 256


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
    while index < count:
        layout = _layout(data, pos, limit)
        if layout is None:
            break
        size, bound = layout[0], layout[1]
        n = min(count - index, (limit - pos) // size, bound)
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
            break  # the run does not hold: the loop reads the rest of the batch
        runs.append(columns)
        pos += n * size
        index += n
    if index < count:
        segment = _loop(data, pos, count - index)
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
    """The ``n`` records from ``pos`` if every one has ``layout`` (that of the first), else None."""
    (size, _, length_width, ts_width, offset_width, first_delta,
     key_at, key_length, value_at, value_length, header_at) = layout  # fmt: skip
    stop = pos + n * size
    # every byte of the length and of the key and value lengths as the first record's
    key_length_at = length_width + 1 + ts_width + offset_width
    value_length_at = key_at + max(key_length, 0)
    for at in (*range(length_width), *range(key_length_at, key_at), *range(value_length_at, value_at)):
        if data[pos + at : stop : size].count(data[pos + at]) != n:
            return None
    if data[pos + header_at : stop : size].count(0) != n:
        return None
    # consecutive offset deltas
    at = pos + length_width + 1 + ts_width
    if offset_width == 1:
        if data[at:stop:size] != _DELTA1[first_delta : first_delta + n]:
            return None
    else:
        start = first_delta - 64
        if data[at:stop:size] != _DELTA2_LOW[start : start + n]:
            return None
        if data[at + 1 : stop : size] != _DELTA2_HIGH[start : start + n]:
            return None
    # timestamp deltas: one byte each, or all the same
    at = pos + length_width + 1
    column = data[at:stop:size]
    timestamp_deltas: Sequence[int] | int
    if column.count(column[0]) == n:
        if ts_width == 2:
            if data[at + 1 : stop : size].count(data[at + 1]) != n:
                return None
            timestamp_deltas = ZIGZAG[(column[0] & 0x7F) | data[at + 1] << 7]
        else:
            timestamp_deltas = ZIGZAG[column[0]]
    elif ts_width == 1 and column.isascii():
        timestamp_deltas = list(map(ZIGZAG.__getitem__, column))
    else:
        return None
    keys: Sequence[bytes | None] | None = None
    values: Sequence[bytes | None] | None = None
    if key_length >= 0 or value_length >= 0:
        fields = _struct(size, n, key_at, key_length, value_at, value_length).unpack_from(data, pos)
        if key_length >= 0 and value_length >= 0:
            keys, values = fields[0::2], fields[1::2]
        elif key_length >= 0:
            keys = fields
        else:
            values = fields
    return ColumnRun(range(first_delta, first_delta + n), timestamp_deltas, keys, values)


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
    zigzag = ZIGZAG.__getitem__
    run = ColumnRun(list(map(zigzag, offset_deltas)), list(map(zigzag, timestamp_deltas)), keys, values)
    return run, pos
