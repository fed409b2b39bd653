"""kctl.records.columns: the column-wise fast path of the consumer against the record loops.

Seeded, in-process property tests: random batches whose records mostly share a layout (so the run
path is taken) with keys and values of every size and null, headers, offset deltas crossing 64 and
8192, timestamp deltas small, large and varying, compressed or not, decoded by ``decode_columns`` and
by the strict ``decode_section``, and through the consumer's ``decode_partition`` against
``decode_batch``; and mutated sections (a run broken in the middle, a length field that lies, a
truncated section) decoded by ``decode_columns`` and by its own record loop alone, which must agree
record for record or both leave the batch to ``decode_section``."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from kctl.client.consumer.fetcher import CorruptRecordError, TimestampType, decode_partition
from kctl.records import columns
from kctl.records.builder import RecordBatchBuilder
from kctl.records.columns import MAX_WINDOW, MIN_RUN, WINDOW, ColumnRun, decode_columns
from kctl.records.header import HEADER_SIZE, InvalidRecordBatch, parse_header, write_crc
from kctl.records.reader import decode_batch, decode_section, records_section
from kctl.records.varint import decode_varint

T0 = 1_700_000_000_000
DEFER = "defer to decode_section"


def _expand(runs: list[ColumnRun]) -> list[tuple[Any, ...]]:
    """(offset delta, timestamp delta, key, value) of every record of ``runs``."""
    out: list[tuple[Any, ...]] = []
    for run in runs:
        n = len(run.offset_deltas)
        ts = run.timestamp_deltas
        timestamps = [ts] * n if isinstance(ts, int) else list(ts)
        keys = [None] * n if run.keys is None else list(run.keys)
        values = [None] * n if run.values is None else list(run.values)
        assert len(timestamps) == len(keys) == len(values) == n
        out += zip(run.offset_deltas, timestamps, keys, values, strict=True)
    return out


def _fast(section: bytes, count: int) -> Any:
    try:
        runs = decode_columns(section, 0, len(section), count)
    except (ValueError, IndexError):
        return DEFER
    return DEFER if runs is None else _expand(runs)


def _loop_only(section: bytes, count: int) -> Any:
    """The record loop alone over the whole section (the fast path's reference)."""
    try:
        segment = columns._loop(section, 0, count)
    except (ValueError, IndexError):
        return DEFER
    if segment is None or segment[1] != len(section):
        return DEFER
    return _expand([segment[0]])


def _strict(batch: bytes) -> list[tuple[Any, ...]]:
    header = parse_header(batch)
    data, pos, limit = records_section(batch, 0, header)
    return decode_section(
        data, pos, limit, header, 0,
        lambda offset, ts, key, value, headers: (
            offset - header.base_offset, ts - header.base_timestamp, key, value, headers
        ),
    )  # fmt: skip


def _random_batch(rng: random.Random, *, compression: str = "none", log_append_time: bool = False) -> bytes:
    """A batch of runs of records sharing a layout, with the odd record that breaks a run."""
    builder = RecordBatchBuilder(
        base_offset=rng.choice([0, 5, 1 << 40]),
        compression=compression,
        log_append_time=log_append_time,
    )
    wild = rng.random() < 0.2  # deltas past 8191 (decode_section's batches)
    delta = rng.choice([-1, -1, 40, 8150 if wild else 0])  # the first record's offset delta is one more
    for _ in range(rng.choice([1, 2, 3])):  # runs
        key_size = rng.choice([None, None, 0, 1, 16, 63, 64, 200, 9000])
        value_size = rng.choice([None, 0, 1, 50, 100, 100, 1000, 8192, 9000])
        ts_mode = rng.choice(["same", "same", "small", "large", "large-same", "huge" if wild else "same"])
        ts_base = T0 + rng.choice([0, 0, 70, -70, 10**6 if wild else 0])
        for _ in range(rng.choice([1, 15, 31, 32, 33, 100, 300, 1100])):
            ts = {
                "same": ts_base,
                "small": ts_base + rng.randrange(-31, 32),
                "large": ts_base + rng.randrange(-5000, 5000),
                "large-same": ts_base + 1000,
                "huge": ts_base + rng.choice([0, 10**9]),
            }[ts_mode]
            odd = rng.random() < 0.002  # a record that breaks the run
            key = None if key_size is None else rng.randbytes(key_size + odd)
            value = None if value_size is None else rng.randbytes(value_size)
            record_headers = [("h", b"v")] if rng.random() < 0.001 else []
            delta += 1 if rng.random() < 0.998 else rng.choice([2, 100])  # the odd gap
            builder.append(ts, key, value, record_headers, offset_delta=delta)
            if len(builder) > 2000:
                break
    return builder.build()


def _section(batch: bytes) -> tuple[bytes, int]:
    header = parse_header(batch)
    data, pos, limit = records_section(batch, 0, header)
    return data[pos:limit], header.records_count


def test_runs_agree_with_the_strict_decoder() -> None:
    rng = random.Random(18)
    seen: set[str] = set()
    for case in range(100):
        batch = _random_batch(rng, compression=rng.choice(["none", "none", "lz4", "zstd"]))
        section, count = _section(batch)
        strict = _strict(batch)
        fast = _fast(section, count)
        if fast == DEFER:  # only for record headers or deltas past 8191
            assert _loop_only(section, count) == DEFER, case
            assert any(headers for *_, headers in strict) or any(
                not -8192 <= d < 8192 for record in strict for d in record[:2]
            ), case
            seen.add("deferred")
            continue
        assert fast == [record[:4] for record in strict], case
        runs = decode_columns(section, 0, len(section), count)
        assert runs is not None
        for run in runs:
            if isinstance(run.values, list):  # the record loop's (a run's are a tuple, or None)
                seen.add("looped")
                seen.add("looped, gaps" if isinstance(run.offset_deltas, list) else "looped, no gap")
                seen.add("looped, same timestamps" if isinstance(run.timestamp_deltas, int) else "looped, ts")
                continue
            seen.add("run past 64" if run.offset_deltas.start >= 64 else "run below 64")
            seen.add("same timestamps" if isinstance(run.timestamp_deltas, int) else "timestamps")
            if not isinstance(run.timestamp_deltas, int) and max(map(abs, run.timestamp_deltas)) >= 64:
                seen.add("two-byte timestamps")
            seen.add("null keys" if run.keys is None else "keys")
            seen.add("null values" if run.values is None else "values")
    assert seen == {
        "deferred", "looped", "looped, gaps", "looped, no gap", "looped, same timestamps", "looped, ts",
        "run past 64", "run below 64", "same timestamps", "timestamps",
        "two-byte timestamps", "null keys", "keys", "null values", "values",
    }  # fmt: skip


def test_the_consumer_agrees_with_decode_batch() -> None:
    rng = random.Random(7)
    for case in range(40):
        batch = _random_batch(
            rng, compression=rng.choice(["none", "gzip", "snappy"]), log_append_time=rng.random() < 0.2
        )
        header = parse_header(batch)
        decoded = decode_batch(batch)
        ts_type = TimestampType.LOG_APPEND_TIME if decoded.is_log_append_time else TimestampType.CREATE_TIME
        expected = [
            ("t", 3, r.offset, r.timestamp, ts_type, r.key, r.value, tuple(r.headers))
            for r in decoded.records
        ]
        got = decode_partition("t", 3, memoryview(batch), header.base_offset).records
        assert [tuple(r) for r in got] == expected, case


def _record_starts(batch: bytes | bytearray) -> list[int]:
    """Where each record of an uncompressed batch starts."""
    starts, at = [], HEADER_SIZE
    while at < len(batch):
        starts.append(at)
        length, end = decode_varint(batch, at)
        at = end + length
    return starts


def _uniform_section(rng: random.Random, count: int) -> bytes:
    builder = RecordBatchBuilder()
    key = None if rng.random() < 0.5 else b"k" * rng.choice([1, 10])
    for _ in range(count):
        builder.append(T0 + rng.choice([0, 0, 3]), key, b"v" * 100)
    return _section(builder.build())[0]


def test_mutated_sections_agree_with_the_record_loop() -> None:
    """One to three bytes changed (mostly the varints and header counts of records in the middle of
    a run), or the section cut short or lengthened: the fast path yields exactly what its record
    loop yields, or both leave the batch to decode_section."""
    rng = random.Random(99)
    outcomes = {"records": 0, "defer": 0}
    for case in range(400):
        count = rng.choice([20, 64, 100, 300])
        section = bytearray(_uniform_section(rng, count))
        stride = len(section) // count
        for _ in range(rng.choice([1, 1, 2, 3])):
            record = rng.randrange(count)
            at = record * stride + rng.choice([0, 1, 2, 3, 4, 5, 6, stride - 1, rng.randrange(stride)])
            if at < len(section):
                section[at] = rng.choice([0, 1, 2, 0x7F, 0x80, 0xFF, section[at] ^ 2, rng.randrange(256)])
        data = bytes(section)
        if case % 10 == 0:
            data = data[: rng.randrange(len(data))]  # truncated
        elif case % 10 == 1:
            data += b"\x00"  # bytes left over
        expected = _loop_only(data, count)
        assert _fast(data, count) == expected, case
        outcomes["records" if expected != DEFER else "defer"] += 1
    assert outcomes["records"] > 20 and outcomes["defer"] > 20, outcomes


def test_a_length_field_that_lies_in_a_run_is_read_as_the_loop_reads_it() -> None:
    """A record in the middle of a run whose length is one byte too long: the run does not
    validate, and the loop steps over lengths (the documented trade-off), so the records are read;
    the strict reader rejects the batch."""
    builder = RecordBatchBuilder()
    for i in range(200):
        builder.append(T0, None, bytes([i]) * 100)
    batch = bytearray(builder.build())
    at = _record_starts(batch)[100]  # record 100's length varint (two bytes)
    batch[at] += 2
    write_crc(batch, 0, len(batch))
    got = decode_partition("t", 0, bytes(batch), 0).records
    assert [r.value for r in got] == [bytes([i]) * 100 for i in range(200)]
    assert [r.offset for r in got] == list(range(200))
    with pytest.raises(InvalidRecordBatch, match="record 100"):
        decode_batch(bytes(batch))


def test_a_run_broken_in_the_middle_falls_back_to_the_loop() -> None:
    """A record of another size ends a run; as it starts no run of MIN_RUN records, the loop reads
    the rest of the batch."""
    builder = RecordBatchBuilder()
    values = [b"x" * (101 if i == 150 else 100) for i in range(300)]
    for value in values:
        builder.append(T0, None, value)
    section, count = _section(builder.build())
    runs = decode_columns(section, 0, len(section), count)
    assert runs is not None
    assert [run.offset_deltas for run in runs] == [range(0, 64), range(64, 150), range(150, 300)]
    assert [type(run.values) for run in runs] == [tuple, tuple, list]  # the last one looped
    assert [record[3] for record in _expand(runs)] == values
    assert [record[0] for record in _expand(runs)] == list(range(300))


def test_a_new_layout_starts_a_new_run() -> None:
    builder = RecordBatchBuilder()
    records = [(T0 + i % 3, None, b"a" * 100) for i in range(100)]
    records += [(T0 + 100 + i, b"key", b"b" * 50) for i in range(200)]
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    section, count = _section(builder.build())
    runs = decode_columns(section, 0, len(section), count)
    assert runs is not None
    assert [run.offset_deltas for run in runs] == [range(0, 64), range(64, 100), range(100, 300)]
    assert [(T0 + ts, key, value) for _, ts, key, value in _expand(runs)] == records


def test_short_runs_and_delta_boundaries() -> None:
    """Runs end where the offset delta's varint grows (64, 8192) and at the end of their window;
    fewer than MIN_RUN records before a boundary are looped."""
    builder = RecordBatchBuilder()
    for delta in range(8100, 8200):
        builder.append(T0, b"key", b"value", offset_delta=delta)
    section, count = _section(builder.build())
    assert decode_columns(section, 0, len(section), count) is None  # decode_section reads deltas past 8191
    builder = RecordBatchBuilder()
    for delta in range(50, 8192):
        builder.append(T0, b"key", b"value", offset_delta=delta)
    section, count = _section(builder.build())
    runs = decode_columns(section, 0, len(section), count)
    assert runs is not None
    assert runs[0].offset_deltas == range(50, 64) and isinstance(runs[0].keys, list)  # 14: looped
    assert MIN_RUN > 14
    bounds, window = [64], WINDOW
    while bounds[-1] < 8192:
        bounds.append(min(bounds[-1] + window, 8192))
        window = min(window * 2, MAX_WINDOW)
    assert len(bounds) > 3
    assert [run.offset_deltas for run in runs[1:]] == [range(a, b) for a, b in itertools.pairwise(bounds)]
    assert [value for *_, value in _expand(runs)] == [b"value"] * 8142


def test_malformed_sections_raise_through_the_consumer_as_before() -> None:
    """A header count that lies in the middle of a run: the consumer reports decode_section's error."""
    builder = RecordBatchBuilder()
    for _ in range(100):
        builder.append(T0, None, b"v" * 100)
    batch = bytearray(builder.build())
    batch[_record_starts(batch)[71] - 1] = 2  # record 70: one header, which is not there
    write_crc(batch, 0, len(batch))
    with pytest.raises(InvalidRecordBatch) as strict:
        decode_batch(bytes(batch))
    with pytest.raises(CorruptRecordError) as consumer:
        decode_partition("t", 0, bytes(batch), 0)
    assert str(strict.value) in str(consumer.value) and "record 70" in str(consumer.value)
