"""`kctl log dump|verify|recover|purge` run as a real process against real files."""

from __future__ import annotations

import itertools
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_batch
from kafka.record.default_records import DefaultRecordBatchBuilder

from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.log.manager import LogManager

T0 = 1_700_000_000_000


def kctl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def jsonl(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    """A kctl-written partition: 3 segments of 4 batches of 10 records, indexed every 500 bytes."""
    batch = make_batch(10)
    log = Log(
        tmp_path / "my_topic_0",
        TopicPartition("my_topic", 0),
        LogConfig().with_overrides({"segment.bytes": str(len(batch) * 4), "index.interval.bytes": "500"}),
        needs_recovery=False,
    )
    for i in range(12):
        log.append(make_batch(10, timestamp=T0 + i * 1000, value_size=100))
    log.close()
    return log.directory


def independent_segment(directory: Path, batches: int = 50) -> Path:
    """A segment written with kafka-python's RecordBatch builder (an independent Kafka implementation),
    with offsets assigned as a broker would, and no index files."""
    directory.mkdir(parents=True)
    path = directory / "00000000000000000000.log"
    offset = 0
    with open(path, "wb") as handle:
        for i in range(batches):
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=[0, 1, 2, 3, 4][i % 5],
                is_transactional=False,
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
                batch_size=1 << 20,
            )
            for j in range(7):
                builder.append(
                    j,
                    timestamp=T0 + offset + j,
                    key=b"k%d" % (offset + j),
                    value=bytes([j]) * 50,
                    headers=[("h", b"\xff\x00")],
                )
            data = bytearray(builder.build())
            struct.pack_into(">q", data, 0, offset)  # base offset, outside the CRC
            handle.write(data)
            offset += 7
    return path


def test_dump_lists_every_batch(partition):
    result = kctl("log", "dump", str(partition), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    batches = jsonl(result.stdout)
    assert [b["base_offset"] for b in batches] == list(range(0, 120, 10))
    assert {b["type"] for b in batches} == {"batch"}
    assert all(b["valid"] and b["count"] == 10 and b["compression"] == "none" for b in batches)
    assert batches[0]["crc"] == batches[0]["crc_computed"]
    assert batches[5]["first_timestamp"] == T0 + 5000


def test_dump_deep_decodes_records_binary_safely(tmp_path):
    path = independent_segment(tmp_path / "ind_0", batches=5)
    result = kctl("log", "dump", str(path), "--deep", "--format", "json")
    assert result.returncode == 0, result.stderr
    documents = json.loads(result.stdout)
    assert [d["compression"] for d in documents] == ["none", "gzip", "snappy", "lz4", "zstd"]
    record = documents[3]["records"][2]
    assert record["offset"] == 23 and record["key"] == "k23"
    assert record["value"] == "\x02" * 50  # valid UTF-8 stays text
    assert record["headers"] == [["h", {"base64": "/wA="}]]


def test_dump_index_files(partition):
    result = kctl("log", "dump", str(partition / "00000000000000000000.index"), "--format", "jsonl")
    entries = jsonl(result.stdout)
    assert result.returncode == 0 and entries and {e["type"] for e in entries} == {"index"}
    result = kctl("log", "dump", str(partition / "00000000000000000000.timeindex"), "--format", "jsonl")
    entries = jsonl(result.stdout)
    assert entries and {e["type"] for e in entries} == {"timeindex"}
    assert all(a["timestamp"] < b["timestamp"] for a, b in itertools.pairwise(entries))


def test_dump_table_goes_to_stdout(partition):
    result = kctl("log", "dump", str(partition))
    assert result.returncode == 0
    assert "BASE" in result.stdout and "00000000000000000040.log" in result.stdout
    assert "KiB" in result.stdout and "2023-11-14T22:13:20.000Z" in result.stdout  # human sizes, ISO times
    exact = kctl("log", "dump", str(partition), "--bytes")
    batch_size = len(make_batch(10, value_size=100))
    assert "KiB" not in exact.stdout and f" {batch_size} " in exact.stdout


def test_kctl_written_and_independent_segments_verify_clean(partition, tmp_path):
    independent = independent_segment(tmp_path / "ind_0").parent
    result = kctl("log", "verify", str(partition), str(independent))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "4 segment(s), 62 batch(es), 470 record(s)" in result.stderr and "clean" in result.stderr


def _damage(segment: Path, kind: str) -> None:
    size = segment.stat().st_size
    with open(segment, "r+b") as handle:
        if kind == "truncated":
            handle.truncate(size - 30)
        elif kind == "flipped":
            handle.seek(size // 2)
            byte = handle.read(1)
            handle.seek(size // 2)
            handle.write(bytes([byte[0] ^ 0x40]))
        else:
            handle.seek(size)
            handle.write(b"garbage!" * 20)


@pytest.mark.parametrize("kind", ["truncated", "flipped", "garbage"])
def test_corruption_is_found_then_recovered(partition, kind):
    last = partition / "00000000000000000080.log"
    original = last.read_bytes()
    _damage(last, kind)
    batch_size = len(original) // 4

    verify = kctl("log", "verify", str(partition), "--format", "jsonl")
    assert verify.returncode == 1
    findings = jsonl(verify.stdout)
    assert findings[0]["file"] == last.name and isinstance(findings[0]["position"], int)
    # the damaged segment's own indexes may point at the lost batches too; nothing else is flagged
    assert all(f["file"].startswith("00000000000000000080.") for f in findings)

    dry = kctl("log", "recover", str(partition), "--dry-run", "--format", "jsonl")
    assert dry.returncode == 1
    assert last.stat().st_size != batch_size * 2 or kind == "flipped"  # nothing changed yet

    result = kctl("log", "recover", str(partition), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    steps = {row["file"]: row for row in jsonl(result.stdout)}
    kept_batches = {"truncated": 3, "flipped": 2, "garbage": 4}[kind]
    assert steps[last.name]["action"] == "truncate"
    assert steps[last.name]["kept_bytes"] == kept_batches * batch_size
    assert last.read_bytes() == original[: kept_batches * batch_size]
    side = Path(steps[last.name]["side_file"])
    assert side.exists() and side.stat().st_size == steps[last.name]["cut_bytes"]
    assert steps["00000000000000000000.log"]["action"] == "keep"

    again = kctl("log", "verify", str(partition))
    assert again.returncode == 0, again.stdout + again.stderr


def test_recover_rebuilds_a_damaged_index(partition):
    index = partition / "00000000000000000040.index"
    index.write_bytes(index.read_bytes()[:-8] + struct.pack(">ii", 5, 123))  # points mid-batch
    assert kctl("log", "verify", str(partition)).returncode == 1
    assert kctl("log", "recover", str(partition)).returncode == 0
    assert kctl("log", "verify", str(partition)).returncode == 0


def test_recover_refuses_while_a_broker_holds_the_directory(partition):
    with LogManager([partition.parent], broker_id=0):
        result = kctl("log", "recover", str(partition))
    assert result.returncode == 1 and "locked" in result.stderr


def test_purge_by_offset_size_and_age(partition):
    dry = kctl("log", "purge", str(partition), "--before-offset", "45", "--dry-run", "--format", "jsonl")
    assert dry.returncode == 0
    assert [row["base_offset"] for row in jsonl(dry.stdout)] == [0]
    assert (partition / "00000000000000000000.log").exists()

    result = kctl("log", "purge", str(partition), "--before-offset", "45", "--format", "jsonl")
    assert [row["base_offset"] for row in jsonl(result.stdout)] == [0]
    # what happens, not the requested number as if it were the new start (segments go whole)
    assert [row["detail"] for row in jsonl(result.stdout)] == ["every offset in it (0..39) is below 45"]
    assert not (partition / "00000000000000000000.log").exists()

    segment_size = (partition / "00000000000000000040.log").stat().st_size
    result = kctl(
        "log", "purge", str(partition), "-X", f"retention.bytes={segment_size}", "--format", "jsonl"
    )
    assert [row["base_offset"] for row in jsonl(result.stdout)] == [40]
    assert sorted(p.name for p in partition.glob("*.log")) == ["00000000000000000080.log"]

    result = kctl("log", "purge", str(partition), "--retention-ms", "1000", "--format", "jsonl")
    assert result.returncode == 0
    assert [row["reason"] for row in jsonl(result.stdout)] == ["retention.ms"]
    assert kctl("log", "verify", str(partition)).returncode == 0


def test_purge_refuses_an_offset_past_the_log_end(partition):
    """Issue 25: --before-offset past the log end deleted every segment, the active one too (exit 0).
    It is refused, dry run or not, and nothing is deleted; the log end offset itself is explicit."""
    before = sorted(p.name for p in partition.iterdir())
    for extra in (["--dry-run"], []):
        refused = kctl("log", "purge", str(partition), "--before-offset", "999999", *extra)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        [line] = refused.stderr.splitlines()
        assert "999999 is past the log end offset" in line and "(120)" in line and "nothing deleted" in line
        assert sorted(p.name for p in partition.iterdir()) == before
    everything = kctl("log", "purge", str(partition), "--before-offset", "120", "--format", "jsonl")
    assert everything.returncode == 0, everything.stderr
    assert [row["base_offset"] for row in jsonl(everything.stdout)] == [0, 40, 80]


@pytest.mark.parametrize("tool", [["recover"], ["recover", "--dry-run"], ["purge", "--before-offset", "5"]])
def test_recover_and_purge_refuse_a_directory_without_segments(tmp_path, tool):
    """A log directory's root (or any directory without segments) is not a partition: recover and
    purge wrote an empty segment and a snapshot into it and exited 0. They refuse it (exit 3)."""
    log_dir = tmp_path / "logs"
    (log_dir / "orders_0").mkdir(parents=True)
    (log_dir / "meta.properties").write_text("broker.id=0\n")
    result = kctl("log", *tool, str(log_dir))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "holds no segment file" in result.stderr
    assert sorted(p.name for p in log_dir.iterdir()) == ["meta.properties", "orders_0"]


def test_usage_and_missing_paths(tmp_path):
    assert kctl("log", "purge", str(tmp_path)).returncode == 2
    assert kctl("log", "verify", str(tmp_path / "nope")).returncode == 3
    assert kctl("log", "dump", str(tmp_path / "nope_0")).returncode == 3
    bad = tmp_path / "notes.txt"
    bad.write_text("x")
    assert kctl("log", "dump", str(bad)).returncode == 2
    assert kctl("log", "verify", str(tmp_path), "-X", "no.such.key=1").returncode == 2


def _idempotent_batch(producer_id: int, sequence: int, count: int = 3) -> bytes:
    from kctl.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=2, base_sequence=sequence)
    for i in range(count):
        builder.append(T0 + sequence + i, None, b"v%d" % i)
    return builder.build()


def test_dump_a_producer_snapshot(tmp_path):
    log = Log(tmp_path / "idem_0", TopicPartition("idem", 0), LogConfig(), needs_recovery=False)
    for sequence in range(0, 21, 3):  # producer 7: seven batches, the snapshot keeps the last five
        log.append(_idempotent_batch(7, sequence))
    log.append(_idempotent_batch(9, 0, count=2))
    log.close()
    [snapshot] = sorted(log.directory.glob("*.snapshot"))
    result = kctl("log", "dump", str(snapshot), "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert {r["type"] for r in rows} == {"snapshot"}
    assert [
        (r["producer_id"], r["producer_epoch"], r["first_sequence"], r["first_offset"]) for r in rows
    ] == [
        (7, 2, 6, 6),
        (7, 2, 9, 9),
        (7, 2, 12, 12),
        (7, 2, 15, 15),
        (7, 2, 18, 18),
        (9, 2, 0, 21),
    ]
    assert (rows[-1]["last_sequence"], rows[-1]["last_offset"]) == (1, 22)
    table = kctl("log", "dump", str(snapshot))
    assert table.returncode == 0 and table.stdout.split()[:3] == ["PRODUCER-ID", "EPOCH", "FIRST-SEQ"]

    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    torn = kctl("log", "dump", str(snapshot))
    assert torn.returncode == 1 and "cannot be trusted" in torn.stderr and torn.stdout == ""


def test_dump_and_verify_leader_epochs_and_the_replication_checkpoint(tmp_path):
    manager = LogManager([tmp_path], broker_id=0, high_watermark_follows_log_end=False)
    log = manager.get_or_create_log(TopicPartition("rep", 0))
    for epoch in (0, 0, 3, 4):
        log.append(make_batch(10), leader_epoch=epoch)
    log.update_high_watermark(25)
    manager.close()
    partition = tmp_path / "rep_0"
    epochs = partition / "leader-epoch-checkpoint"

    batches = jsonl(kctl("log", "dump", str(partition), "-f", "jsonl").stdout)
    assert [(b["base_offset"], b["leader_epoch"]) for b in batches] == [(0, 0), (10, 0), (20, 3), (30, 4)]
    result = kctl("log", "dump", str(epochs), "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    assert [(r["type"], r["epoch"], r["start_offset"]) for r in jsonl(result.stdout)] == [
        ("leader_epoch", 0, 0),
        ("leader_epoch", 3, 20),
        ("leader_epoch", 4, 30),
    ]
    table = kctl("log", "dump", str(epochs))
    assert table.returncode == 0 and "START-OFFSET" in table.stdout
    result = kctl("log", "dump", str(tmp_path / "replication-offset-checkpoint"), "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    assert [(r["topic"], r["partition"], r["offset"]) for r in jsonl(result.stdout)] == [("rep", 0, 25)]

    assert kctl("log", "verify", str(partition), str(epochs)).returncode == 0
    epochs.write_text("0\n2\n0 0\n9 55\n")  # an epoch starting past the log end offset (40)
    result = kctl("log", "verify", str(partition), "-f", "jsonl")
    assert result.returncode == 1
    [finding] = jsonl(result.stdout)
    assert finding["file"] == "leader-epoch-checkpoint" and "past the log end offset 40" in finding["problem"]
    epochs.write_text("0\n2\n3 0\n1 5\n")  # epochs going down
    result = kctl("log", "verify", str(epochs), "-f", "jsonl")
    assert result.returncode == 1 and "cannot be trusted" in jsonl(result.stdout)[0]["problem"]
    assert kctl("log", "dump", str(epochs)).returncode == 1


def test_verify_a_log_dir_checks_each_partition_and_an_empty_dir_is_not_clean(partition, tmp_path):
    log_dir = partition.parent  # my_topic_0 beside the test's other files: a log directory
    independent_segment(log_dir / "other_1")
    clean = kctl("log", "verify", str(log_dir))
    assert clean.returncode == 0, clean.stderr
    assert "4 segment(s), 62 batch(es), 470 record(s)" in clean.stderr and "clean" in clean.stderr

    _damage(partition / "00000000000000000080.log", "garbage")
    damaged = kctl("log", "verify", str(log_dir), "--format", "jsonl")
    assert damaged.returncode == 1
    assert {f["path"] for f in jsonl(damaged.stdout)} == {str(partition)}

    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = kctl("log", "verify", str(empty))
    assert nothing.returncode == 3
    assert "nothing to verify" in nothing.stderr and "clean" not in nothing.stderr


def test_dump_offsets_decoder_reads_consumer_offsets_records(tmp_path):
    """`--offsets-decoder` (Kafka's name) decodes offset commits, group metadata and tombstones."""
    from kctl.broker.group.records import (
        GroupKey,
        GroupValue,
        OffsetKey,
        OffsetValue,
        encode_group_key,
        encode_group_value,
        encode_offset_key,
        encode_offset_value,
    )

    directory = tmp_path / "__consumer_offsets_7"
    log = Log(directory, TopicPartition("__consumer_offsets", 7), LogConfig(), needs_recovery=False)
    keys = [
        encode_offset_key(OffsetKey("billing", "orders", 3)),
        encode_group_key(GroupKey("billing")),
        encode_offset_key(OffsetKey("billing", "orders", 4)),
        b"\x00\x09junk",
    ]
    values = [
        encode_offset_value(OffsetValue(offset=42, metadata="", commit_timestamp=T0)),
        encode_group_value(GroupValue(protocol_type="consumer", generation=5, members=[])),
        None,
        b"whatever",
    ]
    log.append(make_batch(4, keys=keys, values=values))
    log.close()

    result = kctl("log", "dump", str(directory), "--offsets-decoder", "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    [batch] = jsonl(result.stdout)
    commit, group, tombstone, junk = batch["records"]
    assert commit["key"] == {"group": "billing", "topic": "orders", "partition": 3}
    assert commit["value"]["offset"] == 42 and commit["value"]["commit_timestamp"] == T0
    assert group["key"] == {"group": "billing"} and group["value"]["generation"] == 5
    assert tombstone["key"]["partition"] == 4 and tombstone["value"] is None
    assert "not a __consumer_offsets record" in junk["error"]
    table = kctl("log", "dump", str(directory), "--offsets-decoder")
    assert table.returncode == 0 and "billing" in table.stdout and "2023-11-14T22:13:20" in table.stdout
