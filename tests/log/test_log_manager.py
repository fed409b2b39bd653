"""LogManager: directory lock, meta.properties, checkpoints, clean shutdown, placement, kill -9."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import make_batch

from kctl.common.topic_partition import TopicPartition
from kctl.log.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint
from kctl.log.config import LogConfig
from kctl.log.files import FileIO, LogStorageError
from kctl.log.manager import (
    InconsistentMetadataError,
    LogDirLockedError,
    LogManager,
    is_locked,
    read_meta_properties,
)
from kctl.log.naming import CLEAN_SHUTDOWN_FILE, parse_partition_dir, partition_dir_name, validate_topic_name
from kctl.records.reader import iter_batches

TP = TopicPartition("orders", 0)


def test_second_manager_on_the_same_directory_is_refused(tmp_path):
    with LogManager([tmp_path], broker_id=1):
        assert is_locked(tmp_path)
        with pytest.raises(LogDirLockedError):
            LogManager([tmp_path], broker_id=1)
    assert not is_locked(tmp_path)
    LogManager([tmp_path], broker_id=1).close()


def test_meta_properties_bind_the_directory_to_a_broker(tmp_path):
    LogManager([tmp_path], broker_id=3, cluster_id="abcdefghijklmnopqrstuv").close()
    meta = read_meta_properties(tmp_path)
    assert (meta.broker_id, meta.cluster_id) == (3, "abcdefghijklmnopqrstuv")
    with pytest.raises(InconsistentMetadataError):
        LogManager([tmp_path], broker_id=4)
    assert not is_locked(tmp_path)  # a failed open releases the lock


def test_clean_shutdown_writes_checkpoints_and_marker(tmp_path):
    manager = LogManager([tmp_path], broker_id=0)
    log = manager.get_or_create_log(TP)
    log.append(make_batch(7))
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {TP: 7}
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {TP: 0}
    manager = LogManager([tmp_path], broker_id=0)
    assert manager.had_clean_shutdown[tmp_path.resolve()]
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert manager.get_log(TP).recovery_plan == []
    assert manager.get_log(TP).log_end_offset == 7
    manager.close()


def test_a_checkpoint_whose_offsets_did_not_change_is_not_written_again(tmp_path):
    """An idle broker's periodic checkpoints write nothing; a change rewrites the file it moved."""
    manager = LogManager([tmp_path], broker_id=0)
    log = manager.get_or_create_log(TP)
    log.append(make_batch(3))
    manager.checkpoint()
    names = [
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    ]
    inodes = {name: (tmp_path / name).stat().st_ino for name in names}  # each write replaces the file
    manager.checkpoint()
    assert {name: (tmp_path / name).stat().st_ino for name in names} == inodes
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {TP: 0}
    log.flush()  # the recovery point moves to 3
    manager.checkpoint()
    recovery = tmp_path / "recovery-point-offset-checkpoint"
    assert recovery.stat().st_ino != inodes["recovery-point-offset-checkpoint"]
    assert read_checkpoint(recovery) == {TP: 3}
    assert (tmp_path / "log-start-offset-checkpoint").stat().st_ino == inodes["log-start-offset-checkpoint"]
    (tmp_path / "log-start-offset-checkpoint").unlink()  # gone: written again, unchanged or not
    manager.checkpoint()
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {TP: 0}
    manager.close()


def test_the_high_watermark_checkpoint_writes_only_its_own_file(tmp_path):
    """``replica.high.watermark.checkpoint.interval.ms`` (5 s) writes the high watermarks alone; the
    recovery points and log start offsets wait for the full checkpoint, in every log dir."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, broker_id=0, high_watermark_follows_log_end=False)
    logs = [manager.get_or_create_log(TopicPartition("t", p)) for p in range(2)]
    for log in logs:
        log.append(make_batch(3))
        log.update_high_watermark(2)
        log.flush()
    manager.checkpoint_high_watermarks()
    for directory, log in zip(dirs, sorted(logs, key=lambda item: str(item.log_dir)), strict=True):
        assert log.log_dir == directory
        assert read_checkpoint(directory / "replication-offset-checkpoint") == {log.topic_partition: 2}
        assert not (directory / "recovery-point-offset-checkpoint").exists()
        assert not (directory / "log-start-offset-checkpoint").exists()
    manager.checkpoint()
    for directory in dirs:
        assert list(read_checkpoint(directory / "recovery-point-offset-checkpoint").values()) == [3]
    manager.close()


def test_an_idle_log_is_not_looked_at_by_the_flush_scheduler(tmp_path, monkeypatch):
    """``flush_due_logs`` runs every second over every log: one without unflushed records returns at
    once, without its lock or the clock (10,000 idle logs cost 7.5 ms a second before)."""
    manager = LogManager([tmp_path], broker_id=0)
    busy, idle = (manager.get_or_create_log(TopicPartition("t", p)) for p in range(2))
    busy.append(make_batch(2))
    looked_at: list[object] = []
    for log in (busy, idle):
        monkeypatch.setattr(log, "_clock", _RecordingClock(log._clock, looked_at, log))
    manager.flush_due_logs()
    assert looked_at == [busy]
    manager.close()


class _RecordingClock:
    def __init__(self, clock, calls, owner):
        self._clock, self._calls, self._owner = clock, calls, owner

    def monotonic_ms(self):
        self._calls.append(self._owner)
        return self._clock.monotonic_ms()

    def __getattr__(self, name):
        return getattr(self._clock, name)


def test_partitions_spread_over_directories_and_reload(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, broker_id=0)
    for partition in range(4):
        manager.get_or_create_log(TopicPartition("t", partition)).append(make_batch(1))
    assert len(os.listdir(dirs[0])) == len(os.listdir(dirs[1]))
    manager.close()
    manager = LogManager(dirs, broker_id=0)
    assert sorted(manager.all_logs()) == [TopicPartition("t", p) for p in range(4)]
    manager.close()


def test_delete_log_removes_the_directory(tmp_path):
    manager = LogManager([tmp_path], broker_id=0)
    log = manager.get_or_create_log(TP)
    log.append(make_batch(1))
    assert manager.delete_log(TP)
    assert not log.directory.exists() and manager.get_log(TP) is None
    manager.close()


def test_topic_names_are_validated():
    for bad in ["", ".", "..", "a/b", "x" * 250, "spaces here"]:
        with pytest.raises(ValueError):
            validate_topic_name(bad)
    validate_topic_name("my_topic.v1-x")
    assert parse_partition_dir("my_topic_12") == TopicPartition("my_topic", 12)
    assert parse_partition_dir("my_topic") is None


def test_one_topic_partition_type_prints_as_kafka_and_names_its_directory_explicitly():
    from kctl.client.types import TopicPartition as ClientTopicPartition
    from kctl.common.topic_partition import TopicPartition as CommonTopicPartition

    assert TopicPartition is ClientTopicPartition is CommonTopicPartition
    tp = TopicPartition("my_topic", 12)
    assert str(tp) == "my_topic-12"
    assert partition_dir_name(tp) == "my_topic_12"
    assert parse_partition_dir(partition_dir_name(tp)) == tp


def test_checkpoint_round_trip_and_corruption(tmp_path):
    path = tmp_path / "cp"
    write_checkpoint(path, {TopicPartition("a_b", 1): 5, TopicPartition("c", 0): 9})
    assert read_checkpoint(path) == {TopicPartition("a_b", 1): 5, TopicPartition("c", 0): 9}
    path.write_text("0\n2\na 0 1\n")
    with pytest.raises(CorruptCheckpointError):
        read_checkpoint(path)


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from conftest import make_batch
    from kctl.log.manager import LogManager
    from kctl.common.topic_partition import TopicPartition
    manager = LogManager([{log_dir!r}], broker_id=0)
    log = manager.get_or_create_log(TopicPartition("orders", 0))
    for i in range(100000):
        info = log.append(make_batch(5, start=i * 5))
        print(info.last_offset, flush=True)
    """
)


def test_kill_9_loses_no_acknowledged_record(tmp_path):
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = WRITER.format(tests=tests_dir, log_dir=str(tmp_path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    acknowledged = -1
    assert process.stdout is not None
    for line in process.stdout:
        acknowledged = int(line)
        if acknowledged >= 2000:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert acknowledged >= 2000
    manager = LogManager([tmp_path], broker_id=0)
    log = manager.get_log(TP)
    assert log.log_end_offset > acknowledged
    offset, values = 0, []
    while offset <= acknowledged:
        for batch in iter_batches(log.read_bytes(offset, 1 << 20)):
            values += [(r.offset, r.value.split(b":")[0]) for r in batch.records]
        offset = values[-1][0] + 1
    assert [v for v in values[: acknowledged + 1]] == [(i, b"%d" % i) for i in range(acknowledged + 1)]
    manager.close()


class _FailingDirIO(FileIO):
    """fsync fails with EIO for the files under one directory (a disk that died)."""

    def __init__(self, failing: Path) -> None:
        self.failing = str(failing.resolve())
        self.paths: dict[int, str] = {}
        self.failed = False  # set: the disk has died

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.paths[fd] = str(path)
        return fd

    def fsync(self, fd: int) -> None:
        if self.failed and self.paths.get(fd, "").startswith(self.failing + os.sep):
            raise OSError(errno.EIO, "Input/output error")
        super().fsync(fd)


def test_a_failed_log_dir_goes_offline_and_the_other_keeps_working(tmp_path):
    """KIP-112 in the LogManager: a flush failing with EIO reports its dir; marked offline, the dir's
    logs are closed and forgotten, new logs go to the healthy dir, no checkpoint or clean-shutdown
    marker is written there (recovered at the next start), and the next start opens it again."""
    dirs = [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    failing_io = _FailingDirIO(dirs[1])
    manager = LogManager(dirs, broker_id=0, file_io=failing_io)
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        manager.get_or_create_log(tp).append(make_batch(1))
    lost = {tp for tp in tps if manager.dir_of(tp) == dirs[1]}
    failing_io.failed = True
    with pytest.raises(LogStorageError, match="fsync failed"):  # the log's error, not a bare OSError
        manager.get_log(next(iter(lost))).flush()
    manager.update_topic_config("t", LogConfig(flush_ms=0))  # every log is due
    failures = []
    manager.flush_due_logs(lambda log_dir, error: failures.append((log_dir, error.disk_failed)))
    assert failures and set(failures) == {(dirs[1], True)}
    assert sorted(manager.mark_offline(dirs[1])) == sorted(lost) and len(lost) == 2
    assert manager.offline_dirs == {dirs[1]} and set(manager.all_logs()) == set(tps) - lost
    assert manager.dir_of(TopicPartition("new", 0)) is None
    assert manager.get_or_create_log(TopicPartition("new", 0)).directory.parent == dirs[0]
    (dirs[1] / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    manager.close()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists() and not (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()
    assert not (dirs[1] / "recovery-point-offset-checkpoint").exists()
    manager = LogManager(dirs, broker_id=0)
    assert not manager.had_clean_shutdown[dirs[1]] and manager.offline_dirs == set()
    assert set(manager.all_logs()) == {*tps, TopicPartition("new", 0)}
    manager.close()


def test_the_last_online_dir_cannot_take_new_logs(tmp_path):
    manager = LogManager([tmp_path], broker_id=0)
    manager.mark_offline(tmp_path.resolve())
    with pytest.raises(LogStorageError, match="every log directory is offline"):
        manager.get_or_create_log(TP)
    manager.close()


class _DeadDirIO(FileIO):
    """Every open under the given directories fails with EIO (disks dead before the start)."""

    def __init__(self, *dead: Path) -> None:
        self.dead = [str(d.resolve()) + os.sep for d in dead]

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if any(str(path).startswith(d) for d in self.dead):
            raise OSError(errno.EIO, "Input/output error")
        return super().open(path, flags, mode)


def test_a_log_dir_failing_while_loading_starts_offline_and_every_dir_failing_fails_the_start(tmp_path):
    dirs = [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    manager = LogManager(dirs, broker_id=0)
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        manager.get_or_create_log(tp).append(make_batch(1))
    on_b = {tp for tp in tps if manager.dir_of(tp) == dirs[1]}
    assert on_b and len(on_b) < len(tps)
    manager.close()

    manager = LogManager(dirs, broker_id=0, file_io=_DeadDirIO(dirs[1]))
    assert manager.offline_dirs == {dirs[1]} and set(manager.offline_at_start) == {dirs[1]}
    assert "Input/output error" in manager.offline_at_start[dirs[1]]
    assert set(manager.all_logs()) == set(tps) - on_b
    assert dirs[1] not in manager.had_clean_shutdown
    manager.close()  # nothing was written to the dead dir: it is as its last clean shutdown left it
    assert (dirs[1] / CLEAN_SHUTDOWN_FILE).exists() and (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()

    with pytest.raises(LogStorageError, match="every log directory is offline"):
        LogManager(dirs, broker_id=0, file_io=_DeadDirIO(*dirs))
    manager = LogManager(dirs, broker_id=0)  # the locks of the failed start were released
    assert set(manager.all_logs()) == set(tps)
    manager.close()
