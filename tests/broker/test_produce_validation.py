"""Produce validation (issue #17 "Produce accepts batches that do not decode", issue #16 per-record
errors and max-timestamp): what the log refuses on append, what the broker answers (CORRUPT_MESSAGE,
INVALID_RECORD with ``record_errors``, INVALID_TIMESTAMP), that ``kctl log verify`` flags such batches
when they reach a segment anyway, and ListOffsets' max-timestamp answer inside a batch.

In-process Log tests for the rules; the handlers' answers in test_produce_validation_handlers.py (on
kctl.testing's in-process broker); one module broker for what confluent-kafka makes of them."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_batch
from raw_kafka import create_topic, running_broker, unique

from kctl.log.log import Log
from kctl.log.validation import RecordBatchTooLargeError
from kctl.log.verify import verify
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    RECORDS_COUNT_OFFSET,
    InvalidRecordBatch,
    write_crc,
)
from kctl.records.validate import InvalidRecordError, RecordValidationError
from kctl.testing import BrokerProcess

NONE, CORRUPT_MESSAGE, INVALID_TIMESTAMP, INVALID_RECORD = 0, 2, 32, 87
T0 = 1_700_000_000_000


def patched(batch: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``batch`` with the field at ``offset`` overwritten and the CRC made valid again (a producer's
    bug, not corruption: only validation can catch it)."""
    data = bytearray(batch)
    struct.pack_into(fmt, data, offset, value)
    write_crc(data, 0, len(data))
    return bytes(data)


def with_records(batch: bytes, records: bytes, count: int | None = None) -> bytes:
    """``batch``'s header over another records section (length, count and CRC fixed up)."""
    data = bytearray(batch[:HEADER_SIZE] + records)
    struct.pack_into(">i", data, 8, len(data) - 12)
    if count is not None:
        struct.pack_into(">i", data, RECORDS_COUNT_OFFSET, count)
    write_crc(data, 0, len(data))
    return bytes(data)


def bad_batches() -> dict[str, tuple[bytes, type[Exception]]]:
    good = make_batch(3, value_size=20)
    codec_six = patched(good, ATTRIBUTES_OFFSET, ">h", 6)
    huge = patched(
        patched(good, LAST_OFFSET_DELTA_OFFSET, ">i", 2**31 - 2), RECORDS_COUNT_OFFSET, ">i", 2**31 - 1
    )
    bad_length = bytearray(good)
    bad_length[HEADER_SIZE] = 0x7E  # the first record's length varint: 63, past the section
    write_crc(bad_length, 0, len(bad_length))
    return {
        "codec 6": (codec_six, InvalidRecordBatch),
        "count 2^31-1 in 70 bytes": (huge, InvalidRecordBatch),
        "count above the records": (
            patched(patched(good, RECORDS_COUNT_OFFSET, ">i", 4), LAST_OFFSET_DELTA_OFFSET, ">i", 3),
            InvalidRecordBatch,
        ),
        "count disagrees with delta": (patched(good, RECORDS_COUNT_OFFSET, ">i", 2), InvalidRecordError),
        "record length runs past": (bytes(bad_length), InvalidRecordBatch),
        "empty records section": (with_records(good, b""), InvalidRecordBatch),
        "trailing garbage in records": (
            with_records(good, good[HEADER_SIZE:] + b"\x00\x00"),
            InvalidRecordBatch,
        ),
        "gzip garbage": (
            with_records(patched(good, ATTRIBUTES_OFFSET, ">h", 1), b"\x1f\x8bnot gzip"),
            InvalidRecordBatch,
        ),
        "zero records": (
            patched(patched(good, RECORDS_COUNT_OFFSET, ">i", 0), LAST_OFFSET_DELTA_OFFSET, ">i", 0),
            InvalidRecordError,
        ),
    }


BAD = bad_batches()


@pytest.mark.parametrize("name", list(BAD))
def test_the_log_refuses_batches_that_do_not_decode(open_log, name: str) -> None:
    log = open_log()
    log.append(make_batch(3))
    batch, error = BAD[name]
    with pytest.raises(error):
        log.append(batch)
    assert log.log_end_offset == 3  # nothing moved
    assert log.append(make_batch(2)).first_offset == 3


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_well_formed_batches_of_every_codec_are_accepted(open_log, codec: str) -> None:
    log = open_log()
    info = log.append(make_batch(50, compression=codec))
    assert (info.first_offset, info.last_offset) == (0, 49)


def test_a_decompression_bomb_is_refused(open_log) -> None:
    log = open_log({"max.message.bytes": "4096"})
    builder = RecordBatchBuilder(compression="zstd")
    builder.append(T0, b"k", b"\x00" * (40 * 1024 * 1024))  # 40 MiB of zeros: a few KiB compressed
    bomb = builder.build()
    assert len(bomb) < 4096
    with pytest.raises(InvalidRecordBatch, match="decompress"):
        log.append(bomb)
    with pytest.raises(RecordBatchTooLargeError):
        log.append(make_batch(1, value_size=5000))


def test_verify_flags_batches_that_bypassed_validation(open_log, tmp_path: Path) -> None:
    log = open_log()
    log.append(make_batch(3))
    log.close()
    segment = tmp_path / "topic_0" / f"{0:020d}.log"
    for name, (batch, _) in BAD.items():
        if name in ("empty records section", "zero records"):
            continue
        data = bytearray(batch)
        struct.pack_into(">q", data, 0, 3)  # offsets continue the log
        with segment.open("ab") as handle:
            handle.write(data)
        report = verify(tmp_path / "topic_0")
        assert not report.clean, name
        assert any(f.position == 0 or f.offset == 3 for f in report.findings), (name, report.findings)
        with segment.open("r+b") as handle:
            handle.truncate(segment.stat().st_size - len(data))
    assert verify(tmp_path / "topic_0").clean


def test_offset_deltas_that_are_not_the_records_indexes_are_refused_where_records_are_parsed(
    open_log,
) -> None:
    skipped = RecordBatchBuilder(compression="gzip")
    skipped.append(T0, b"a", b"1", offset_delta=0)
    skipped.append(T0, b"b", b"2", offset_delta=2)
    batch = patched(skipped.build(), LAST_OFFSET_DELTA_OFFSET, ">i", 1)  # 2 records, deltas 0 and 2
    with pytest.raises(InvalidRecordError, match="offset delta 2"):
        open_log({"cleanup.policy": "compact"}).append(batch)


def test_compacted_topic_refuses_keyless_records_with_record_errors(open_log) -> None:
    log = open_log({"cleanup.policy": "compact"})
    batch = make_batch(4, keys=[b"a", None, b"c", None], values=[b"1", b"2", b"3", b"4"])
    with pytest.raises(RecordValidationError) as caught:
        log.append(batch)
    assert [e.batch_index for e in caught.value.record_errors] == [1, 3]
    assert not caught.value.invalid_timestamp
    assert log.log_end_offset == 0
    assert log.append(make_batch(2)).last_offset == 1


def test_timestamps_outside_the_configured_bounds_are_refused(open_log, clock) -> None:
    log = open_log({"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"})
    now = clock.time_ms()
    builder = RecordBatchBuilder()
    for timestamp in (now, now - 5000, now + 400, now + 600):
        builder.append(timestamp, b"k", b"v")
    with pytest.raises(RecordValidationError) as caught:
        log.append(builder.build())
    assert caught.value.invalid_timestamp
    assert [e.batch_index for e in caught.value.record_errors] == [1, 3]
    assert "out of range" in caught.value.record_errors[0].message
    log.append(make_batch(2, timestamp=now))
    append_time = open_log(
        {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1"}
    )
    append_time.append(make_batch(1, timestamp=0))  # LogAppendTime: the producer's timestamps are not checked


def test_max_timestamp_offset_is_the_record_inside_the_batch(open_log, tmp_path: Path) -> None:
    log = open_log()
    builder = RecordBatchBuilder()
    for timestamp in (T0, T0 + 50, T0 + 10, T0 + 50, T0 + 20):
        builder.append(timestamp, b"k", b"v")
    log.append(make_batch(3, timestamp=T0 - 100))
    log.append(builder.build())
    log.append(make_batch(2, timestamp=T0 - 10))
    assert log.max_timestamp_and_offset() == (T0 + 50, 4)  # offsets 3..7: the first T0+50 is 4
    log.close()
    reopened = Log(log.directory, log.topic_partition, log.config, needs_recovery=False)
    assert reopened.max_timestamp_and_offset() == (T0 + 50, 4)
    assert verify(log.directory).clean
    reopened.close()
    recovered = Log(log.directory, log.topic_partition, log.config, needs_recovery=True)  # indexes rebuilt
    assert recovered.max_timestamp_and_offset() == (T0 + 50, 4)
    recovered.close()


def test_a_wrong_create_time_max_timestamp_is_corrected(open_log) -> None:
    # timestamps are read where records are fully walked: here, with a timestamp bound configured
    log = open_log({"message.timestamp.before.max.ms": str(10**12)})
    batch = patched(make_batch(3, timestamp=T0, compression="gzip"), MAX_TIMESTAMP_OFFSET, ">q", T0 - 1)
    log.append(batch)
    assert log.max_timestamp_and_offset() == (T0 + 2, 2)


# ----------------------------------------------------------------------------------------- the broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"auto.create.topics.enable": "false"}, "validation") as process:
        yield process


def test_confluent_kafka_reports_the_keyless_record(broker: BrokerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    compacted = unique("compacted-ck")
    assert create_topic(broker.bootstrap, compacted, configs={"cleanup.policy": "compact"}) == NONE
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    outcomes: list = []
    producer.produce(compacted, value=b"no key", on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(30) == 0
    producer.produce(compacted, key=b"k", value=b"keyed", on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(30) == 0
    assert outcomes[0] is not None and outcomes[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert outcomes[1] is None
