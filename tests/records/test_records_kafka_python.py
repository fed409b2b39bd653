"""Independence check: our RecordBatch v2 codec against kafka-python's (an independent implementation).

Uncompressed batches built from identical inputs must be byte-for-byte equal; compressed batches
built by either side must decode on the other side to the same records."""

from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kctl.records import (
    CompressionType,
    ControlRecord,
    ControlRecordType,
    RecordBatchBuilder,
    decode_batch,
    iter_batches,
)

COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]

Input = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]  # offset delta first


def _inputs_plain() -> list[Input]:
    return [(i, 1_700_000_000_000 + i, b"key-%d" % i, b"value-%d" % i * 3, []) for i in range(100)]


def _inputs_mixed() -> list[Input]:
    return [
        (0, 0, None, None, []),
        (1, -3, b"", b"", []),
        (2, 1_700_000_000_000, bytes(range(256)), os.urandom(1000), [("h", b"v"), ("none", None)]),
        (3, 1_600_000_000_000, b"k", b"x" * 20_000, [("ключ", b"\xff" * 300), ("", b"")]),
        (4, 5, None, b"\x00", [("日本", None)] * 3),
    ]


def _inputs_gaps() -> list[Input]:
    return [(delta, 1000 + delta, b"k%d" % delta, b"v", []) for delta in (0, 2, 3, 9, 200, 70_000)]


def _inputs_compressible() -> list[Input]:
    return [(i, 1_700_000_000_000 + i * 7, b"user-%d" % (i % 10), b"payload " * 40, [("trace", b"abc")])
            for i in range(200)]


INPUT_SETS = {
    "plain": _inputs_plain,
    "mixed": _inputs_mixed,
    "gaps": _inputs_gaps,
    "compressible": _inputs_compressible,
}

PRODUCER_STATES = {
    "no-producer": {"producer_id": -1, "producer_epoch": -1, "base_sequence": -1, "is_transactional": False},
    "idempotent": {"producer_id": 4242, "producer_epoch": 3, "base_sequence": 17, "is_transactional": False},
    "transactional": {"producer_id": 99, "producer_epoch": 0, "base_sequence": 0, "is_transactional": True},
}


def _theirs(inputs: list[Input], codec: int, state: dict) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, batch_size=1 << 30, **state
    )
    for delta, timestamp, key, value, headers in inputs:
        assert builder.append(delta, timestamp, key, value, headers) is not None
    return bytes(builder.build())


def _ours(inputs: list[Input], codec: CompressionType, state: dict) -> bytes:
    # kafka-python writes partition_leader_epoch 0 where the Java producer writes -1
    builder = RecordBatchBuilder(compression=codec, partition_leader_epoch=0, **state)
    for delta, timestamp, key, value, headers in inputs:
        builder.append(timestamp, key, value, headers, offset_delta=delta)
    return builder.build()


def _expected(inputs: list[Input], base_offset: int = 0) -> list[tuple]:
    return [(base_offset + d, t, k, v, list(h)) for d, t, k, v, h in inputs]


def _read_with_kafka_python(data: bytes) -> list[tuple]:
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def _read_with_ours(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(data).records]


@pytest.mark.parametrize("state", list(PRODUCER_STATES))
@pytest.mark.parametrize("inputs", list(INPUT_SETS))
def test_uncompressed_bytes_equal_kafka_python(inputs: str, state: str) -> None:
    records = INPUT_SETS[inputs]()
    theirs = _theirs(records, 0, PRODUCER_STATES[state])
    ours = _ours(records, CompressionType.NONE, PRODUCER_STATES[state])
    assert ours == theirs
    assert _read_with_ours(theirs) == _expected(records)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
@pytest.mark.parametrize("inputs", ["mixed", "gaps", "compressible"])
def test_kafka_python_compressed_batches_decode_with_ours(codec: CompressionType, inputs: str) -> None:
    records = INPUT_SETS[inputs]()
    theirs = _theirs(records, int(codec), PRODUCER_STATES["idempotent"])
    batch = decode_batch(theirs)
    if inputs == "compressible":  # kafka-python falls back to no compression when it does not help
        assert batch.compression is codec
    assert _read_with_ours(theirs) == _expected(records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, 17)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
@pytest.mark.parametrize("inputs", list(INPUT_SETS))
def test_our_compressed_batches_decode_with_kafka_python(codec: CompressionType, inputs: str) -> None:
    records = INPUT_SETS[inputs]()
    ours = _ours(records, codec, PRODUCER_STATES["transactional"])
    kafka_batch = DefaultRecordBatch(ours)
    assert kafka_batch.compression_type == int(codec)
    assert kafka_batch.is_transactional
    assert (kafka_batch.producer_id, kafka_batch.producer_epoch, kafka_batch.base_sequence) == (99, 0, 0)
    assert _read_with_kafka_python(ours) == _expected(records)


def test_multi_batch_streams_both_ways() -> None:
    # kafka-python's MemoryRecordsBuilder (one batch per builder) → our iter_batches
    stream = b""
    for i, codec in enumerate(CompressionType):
        builder = MemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 20, offset=0)
        for j in range(20):
            builder.append(timestamp=1000 + j, key=b"k%d" % j, value=b"batch %d value %d " % (i, j) * 10)
        builder.close()
        stream += bytes(builder.buffer())
    decoded = list(iter_batches(stream))
    assert len(decoded) == len(CompressionType)
    for i, batch in enumerate(decoded):
        assert [r.value for r in batch.records] == [b"batch %d value %d " % (i, j) * 10 for j in range(20)]

    # our batches, with base offsets, → kafka-python's MemoryRecords
    ours = b""
    for i, codec in enumerate(CompressionType):
        builder = RecordBatchBuilder(compression=codec, base_offset=100 * i)
        for j in range(20):
            builder.append(1000 + j, b"k%d" % j, b"value %d" % j)
        ours += builder.build()
    memory_records = MemoryRecords(ours)
    offsets = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        offsets.extend(record.offset for record in batch)
    assert offsets == [100 * i + j for i in range(len(CompressionType)) for j in range(20)]


def test_log_append_time_read_by_kafka_python() -> None:
    builder = RecordBatchBuilder(log_append_time=True)
    for timestamp in (10, 30, 20):
        builder.append(timestamp, None, b"v")
    batch = DefaultRecordBatch(builder.build())
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [30, 30, 30]


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_control_batch_read_by_kafka_python(control_type: ControlRecordType) -> None:
    marker = ControlRecord(control_type, coordinator_epoch=5)
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    builder.append(123, marker.encode_key(), marker.encode_value())
    batch = DefaultRecordBatch(builder.build())
    assert batch.is_control_batch
    (record,) = list(batch)
    assert record.commit == (control_type == ControlRecordType.COMMIT)
    assert record.abort == (control_type == ControlRecordType.ABORT)


def test_bytes_equal_across_varint_widths() -> None:
    """Lengths, offset deltas and timestamp deltas crossing the 1/2/3-byte varint boundaries."""
    sizes = [*range(0, 200), *range(8000, 8300), 16_000, 20_000, 70_000]
    records: list[Input] = [
        (i * 29, 1_000 + (i * 37 if i % 2 else -i * 11), b"k" * (size // 3), b"v" * size, [])
        for i, size in enumerate(sizes)
    ]
    state = PRODUCER_STATES["no-producer"]
    assert _ours(records, CompressionType.NONE, state) == _theirs(records, 0, state)
