"""Record-level codec of RecordBatch v2: RecordBatchBuilder, decode_batch, iter_batches, records."""

from __future__ import annotations

import random
import struct

import pytest

from kctl.records import (
    CompressionType,
    ControlRecord,
    ControlRecordType,
    DecodedBatch,
    DecompressionError,
    InvalidRecordBatch,
    Record,
    RecordBatchBuilder,
    compress,
    decode_batch,
    encode_batch,
    iter_batches,
)
from kctl.records.header import (
    HEADER_SIZE,
    iter_headers,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
    write_crc,
)
from kctl.records.varint import encode_varint

CODECS = list(CompressionType)
IDS = [codec.label for codec in CODECS]

# (timestamp, key, value, headers): nulls, empties, binary, headers with None values and
# non-ASCII keys, zero/negative/out-of-order timestamps.
RICH_RECORDS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (0, None, None, []),
    (-5, b"", b"", []),
    (1_700_000_000_000, b"key", b"value", [("h1", b"v1"), ("h2", None)]),
    (1_700_000_000_123, bytes(range(256)), bytes(range(255, -1, -1)) * 3, [("ключ", b"\x00\xff"), ("", b"")]),
    (-1_000, None, b"x" * 10_000, [("日本語", None)]),
    (42, b"\x00" * 70, None, [("a", b"b")] * 5),
    (1_699_999_999_999, b"k" * 20_000, b"v" * 200, []),
]


def _as_tuples(records: list[Record]) -> list[tuple]:
    return [(r.timestamp, r.key, r.value, r.headers) for r in records]


def _build(records, **kwargs) -> bytes:
    builder = RecordBatchBuilder(**kwargs)
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    return builder.build()


# ------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_round_trip_rich_records(codec: CompressionType) -> None:
    data = _build(RICH_RECORDS, compression=codec, base_offset=1000)
    batch = decode_batch(data)
    assert isinstance(batch, DecodedBatch)
    assert _as_tuples(batch.records) == [(t, k, v, list(h)) for t, k, v, h in RICH_RECORDS]
    assert [r.offset for r in batch.records] == list(range(1000, 1000 + len(RICH_RECORDS)))
    assert batch.compression is codec
    assert batch.base_offset == 1000
    assert batch.last_offset == 1000 + len(RICH_RECORDS) - 1
    assert batch.next_offset == 1000 + len(RICH_RECORDS)
    assert batch.base_timestamp == 0  # first record's timestamp, not the minimum
    assert batch.max_timestamp == 1_700_000_000_123
    assert batch.size_in_bytes == len(data)
    assert len(batch) == len(RICH_RECORDS)
    assert batch.header.records_count == len(RICH_RECORDS)
    assert not batch.is_control and not batch.is_transactional and not batch.is_log_append_time
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1
    assert validate_batch(data).crc == batch.header.crc


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_random_records_round_trip(codec: CompressionType) -> None:
    rng = random.Random(int(codec))
    records = []
    timestamp = rng.randint(-(1 << 40), 1 << 40)
    for _ in range(300):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 300))
        size = rng.choice([0, 1, 63, 64, 127, 128, 5000, 20000])
        value = None if rng.random() < 0.1 else rng.randbytes(size)
        headers = [(f"h{j}é", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 70)))
                   for j in range(rng.choice([0, 0, 1, 3]))]
        records.append((timestamp + rng.randint(-(1 << 33), 1 << 33), key, value, headers))
    data = _build(records, compression=codec)
    assert _as_tuples(decode_batch(data).records) == records


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_explicit_offset_gaps(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(compression=codec, base_offset=500)
    for delta in (0, 3, 4, 100, 70_000):
        builder.append(10 + delta, b"k%d" % delta, b"v", offset_delta=delta)
    builder.append(99, b"next", b"v")  # default: previous delta + 1
    batch = decode_batch(builder.build())
    assert [r.offset for r in batch.records] == [500, 503, 504, 600, 70_500, 70_501]
    assert batch.header.last_offset_delta == 70_001
    assert batch.last_offset == 70_501


def test_last_offset_delta_override_keeps_original_last_offset() -> None:
    """Compaction drops records but keeps the batch's last offset."""
    builder = RecordBatchBuilder(base_offset=10)
    builder.append(1, b"a", b"1", offset_delta=2)
    batch = decode_batch(builder.build(last_offset_delta=9))
    assert batch.header.last_offset_delta == 9
    assert batch.last_offset == 19
    assert [r.offset for r in batch.records] == [12]
    with pytest.raises(ValueError):
        builder.build(last_offset_delta=1)


def test_offset_deltas_must_increase() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, None, b"a", offset_delta=5)
    with pytest.raises(ValueError):
        builder.append(1, None, b"b", offset_delta=5)
    with pytest.raises(ValueError):
        builder.append(1, None, b"b", offset_delta=2)
    with pytest.raises(ValueError):
        builder.append(1, None, b"b", offset_delta=1 << 31)
    assert len(builder) == 1


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_producer_fields_and_transactional_flag(codec: CompressionType) -> None:
    data = _build(
        RICH_RECORDS[:3],
        compression=codec,
        producer_id=123_456_789_012,
        producer_epoch=7,
        base_sequence=2_000_000_000,
        is_transactional=True,
        partition_leader_epoch=12,
    )
    batch = decode_batch(data)
    producer = (batch.producer_id, batch.producer_epoch, batch.base_sequence)
    assert producer == (123_456_789_012, 7, 2_000_000_000)
    assert batch.is_transactional and not batch.is_control
    assert batch.partition_leader_epoch == 12
    assert _as_tuples(batch.records) == [(t, k, v, list(h)) for t, k, v, h in RICH_RECORDS[:3]]


def test_transactional_needs_producer_id() -> None:
    with pytest.raises(ValueError, match="producer id"):
        RecordBatchBuilder(is_transactional=True)
    with pytest.raises(ValueError, match="epoch"):
        RecordBatchBuilder(producer_id=5)


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_control_batch_round_trip(control_type: ControlRecordType) -> None:
    marker = ControlRecord(control_type, coordinator_epoch=17)
    builder = RecordBatchBuilder(
        base_offset=77, producer_id=9, producer_epoch=1, is_transactional=True, is_control=True
    )
    builder.append(1_700_000_000_000, marker.encode_key(), marker.encode_value())
    batch = decode_batch(builder.build())
    assert batch.is_control and batch.is_transactional
    (record,) = batch.records
    assert record.offset == 77
    assert record.key == struct.pack(">hh", 0, int(control_type))
    decoded = ControlRecord.from_record(record)
    assert decoded == marker
    assert decoded.type is control_type
    assert decoded.is_commit == (control_type == ControlRecordType.COMMIT)
    assert decoded.is_abort == (control_type == ControlRecordType.ABORT)
    assert decoded.coordinator_epoch == 17


def test_control_record_unknown_type_and_bad_key() -> None:
    unknown = ControlRecord.decode(struct.pack(">hh", 0, 5))
    assert unknown.type == 5 and not isinstance(unknown.type, ControlRecordType)
    assert not unknown.is_commit and not unknown.is_abort
    with pytest.raises(ValueError):
        ControlRecord.decode(b"\x00\x00")
    with pytest.raises(ValueError):
        ControlRecord.decode(None)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_log_append_time_records_take_max_timestamp(codec: CompressionType) -> None:
    data = _build([(100, None, b"a", []), (300, None, b"b", []), (200, None, b"c", [])],
                  compression=codec, log_append_time=True)
    batch = decode_batch(data)
    assert batch.is_log_append_time
    assert batch.max_timestamp == 300
    assert [r.timestamp for r in batch.records] == [300, 300, 300]


def test_broker_set_log_append_time_applies_to_records() -> None:
    data = bytearray(_build([(100, None, b"a", []), (150, None, b"b", [])]))
    set_log_append_time(data, 0, len(data), 9_999)
    batch = decode_batch(bytes(data))
    assert [r.timestamp for r in batch.records] == [9_999, 9_999]


def test_broker_base_offset_rewrite_applies_to_records() -> None:
    data = bytearray(_build(RICH_RECORDS[:3]))
    set_base_offset(data, 0, 1 << 40)
    batch = decode_batch(data)
    assert [r.offset for r in batch.records] == [(1 << 40) + i for i in range(3)]


def test_timestamps_header_fields() -> None:
    builder = RecordBatchBuilder()
    for timestamp in (50, 10, 90, -7):
        builder.append(timestamp, None, b"v")
    header = parse_header(builder.build())
    assert (header.base_timestamp, header.max_timestamp) == (50, 90)


def test_empty_batch() -> None:
    for codec in CODECS:
        data = RecordBatchBuilder(compression=codec, base_offset=5).build(last_offset_delta=3)
        assert len(data) == HEADER_SIZE
        batch = decode_batch(data)
        assert batch.records == []
        assert batch.compression is CompressionType.NONE
        assert (batch.base_timestamp, batch.max_timestamp) == (-1, -1)
        assert not batch.has_timestamps
        assert batch.last_offset == 8


def test_builder_reusable_and_sizes() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    first = builder.build()
    assert builder.estimated_size_in_bytes() == len(first)
    builder.append(2, b"k2", b"v2")
    second = builder.build()
    assert len(builder) == 2
    assert _as_tuples(decode_batch(first).records) == [(1, b"k", b"v", [])]
    assert _as_tuples(decode_batch(second).records) == [(1, b"k", b"v", []), (2, b"k2", b"v2", [])]
    compressed = RecordBatchBuilder(compression="zstd")
    for i in range(100):
        compressed.append(i, None, b"same value" * 10)
    assert len(compressed.build()) < compressed.estimated_size_in_bytes()


def test_failed_append_leaves_builder_unchanged() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    before = builder.build()
    with pytest.raises(TypeError):
        builder.append(2, b"k", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        builder.append(2, b"k", b"v", [("h", "not bytes")])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        builder.append(None, b"k", b"v")  # type: ignore[arg-type]
    assert builder.build() == before
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(None, b"k", b"v")  # type: ignore[arg-type]


def test_large_values_and_headers_use_multibyte_varints() -> None:
    value = b"v" * 100_000  # beyond the builder's pre-encoded varint table
    records = [(5, b"k" * 20_000, value, [("h" * 9000, value)]), (5 + (1 << 40), None, value, [])]
    data = _build(records, base_offset=0)
    assert _as_tuples(decode_batch(data).records) == records


def test_encode_batch_convenience() -> None:
    data = encode_batch(RICH_RECORDS, compression=CompressionType.LZ4, base_offset=3)
    batch = decode_batch(data)
    assert batch.compression is CompressionType.LZ4
    assert _as_tuples(batch.records) == [(t, k, v, list(h)) for t, k, v, h in RICH_RECORDS]
    assert batch.records[0].offset == 3


def test_decode_accepts_bytearray_memoryview_and_position() -> None:
    data = _build(RICH_RECORDS, compression=CompressionType.NONE)
    expected = _as_tuples(decode_batch(data).records)
    prefixed = b"\xee" * 13 + data
    assert _as_tuples(decode_batch(bytearray(data)).records) == expected
    assert _as_tuples(decode_batch(memoryview(data)).records) == expected
    assert _as_tuples(decode_batch(prefixed, 13).records) == expected
    assert all(type(r.key) in (bytes, type(None)) for r in decode_batch(memoryview(data)).records)


def test_record_defaults() -> None:
    record = Record(1, 2, None, None)
    assert record.headers == []
    assert record.headers is not Record(1, 2, None, None).headers


# ----------------------------------------------------------------------------- integrity / errors


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_crc_detects_flipped_byte_in_records(codec: CompressionType) -> None:
    data = bytearray(_build(RICH_RECORDS, compression=codec))
    data[HEADER_SIZE + (len(data) - HEADER_SIZE) // 2] ^= 0x01
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        decode_batch(bytes(data))


def test_verify_crc_false_skips_the_check() -> None:
    data = bytearray(_build([(1, b"key", b"value", [])]))
    index = bytes(data).index(b"value")
    data[index] = ord("V")
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        decode_batch(bytes(data))
    assert decode_batch(bytes(data), verify_crc=False).records[0].value == b"Value"


@pytest.mark.parametrize("cut", [1, 10, HEADER_SIZE - 1])
def test_truncated_batch(cut: int) -> None:
    data = _build(RICH_RECORDS)
    with pytest.raises(InvalidRecordBatch):
        decode_batch(data[: len(data) - cut])
    with pytest.raises(InvalidRecordBatch):
        decode_batch(data[: len(data) - cut], verify_crc=False)
    with pytest.raises(InvalidRecordBatch, match="truncated batch header"):
        decode_batch(data[: HEADER_SIZE - 1])


@pytest.mark.parametrize("garbage", [b"", b"\x00" * 100, b"garbage" * 30, bytes(range(256))])
def test_garbage(garbage: bytes) -> None:
    with pytest.raises(InvalidRecordBatch):
        decode_batch(garbage)


def _raw_batch(
    records_section: bytes, count: int, *, attributes: int = 0, last_offset_delta: int = 0
) -> bytes:
    """A batch with a hand-made records section and a correct CRC."""
    out = bytearray(
        struct.pack(
            ">qiibIhiqqqhii", 0, HEADER_SIZE - 12 + len(records_section), -1, 2, 0, attributes,
            last_offset_delta, 1000, 1000, -1, -1, -1, count,
        )
    )
    out += records_section
    write_crc(out, 0, len(out))
    return bytes(out)


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


# attributes, timestamp delta 0, offset delta 0
FIXED = b"\x00\x00\x00"
NULL = encode_varint(-1)
GOOD_BODY = FIXED + encode_varint(1) + b"k" + encode_varint(1) + b"v" + b"\x00"
NULLS = FIXED + NULL + NULL  # null key and value, headers follow


def test_raw_batch_helper_produces_decodable_batch() -> None:
    batch = decode_batch(_raw_batch(_record(GOOD_BODY) * 2, 2, last_offset_delta=1))
    assert _as_tuples(batch.records) == [(1000, b"k", b"v", [])] * 2


@pytest.mark.parametrize(
    ("section", "count", "message"),
    [
        (_record(GOOD_BODY), 2, "cannot fit|past the end"),  # count larger than the records
        (_record(GOOD_BODY) * 3, 2, "left over"),  # count smaller than the records
        (encode_varint(len(GOOD_BODY) - 1) + GOOD_BODY, 1, r"record 0: fields end at \+1"),  # too short
        (encode_varint(len(GOOD_BODY) + 1) + GOOD_BODY + b"\x00", 1, "fields end at -1"),  # too long
        (encode_varint(1000) + GOOD_BODY, 1, "length 1000"),  # record length past the end
        (encode_varint(-3) + GOOD_BODY, 1, "length -3"),
        (b"\xff" * 11 + GOOD_BODY, 1, "longer than"),  # over-long varint
        (_record(FIXED + encode_varint(-2) + NULL + b"\x00"), 1, "negative key length"),
        (_record(FIXED + NULL + encode_varint(-7) + b"\x00"), 1, "negative value length"),
        (_record(FIXED + encode_varint(1 << 30) + b"tiny" + b"\x00" * 3), 1, "key length 1073741824"),
        (_record(FIXED + NULL + encode_varint(1 << 30) + b"tiny" + b"\x00" * 3), 1, "value length"),
        (_record(NULLS + encode_varint(1 << 30) + b"\x00" * 4), 1, "header count"),
        (_record(NULLS + encode_varint(-1) + b"\x00" * 4), 1, "header count"),
        (_record(NULLS + b"\x02" + encode_varint(-1) + b"\x00"), 1, "header key length -1"),
        (_record(NULLS + b"\x02" + encode_varint(2) + b"\xff\xfe\x01"), 1, "UTF-8"),
        (_record(NULLS + b"\x02\x04hi" + encode_varint(1 << 20) + b"xy"), 1, "header value length"),
        (_record(NULLS + b"\x02\x04hi" + encode_varint(-9)), 1, "negative header value length"),
        (_record(GOOD_BODY), (1 << 31) - 1, "cannot fit"),  # absurd records_count
        (_record(GOOD_BODY), -1, "negative records_count"),
    ],
)
def test_malformed_records_raise_invalid_record_batch(section: bytes, count: int, message: str) -> None:
    data = _raw_batch(section, count)
    with pytest.raises(InvalidRecordBatch, match=message):
        decode_batch(data)
    # and inside a compressed batch, with the same checks on the decompressed section
    compressed = _raw_batch(compress(CompressionType.GZIP, section), count, attributes=1)
    with pytest.raises(InvalidRecordBatch):
        decode_batch(compressed)


def test_unknown_codec_in_attributes() -> None:
    with pytest.raises(InvalidRecordBatch, match="unknown compression codec 6"):
        decode_batch(_raw_batch(b"\x00" * 20, 1, attributes=6))


def test_corrupt_compressed_records_with_valid_crc() -> None:
    with pytest.raises(InvalidRecordBatch, match="cannot decompress zstd") as info:
        decode_batch(_raw_batch(b"not zstd at all", 1, attributes=int(CompressionType.ZSTD)))
    assert isinstance(info.value.__cause__, DecompressionError)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != CompressionType.NONE], ids=IDS[1:])
def test_max_decompressed_size_guards_decode(codec: CompressionType) -> None:
    data = _build([(1, None, bytes(200_000), [])], compression=codec)
    assert decode_batch(data, max_decompressed_size=300_000).records[0].value == bytes(200_000)
    with pytest.raises(InvalidRecordBatch, match="cannot decompress") as info:
        decode_batch(data, max_decompressed_size=100_000)
    assert isinstance(info.value.__cause__, DecompressionError)


# ---------------------------------------------------------------------------------- iter_batches


def _stream() -> tuple[bytes, list[bytes]]:
    batches = [
        _build(RICH_RECORDS[i : i + 2], compression=codec, base_offset=10 * i)
        for i, codec in enumerate(CODECS)
    ]
    return b"".join(batches), batches


def test_iter_batches_decodes_consecutive_batches() -> None:
    stream, batches = _stream()
    decoded = list(iter_batches(stream))
    assert [b.compression for b in decoded] == CODECS
    assert [b.base_offset for b in decoded] == [0, 10, 20, 30, 40]
    for batch, raw in zip(decoded, batches, strict=True):
        assert _as_tuples(batch.records) == _as_tuples(decode_batch(raw).records)
    assert len(list(iter_batches(memoryview(stream)))) == len(batches)
    assert len(list(iter_batches(bytearray(stream)))) == len(batches)
    assert [position for position, _ in iter_headers(stream, check_crc=True)] == [
        sum(len(b) for b in batches[:i]) for i in range(len(batches))
    ]


@pytest.mark.parametrize("keep", [1, 11, 12, 40, HEADER_SIZE, HEADER_SIZE + 5, -1])
def test_iter_batches_ignores_trailing_partial_batch(keep: int) -> None:
    _, batches = _stream()
    complete = b"".join(batches[:3])
    partial = batches[3][:keep]
    assert len(partial) < len(batches[3])
    decoded = list(iter_batches(complete + partial))
    assert [b.base_offset for b in decoded] == [0, 10, 20]
    assert list(iter_batches(b"")) == []
    assert list(iter_batches(partial)) == []


def test_iter_batches_raises_for_corrupt_complete_batch() -> None:
    _, batches = _stream()
    corrupt = bytearray(batches[1])
    corrupt[-1] ^= 0xFF
    stream = batches[0] + bytes(corrupt) + batches[2]
    iterator = iter_batches(stream)
    assert next(iterator).base_offset == 0
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        next(iterator)


def test_iter_batches_raises_for_bad_batch_length() -> None:
    _, batches = _stream()
    bad = bytearray(batches[1])
    struct.pack_into(">i", bad, 8, 10)  # batch_length below the header size
    with pytest.raises(InvalidRecordBatch):
        list(iter_batches(batches[0] + bytes(bad) + batches[2]))
