"""Produce v0-2's message sets (magic 0 and 1) converted to one RecordBatch v2
(kctl.records.upconvert), from sets written by kafka-python's legacy builder (an independent
implementation): the records, their order, keys, values and timestamps survive; the codec is kept;
damage is refused."""

from __future__ import annotations

import struct

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kctl.records.compression import CompressionType
from kctl.records.legacy import InvalidLegacyMessage
from kctl.records.reader import iter_batches
from kctl.records.upconvert import up_convert

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def produced_set(magic: int, codec: str, count: int) -> bytes:
    """What an old producer sends: offsets 0..count-1 (relative in a magic 1 wrapper)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
    for i in range(count):
        key = None if i % 3 == 0 else b"key-%d" % i
        builder.append(i, timestamp=T0 + i if magic else None, key=key, value=b"value-%d" % i)
    return bytes(builder.build())


def decoded(batch_bytes: bytes) -> tuple[CompressionType, list[tuple[int, bytes | None, bytes | None, int]]]:
    [batch] = list(iter_batches(batch_bytes))
    records = [(r.offset, r.key, r.value, r.timestamp) for r in batch.records]
    return CompressionType(batch.header.compression), records


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in CODECS if (m, c) != (0, "lz4")])
def test_a_message_set_becomes_one_batch_with_the_same_records(magic: int, codec: str) -> None:
    data = produced_set(magic, codec, 5) + produced_set(magic, codec, 2)
    compression, records = decoded(up_convert(data))
    assert compression == CompressionType(CODECS[codec])
    values = [b"value-%d" % i for i in (0, 1, 2, 3, 4, 0, 1)]
    assert [r[0] for r in records] == list(range(7))
    assert [r[2] for r in records] == values
    assert [r[1] for r in records][:3] == [None, b"key-1", b"key-2"]
    expected_ts = [T0 + i for i in (0, 1, 2, 3, 4, 0, 1)] if magic else [-1] * 7
    assert [r[3] for r in records] == expected_ts


def test_a_damaged_message_is_refused() -> None:
    data = bytearray(produced_set(1, "none", 3))
    data[-1] ^= 0xFF
    with pytest.raises(InvalidLegacyMessage, match="fails its CRC"):
        up_convert(bytes(data))


def test_a_damaged_inner_message_of_a_wrapper_is_refused() -> None:
    import gzip

    inner = bytearray(produced_set(1, "none", 2))
    inner[-1] ^= 0xFF  # the inner message's CRC no longer matches
    # a magic 1 gzip wrapper around it, with a correct CRC of its own
    value = gzip.compress(bytes(inner))
    body = struct.pack(">bbq", 1, 1, T0) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    import zlib

    message = struct.pack(">I", zlib.crc32(body)) + body
    wrapper = struct.pack(">qi", 1, len(message)) + message
    with pytest.raises(InvalidLegacyMessage, match="inner message at offset 1 fails its CRC"):
        up_convert(wrapper)


def test_truncated_sets_and_record_batches_are_refused() -> None:
    data = produced_set(0, "none", 2)
    with pytest.raises(InvalidLegacyMessage, match="truncated"):
        up_convert(data[:-3])
    from kctl.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(T0, b"k", b"v")
    with pytest.raises(InvalidLegacyMessage, match="magic 2"):
        up_convert(builder.build())
