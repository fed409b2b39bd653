"""Record batches down-converted to the old message formats for Fetch v0-3
(kctl.records.downconvert), read back by kafka-python's legacy reader (an independent
implementation): offsets, keys, values and timestamps survive; headers, control batches and records
before the fetch offset do not; LogAppendTime is marked with magic 1."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

from kctl.records.builder import RecordBatchBuilder
from kctl.records.downconvert import down_convert, magic_for_fetch_version

T0 = 1_700_000_000_000


def batch(base: int, count: int, *, compression: str = "none", **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(base_offset=base, compression=compression, **kwargs)  # type: ignore[arg-type]
    for i in range(count):
        key = None if i == 0 else b"k%d" % (base + i)
        builder.append(T0 + base + i, key, b"v%d" % (base + i), headers=[("h", b"x")])
    return builder.build()


def read_back(data: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None, int]]:
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        legacy_batch = records.next_batch()
        for record in legacy_batch:
            out.append(
                (
                    legacy_batch.magic,
                    record.offset,
                    record.timestamp,
                    record.key,
                    record.value,
                    record.timestamp_type,
                )
            )
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_records_from_the_fetch_offset_on_in_the_old_format(magic: int, compression: str) -> None:
    data = batch(10, 4, compression=compression) + batch(14, 3, compression=compression)
    got = read_back(down_convert(data, magic, first_offset=12))
    offsets = list(range(12, 17))
    assert [g[0] for g in got] == [magic] * 5
    assert [g[1] for g in got] == offsets
    assert [g[4] for g in got] == [b"v%d" % o for o in offsets]
    assert [g[3] for g in got] == [b"k%d" % o if o != 14 else None for o in offsets]
    assert [g[2] for g in got] == ([T0 + o for o in offsets] if magic else [None] * 5)


def test_control_batches_are_left_out_and_log_append_time_is_marked() -> None:
    control = RecordBatchBuilder(
        base_offset=3, producer_id=7, producer_epoch=0, is_transactional=True, is_control=True
    )
    control.append(T0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    stamped = bytearray(batch(4, 2, log_append_time=True))
    data = batch(0, 3) + control.build() + bytes(stamped)
    got = read_back(down_convert(data, 1))
    assert [g[1] for g in got] == [0, 1, 2, 4, 5]
    assert [g[5] for g in got] == [0, 0, 0, 1, 1]  # CreateTime, then LogAppendTime


def test_a_partial_batch_at_the_end_is_ignored_and_versions_map_to_formats() -> None:
    data = batch(0, 2) + batch(2, 2)[:-5]
    assert [g[1] for g in read_back(down_convert(data, 0))] == [0, 1]
    assert [magic_for_fetch_version(v) for v in range(4)] == [0, 0, 1, 1]
