"""walk_lengths (kctl/records/validate.py), the structural walk of produce's append path, steps over
runs of same-size records at C speed: it must accept and refuse exactly what a record-at-a-time walk
of the length varints does, for well-formed batches of fixed and varying record sizes and for
records sections whose bytes were changed (a seeded run of mutations)."""

from __future__ import annotations

import random

import pytest

from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import HEADER_SIZE, InvalidRecordBatch, parse_header
from kctl.records.validate import MIN_RUN, walk_lengths
from kctl.records.varint import VarintError, decode_uvarint


def reference_walk(data: bytes, pos: int, limit: int, count: int) -> bool:
    """True when a record-at-a-time walk accepts the section (the walk before the run path)."""
    if count < 0 or count > (limit - pos) // 7:
        return False
    try:
        for _ in range(count):
            b, pos = decode_uvarint(data, pos)
            if b & 1 or b < 12:
                return False
            pos += b >> 1
    except (IndexError, VarintError):
        return False
    return pos == limit


def batch(sizes: list[int | None], keys: bool = False, timestamp_step: int = 0) -> bytes:
    builder = RecordBatchBuilder()
    for i, size in enumerate(sizes):
        value = None if size is None else bytes([i % 251]) * size
        builder.append(1_700_000_000_000 + i * timestamp_step, b"k%d" % i if keys else None, value)
    return builder.build()


def verdict(data: bytes) -> bool:
    header = parse_header(data, 0)
    try:
        walk_lengths(data, HEADER_SIZE, len(data), header)
    except InvalidRecordBatch:
        return False
    return True


def test_fixed_and_varying_sizes_are_accepted() -> None:
    rng = random.Random(7)
    cases: list[list[int | None]] = [
        [100] * 100,  # two runs: offset deltas below 64 and from 64 on
        [1024] * 1000,  # long runs, two-byte lengths
        [20_000] * 40,  # three-byte lengths
        [100] * (MIN_RUN - 1),  # too short for a run
        [rng.randint(90, 110) for _ in range(500)],  # varying: a record at a time
        [*([100] * 50), *(rng.randint(0, 300) for _ in range(50)), *([100] * 50)],
        [None] * 70,
    ]
    for sizes in cases:
        data = batch(sizes)
        assert verdict(data)
        assert verdict(batch(sizes, keys=True, timestamp_step=3))


def test_a_memoryview_section_is_walked_too() -> None:
    data = batch([100] * 200)
    header = parse_header(data, 0)
    summary = walk_lengths(memoryview(data), HEADER_SIZE, len(data), header)
    assert summary.offset_delta_of_max_timestamp == 199


@pytest.mark.parametrize("seed", range(4))
def test_mutated_sections_get_the_reference_walks_verdict(seed: int) -> None:
    rng = random.Random(seed)
    varying: list[int | None] = [rng.randint(10, 200) for _ in range(100)]
    shapes: list[list[int | None]] = [[100] * 100, [1024] * 300, varying, [64] * 40]
    refused = 0
    for _ in range(1500):
        data = bytearray(batch(rng.choice(shapes)))
        for _ in range(rng.randint(1, 3)):  # bytes changed, or cut from / added to the section
            what = rng.random()
            at = rng.randrange(HEADER_SIZE, len(data))
            if what < 0.7:
                data[at] = rng.randrange(256)
            elif what < 0.85:
                del data[at]
            else:
                data.insert(at, rng.randrange(256))
        header = parse_header(bytes(data[:HEADER_SIZE]) + b"\0" * (len(data) - HEADER_SIZE), 0)
        expected = reference_walk(bytes(data), HEADER_SIZE, len(data), header.records_count)
        assert verdict(bytes(data)) == expected, (seed, bytes(data).hex())
        refused += not expected
    assert refused > 100  # the mutations do reach the refusals
