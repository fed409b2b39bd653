"""compression.type: the broker re-compresses batches whose codec differs from the topic's, keeping
every record and header field (kctl.log.recompress, hooked into Log.append); end to end, a gzip
producer into a zstd topic: `kctl log dump` shows zstd batches, the producer got the right offsets
and consumers read the records unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.log.recompress import recompress_batches
from kctl.records.builder import RecordBatchBuilder
from kctl.records.compression import CompressionType
from kctl.records.header import InvalidRecordBatch, parse_header, validate_batch
from kctl.records.reader import decode_batch, iter_batches

T0 = 1_700_000_000_000


def batch(codec: str, count: int = 20, **kwargs: Any) -> bytes:
    builder = RecordBatchBuilder(compression=codec, **kwargs)
    for i in range(count):
        builder.append(T0 + i, b"key-%d" % i, b"value-%d " % i * 20, [("h", b"%d" % i)])
    return builder.build()


def records_of(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, Any]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers))
        for b in iter_batches(data)
        for r in b.records
    ]


@pytest.mark.parametrize("source", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("target", list(CompressionType))
def test_recompress_keeps_records_and_header_fields(source: str, target: CompressionType) -> None:
    original = batch(
        source, producer_id=7, producer_epoch=2, base_sequence=40, partition_leader_epoch=3, base_offset=9
    )
    rewritten = bytes(recompress_batches(original, target))
    header, before = validate_batch(rewritten), parse_header(original)
    assert header.compression == target
    for field in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ):
        assert getattr(header, field) == getattr(before, field), field
    assert records_of(rewritten) == records_of(original)
    if source == target.label:
        assert rewritten == original  # already in the codec: copied as it is


def test_several_batches_only_those_in_another_codec_change() -> None:
    zstd, gzip = batch("zstd", 3), batch("gzip", 4, base_offset=3)
    rewritten = bytes(recompress_batches(zstd + gzip, CompressionType.ZSTD))
    assert rewritten[: len(zstd)] == zstd
    assert [b.header.compression for b in iter_batches(rewritten)] == [CompressionType.ZSTD] * 2


def test_bad_batches_are_refused() -> None:
    good = bytearray(batch("gzip"))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidRecordBatch, match="CRC"):
        recompress_batches(corrupt, CompressionType.ZSTD)
    # a records section that does not hold records_count records (CRC made right)
    lying = bytearray(batch("none", 3))
    lying[57:61] = (5).to_bytes(4, "big")
    from kctl.records.header import write_crc

    write_crc(lying, 0, len(lying))
    with pytest.raises(InvalidRecordBatch):
        recompress_batches(lying, CompressionType.LZ4)


def test_log_append_recompresses_for_the_topic(open_log: Any) -> None:
    log = open_log({"compression.type": "zstd", "compression.zstd.level": "10"})
    first = log.append(batch("gzip", 5))
    second = log.append(batch("zstd", 5))
    third = log.append(batch("none", 5))
    assert [(i.first_offset, i.last_offset) for i in (first, second, third)] == [(0, 4), (5, 9), (10, 14)]
    data = log.read_bytes(0, 1 << 20)
    assert [b.header.compression for b in iter_batches(data)] == [CompressionType.ZSTD] * 3
    assert [r[0] for r in records_of(data)] == list(range(15))
    # producer keeps the producer's codec
    kept = open_log({"compression.type": "producer"}, needs_recovery=False)
    assert kept.config.compression_type == "producer"


def test_log_append_uncompressed_topic(open_log: Any) -> None:
    log = open_log({"compression.type": "uncompressed"})
    log.append(batch("lz4", 5))
    [decoded] = list(iter_batches(log.read_bytes(0, 1 << 20)))
    assert decoded.header.compression == CompressionType.NONE
    assert decode_batch(log.read_bytes(0, 1 << 20)).records[4].key == b"key-4"


# -- end to end ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def module_broker(module_broker_factory: Any) -> Any:
    return module_broker_factory()


def test_gzip_producer_into_zstd_topic(module_broker: Any, tmp_path: Path) -> None:
    bootstrap = str(module_broker.bootstrap)
    topic = f"zstd-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "zstd"})])[topic].result(15)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "gzip",
            "linger.ms": 50,
            "enable.idempotence": True,
        }
    )
    offsets: list[int] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        offsets.append(message.offset())

    sent = [(b"k%d" % i, b"payload %d " % i * 30) for i in range(200)]
    for key, value in sent:
        producer.produce(topic, value, key, callback=delivered)
    assert producer.flush(30) == 0
    assert sorted(offsets) == list(range(200))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[tuple[int, bytes, bytes]] = []
    try:
        for _ in range(200):
            if len(received) == len(sent):
                break
            for message in consumer.consume(200, timeout=1.0):
                assert message.error() is None, message.error()
                received.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert [(k, v) for _, k, v in sorted(received)] == sent

    partition_dir = Path(module_broker.data_dir) / f"{topic}_0"
    dump = subprocess.run(
        [sys.executable, "-m", "kctl", "log", "dump", str(partition_dir), "-f", "jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dump.returncode == 0, dump.stderr
    batches = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    batches = [b for b in batches if b.get("type") == "batch"]
    assert batches and {b["compression"] for b in batches} == {"zstd"}
