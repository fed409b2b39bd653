"""The seeds' message formats (magic 0 and 1), read by kctl.records.legacy and the offline log tools,
checked against messages written by kafka-python's legacy builder (an independent implementation)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kctl.records.legacy import InvalidLegacyMessage, iter_messages, parse_message, records_of

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def message_set(magic: int, codec: str, first_offset: int, count: int) -> bytes:
    """``count`` records starting at absolute offset ``first_offset``, as an old broker stored them:
    one message each, or one compressed wrapper whose offset is the last inner offset's (inner
    offsets absolute with magic 0, relative with magic 1)."""
    compressed = codec != "none"
    relative = compressed and magic == 1
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
    for i in range(count):
        key = None if i % 3 == 0 else b"key-%d" % i
        offset = i if relative else first_offset + i
        builder.append(offset, timestamp=T0 + i if magic else None, key=key, value=b"value-%d" % i)
    data = bytearray(builder.build())
    if compressed:  # the broker gives the wrapper the absolute offset of its last record
        struct.pack_into(">q", data, 0, first_offset + count - 1)
    return bytes(data)


# lz4 with magic 0 used Kafka's broken frame checksum (KAFKA-3160): neither written nor read here.
@pytest.mark.parametrize(
    ("magic", "codec"), [(m, c) for m in (0, 1) for c in CODECS if (m, c) != (0, "lz4")]
)
def test_records_read_as_kafka_python_wrote_them(magic: int, codec: str) -> None:
    data = message_set(magic, codec, 100, 5) + message_set(magic, codec, 105, 3)
    records = [r for m in iter_messages(data) for r in records_of(m)]
    assert [r.offset for r in records] == list(range(100, 108))
    assert [r.value for r in records] == [b"value-%d" % i for i in (0, 1, 2, 3, 4, 0, 1, 2)]
    assert [r.key for r in records][:3] == [None, b"key-1", b"key-2"]
    expected_ts = [T0 + i for i in (0, 1, 2, 3, 4, 0, 1, 2)] if magic else [-1] * 8
    assert [r.timestamp for r in records] == expected_ts
    assert all(m.crc_ok and m.magic == magic for m in iter_messages(data))


def test_damage_is_reported() -> None:
    data = bytearray(message_set(1, "none", 0, 2))
    data[-1] ^= 0xFF
    assert not iter_messages(bytes(data))[-1].crc_ok
    with pytest.raises(InvalidLegacyMessage, match="truncated"):
        parse_message(bytes(data[:-3]), iter_messages(bytes(data))[0].size)


def kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60)


def test_log_dump_and_verify_read_an_old_brokers_segment(tmp_path: Path) -> None:
    partition = tmp_path / "old_topic_0"
    partition.mkdir()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(
        message_set(0, "none", 0, 3) + message_set(0, "gzip", 3, 4) + message_set(1, "snappy", 7, 3)
    )
    dump = kctl("log", "dump", str(partition), "--deep", "-f", "jsonl")
    assert dump.returncode == 0, dump.stderr
    entries = [json.loads(line) for line in dump.stdout.splitlines()]
    assert [(e["magic"], e["compression"], e["base_offset"], e["last_offset"]) for e in entries] == [
        (0, "none", 0, 0), (0, "none", 1, 1), (0, "none", 2, 2), (0, "gzip", 3, 6), (1, "snappy", 7, 9),
    ]  # fmt: skip
    values = [r["value"] for e in entries for r in e["records"]]
    assert values == [f"value-{i}" for i in (0, 1, 2, 0, 1, 2, 3, 0, 1, 2)]
    verify = kctl("log", "verify", str(partition))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "5 batch(es), 10 record(s)" in verify.stderr

    refused = kctl("log", "recover", str(partition))
    assert refused.returncode == 2 and "magic 0/1" in refused.stderr
    assert not list(partition.glob("*.cut")), "recover touched nothing"

    damaged = bytearray(segment.read_bytes())
    damaged[28] ^= 0x01  # inside the first message's value
    segment.write_bytes(bytes(damaged))
    bad = kctl("log", "verify", str(partition), "-f", "jsonl")
    assert bad.returncode == 1
    assert "CRC-32 mismatch" in json.loads(bad.stdout.splitlines()[0])["problem"]
