"""Start-up and recovery after damage that a clean shutdown marker does not explain (issue #17):
garbage appended to a segment, a flipped magic byte in the last batch, a garbage ``.log.swap``, a
middle segment truncated to 0 bytes, and a decompression bomb on a compacted topic. The broker's
LogManager must load (recovering the damaged log, logging what it cut), the offline tools must count
every byte they remove, and ``verify`` must report the gap. In-process; one real broker start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import make_batch
from raw_kafka import create_topic, produce, running_broker, unique

from kctl.common.topic_partition import TopicPartition
from kctl.log.cleaner import clean_log
from kctl.log.config import LogConfig
from kctl.log.manager import LogManager
from kctl.log.tools import recover
from kctl.log.verify import verify
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import MAGIC_OFFSET
from kctl.records.reader import iter_batches

TP = TopicPartition("damaged", 0)
BATCH = make_batch(10, value_size=50)


def written_dir(
    tmp_path: Path, batches: int = 6, segment_bytes: int | None = None, index_interval_bytes: int = 4096
) -> Path:
    """A log dir shut down cleanly holding ``batches`` batches of 10 records."""
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    if segment_bytes is not None:
        config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    with LogManager([tmp_path], default_config=config) as manager:
        log = manager.get_or_create_log(TP)
        for _ in range(batches):
            log.append(BATCH)
    return tmp_path


def segment_files(partition: Path) -> list[Path]:
    return sorted(partition.glob("*.log"))


def offsets_read(partition: Path) -> list[int]:
    data = b"".join(path.read_bytes() for path in segment_files(partition))
    return [record.offset for batch in iter_batches(data) for record in batch.records]


def load(log_dir: Path, config: LogConfig | None = None) -> tuple[int, list]:
    manager = LogManager([log_dir], default_config=config or LogConfig())
    try:
        log = manager.get_log(TP)
        assert log is not None
        return log.log_end_offset, list(log.recovery_plan)
    finally:
        manager.close()


@pytest.mark.parametrize("garbage", [b"\x00" * 7, b"garbage!" * 40, bytes(range(256)) * 3])
def test_garbage_after_a_clean_shutdown_is_recovered(tmp_path: Path, caplog, garbage: bytes) -> None:
    log_dir = written_dir(tmp_path)
    [segment] = segment_files(log_dir / "damaged_0")
    with segment.open("ab") as handle:
        handle.write(garbage)
    with caplog.at_level(logging.WARNING, logger="kctl.log"):
        end, plan = load(log_dir)
    assert end == 60
    assert [step.cut_bytes for step in plan] == [len(garbage)]
    assert "recovering from it" in caplog.text
    assert offsets_read(log_dir / "damaged_0") == list(range(60))  # garbage gone, nothing else
    assert load(log_dir)[0] == 60  # and the next clean start is clean


def test_a_flipped_magic_in_the_last_batch_is_recovered(tmp_path: Path, caplog) -> None:
    log_dir = written_dir(tmp_path)
    [segment] = segment_files(log_dir / "damaged_0")
    data = bytearray(segment.read_bytes())
    data[len(data) - len(BATCH) + MAGIC_OFFSET] = 88
    segment.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="kctl.log"):
        end, plan = load(log_dir)
    assert end == 50  # the valid prefix: the damaged last batch is cut
    assert plan[0].cut_bytes == len(BATCH)
    assert "unsupported magic 88" in caplog.text


def test_a_flipped_byte_in_the_last_batch_fails_its_crc_and_is_cut(tmp_path: Path) -> None:
    log_dir = written_dir(tmp_path)
    [segment] = segment_files(log_dir / "damaged_0")
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF
    segment.write_bytes(data)
    assert load(log_dir)[0] == 50


def test_a_garbage_swap_is_set_aside_not_trusted(tmp_path: Path, caplog) -> None:
    log_dir = written_dir(tmp_path, batches=6, segment_bytes=2 * len(BATCH))
    partition = log_dir / "damaged_0"
    first = segment_files(partition)[0]
    swap = first.with_name(first.name + ".swap")
    swap.write_bytes(b"\x00" * 12 + b"\xff" * 500)
    with caplog.at_level(logging.WARNING, logger="kctl.log"):
        end, _ = load(log_dir)
    assert end == 60
    assert offsets_read(partition) == list(range(60))
    assert not swap.exists()
    kept = first.with_name(first.name + ".swap.invalid")
    assert kept.read_bytes() == b"\x00" * 12 + b"\xff" * 500  # set aside, not deleted
    assert "set aside" in caplog.text


def test_recover_counts_a_set_aside_swap(tmp_path: Path) -> None:
    log_dir = written_dir(tmp_path, batches=6, segment_bytes=2 * len(BATCH))
    partition = log_dir / "damaged_0"
    first = segment_files(partition)[0]
    first.with_name(first.name + ".swap").write_bytes(b"garbage" * 100)
    planned = recover(partition, dry_run=True)
    assert planned.damaged and planned.cut_bytes == 700
    done = recover(partition)
    assert done.cut_bytes == 700
    assert [Path(kept).name for *_, kept in done.set_aside] == [first.name + ".swap.invalid"]
    assert offsets_read(partition) == list(range(60))


def test_a_valid_swap_is_completed(tmp_path: Path) -> None:
    log_dir = written_dir(tmp_path, batches=6, segment_bytes=2 * len(BATCH))
    partition = log_dir / "damaged_0"
    first = segment_files(partition)[0]
    only_second = first.read_bytes()[len(BATCH) :]  # a compaction output that dropped batch 0
    first.with_name(first.name + ".swap").write_bytes(only_second)
    assert load(log_dir)[0] == 60
    assert offsets_read(partition) == list(range(10, 60))


def test_verify_reports_a_middle_segment_truncated_to_zero(tmp_path: Path) -> None:
    log_dir = written_dir(tmp_path, batches=6, segment_bytes=2 * len(BATCH))
    partition = log_dir / "damaged_0"
    assert verify(partition).clean
    middle = segment_files(partition)[1]
    middle.write_bytes(b"")
    report = verify(partition)
    assert any("offset gap: offsets 20..39" in finding.problem for finding in report.findings), (
        report.findings
    )


def test_compaction_does_not_expand_a_decompression_bomb(open_log, clock, caplog) -> None:
    log = open_log({"cleanup.policy": "compact", "segment.bytes": "14"})
    builder = RecordBatchBuilder(compression="zstd", base_offset=0)
    builder.append(clock.time_ms(), b"k", b"\x00" * (48 * 1024 * 1024))  # 48 MiB: past the 32 MiB bound
    bomb = builder.build()
    log.append_as_follower(bomb)  # as a replica would: produce validation refuses it
    log.append(make_batch(1, keys=[b"k"], values=[b"newer"], timestamp=clock.time_ms()))
    log.roll()
    with caplog.at_level(logging.WARNING, logger="kctl.log.cleaner"):
        clean_log(log, clock)
    assert "cannot decode within 33554816 bytes" in caplog.text
    assert log.segments[0].read_batch_bytes(0, len(bomb)) == bomb  # kept unchanged


@pytest.mark.e2e
def test_a_broker_starts_after_damage_at_a_segment_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A real broker, stopped cleanly; the last batch's magic flipped and garbage appended: it starts,
    the valid prefix is kept, and the next produce continues from it."""
    with running_broker(tmp_path_factory, {"auto.create.topics.enable": "false"}, "damage") as broker:
        name = unique("damage")
        assert create_topic(broker.bootstrap, name) == 0
        for i in range(3):
            assert produce(broker.bootstrap, name, 0, make_batch(5)).base_offset == 5 * i
        broker.stop()
        [segment] = [p for p in Path(broker.data_dir).rglob(f"{name}_0/*.log")]
        data = bytearray(segment.read_bytes())
        data[len(data) - len(make_batch(5)) + MAGIC_OFFSET] = 88
        segment.write_bytes(bytes(data) + b"garbage" * 20)
        broker.start()
        part = produce(broker.bootstrap, name, 0, make_batch(5))
        assert (part.error_code, part.base_offset) == (0, 10)
        assert "recovering from it" in broker.log_tail(200)


@pytest.mark.parametrize("byte", [0, 7])
def test_a_flipped_base_offset_in_the_last_batch_is_recovered(tmp_path: Path, byte: int) -> None:
    """The base offset is outside the CRC: the batch still parses and checks, but its offsets do not
    rise (found by bench/bench_corruption.py: with index entries, the index rebuild crashed the load)."""
    log_dir = written_dir(tmp_path, index_interval_bytes=1)
    [segment] = segment_files(log_dir / "damaged_0")
    data = bytearray(segment.read_bytes())
    data[len(data) - len(BATCH) + byte] = 0xA5 if byte == 0 else 0  # negative, or not above 49
    segment.write_bytes(data)
    assert load(log_dir)[0] == 50
    assert offsets_read(log_dir / "damaged_0") == list(range(50))


def test_verify_accepts_the_gaps_of_a_compacted_partition(tmp_path: Path, clock) -> None:
    """Compaction removes whole batches: the gaps it leaves are no finding, because the log dir's
    cleaner-offset-checkpoint names the partition as compacted."""
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=2 * len(BATCH))
    with LogManager([tmp_path], default_config=config) as manager:
        log = manager.get_or_create_log(TP)
        for number in range(6):  # even batches repeat keys (the older ones go whole), odd ones do not
            log.append(make_batch(10, value_size=50, start=0 if number % 2 == 0 else 100 * number))
        assert clean_log(log, clock).records_removed
    assert offsets_read(tmp_path / "damaged_0")[:20] == [*range(10, 20), *range(30, 40)]  # a gap
    report = verify(tmp_path / "damaged_0")
    assert report.clean, report.findings
