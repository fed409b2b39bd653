"""kctl.records.varying: the consumer's path for records of varying size against the record loop.

Seeded, in-process property tests: random batches of records whose sizes vary (values of 0 to past
8191 bytes, crossing the one/two-byte varint widths; null values, keys and headers now and then;
timestamp deltas of one and two bytes; offset deltas crossing 64 and 8192, gaps; values holding
bytes that look like the fields between records), each decoded by ``decode_varying`` and by the old
per-record decoder (``columns._loop``): where the new path takes a batch, its columns must be the
loop's, record for record; where the loop fails or defers, the new path must not take it. Mutated
sections (a byte changed, bytes cut) too; and through the consumer's ``decode_partition`` against
``decode_batch`` (compressed batches, LogAppendTime)."""

from __future__ import annotations

import random
from typing import Any

from kctl.client.consumer.fetcher import decode_partition
from kctl.records import columns
from kctl.records.builder import RecordBatchBuilder
from kctl.records.columns import ColumnRun
from kctl.records.header import parse_header
from kctl.records.reader import decode_batch, records_section
from kctl.records.varying import decode_varying, sizes_vary

T0 = 1_700_000_000_000
# bytes that look like the fields between two records (header count 0, a two-byte length,
# attributes, timestamp delta, offset delta, null key, a value length), to be found inside values
LOOKALIKE = b"\x00\xd0\x01\x00\x00\x02\x01\xc8\x01"


def random_value(rng: random.Random, sizes: range, odd: float) -> bytes | None:
    """A value of one of ``sizes`` bytes; with probability ``odd`` something that breaks the batch's
    layout instead (null, or a size of another varint width)."""
    if rng.random() < odd:
        return rng.choice([None, b"", b"x" * 63, b"x" * 64, b"x" * 8191, b"x" * 8192])
    size = rng.choice(sizes)
    if rng.random() < 0.2 and size >= len(LOOKALIKE):
        value = bytearray(rng.randbytes(size))
        at = rng.randrange(size - len(LOOKALIKE) + 1)
        value[at : at + len(LOOKALIKE)] = LOOKALIKE
        return bytes(value)
    return rng.randbytes(size) if rng.random() < 0.3 else (b"0123456789abcdef" * (size // 16 + 1))[:size]


def random_batch(rng: random.Random, *, compression: str = "none", log_append_time: bool = False) -> bytes:
    """Records of varying size: most batches of one layout (value sizes within one varint width,
    null keys, no headers), some with a null value, a key, a header, a gap or another width."""
    builder = RecordBatchBuilder(compression=compression, log_append_time=log_append_time)
    ts = T0 + rng.randrange(1000)
    ts_step = rng.choice([0, 0, 1, 100])  # timestamp deltas of one byte or two
    delta = rng.choice([0, 0, 0, 5, 63, 64, 100])
    sizes = rng.choice([range(90, 111), range(90, 111), range(0, 50), range(64, 8192), range(10, 20)])
    odd = rng.choice([0.0, 0.0, 0.0, 0.001, 0.01])
    count = rng.choice([2, 3, 50, 64, 65, 200, 1000])
    if sizes.stop > 1000:
        count = min(count, 50)
    for _ in range(count):
        key = b"k" if rng.random() < odd else None
        headers = [("h", b"v")] if rng.random() < odd else []
        builder.append(
            ts + rng.randrange(ts_step + 1), key, random_value(rng, sizes, odd), headers, offset_delta=delta
        )
        delta += 2 if rng.random() < odd else 1
    return builder.build()


def section_of(batch: bytes) -> tuple[bytes, int, int, int]:
    header = parse_header(batch)
    data, pos, limit = records_section(batch, 0, header, None)
    return data, pos, limit, header.records_count


def expand(run: ColumnRun, count: int) -> tuple[list[int], list[int], list[Any], list[Any]]:
    ts = run.timestamp_deltas
    return (
        list(run.offset_deltas),
        [ts] * count if isinstance(ts, int) else list(ts),
        [None] * count if run.keys is None else list(run.keys),
        [None] * count if run.values is None else list(run.values),
    )


def loop_view(data: bytes, pos: int, limit: int, count: int) -> Any:
    """The old per-record decoder's answer: its columns, or None when it fails or defers."""
    try:
        segment = columns._loop(data, pos, count)
    except (IndexError, ValueError):
        return None
    if segment is None or segment[1] != limit:
        return None
    return expand(segment[0], count)


def test_decode_varying_equals_the_record_loop() -> None:
    rng = random.Random(29)
    taken = 0
    cases = 400
    for case in range(cases):
        data, pos, limit, count = section_of(random_batch(rng))
        expected = loop_view(data, pos, limit, count)
        got = decode_varying(data, pos, limit, count)
        if got is None:
            continue
        taken += 1
        assert got[1] == limit, case
        assert expected is not None, case  # the loop cannot read it, so neither may this path
        assert expand(got[0], count) == expected, case
    assert taken > cases // 5  # the usual batch of varying sizes takes this path


def test_mutated_sections_are_decoded_as_the_loop_does_or_left_to_it() -> None:
    rng = random.Random(30)
    taken = 0
    for case in range(1500):
        data, pos, limit, count = section_of(random_batch(rng))
        mutable = bytearray(data)
        kind = case % 3
        if kind == 0:  # one byte changed, anywhere in the records
            mutable[rng.randrange(pos, limit)] = rng.randrange(256)
        elif kind == 1:  # a byte changed among the first bytes of a record's fields
            at = rng.randrange(pos, limit)
            mutable[at] = rng.choice([0, 1, 2, 0x7F, 0x80, 0xC8, 0xFF])
        else:  # bytes cut from the middle (the records no longer end at the section's end)
            at = rng.randrange(pos, limit)
            del mutable[at : at + rng.choice([1, 2, 9])]
            limit = len(mutable) if limit == len(data) else limit - (len(data) - len(mutable))
        mutated = bytes(mutable)
        expected = loop_view(mutated, pos, limit, count)
        got = decode_varying(mutated, pos, limit, count)
        if got is not None:
            taken += 1
            assert expected is not None, case
            assert expand(got[0], count) == expected, case
    assert taken > 100


def test_lookalike_bytes_in_values_are_values() -> None:
    builder = RecordBatchBuilder()
    values = [LOOKALIKE * (i % 5 + 1) + b"x" * (100 + i % 7) for i in range(300)]
    for value in values:
        builder.append(T0, None, value)
    data, pos, limit, count = section_of(builder.build())
    got = decode_varying(data, pos, limit, count)
    # a value that holds a separator cuts the section in too many pieces: the loop reads the batch
    assert got is None
    assert loop_view(data, pos, limit, count) is not None


def test_sizes_vary() -> None:
    same, varying = RecordBatchBuilder(), RecordBatchBuilder()
    for i in range(3):
        same.append(T0, None, b"x" * 100)
        varying.append(T0, None, b"x" * (100 + i))
    assert not sizes_vary(*section_of(same.build())[:3])
    assert sizes_vary(*section_of(varying.build())[:3])


def test_decode_partition_agrees_with_decode_batch_on_varying_sizes() -> None:
    rng = random.Random(31)
    for case in range(60):
        batch = random_batch(
            rng,
            compression=rng.choice(["none", "none", "gzip", "lz4", "zstd", "snappy"]),
            log_append_time=rng.random() < 0.1,
        )
        expected = [
            (r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in decode_batch(batch).records
        ]
        decoded = decode_partition("t", 0, batch, 0)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded.records] == expected, case
