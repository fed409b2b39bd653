"""The LogManager: every partition log across one or more data directories.

Owns each directory's lock file (two brokers cannot open the same directory), ``meta.properties``, the
clean-shutdown marker, the recovery-point, log-start-offset and replication-offset (high watermark)
checkpoints, placing new partitions, and the periodic flush / retention / compaction passes the broker
schedules. High watermarks are restored from ``replication-offset-checkpoint`` at start, each clamped to
its log's recovered log end offset. Moving a partition to another log directory while it serves
(``begin_move``, ``copy_for_move``, ``complete_move``; the files in kctl.log.dir_move)."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint
from kctl.log.clock import SYSTEM_CLOCK, Clock
from kctl.log.config import LogConfig
from kctl.log.dir_move import LogDirNotFoundError, LogMove, fsync_directory, fsync_tree, sync_files
from kctl.log.files import DEFAULT_FILE_IO, FileIO, LogStorageError
from kctl.log.log import Log
from kctl.log.naming import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_partition_dir,
    partition_dir_name,
    validate_topic_name,
)
from kctl.log.retention import RetentionDecision

log_module = logging.getLogger("kctl.log")
META_VERSION = 0


class LogDirLockedError(RuntimeError):
    """Another process holds the lock of a data directory."""


class InconsistentMetadataError(RuntimeError):
    """A data directory's meta.properties belongs to another broker or cluster."""


@dataclass(frozen=True)
class LogDirMeta:
    broker_id: int | None
    cluster_id: str | None
    version: int = META_VERSION


def read_meta_properties(log_dir: Path) -> LogDirMeta | None:
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    broker_id = values.get("broker.id")
    return LogDirMeta(
        broker_id=int(broker_id) if broker_id not in (None, "") else None,
        cluster_id=values.get("cluster.id") or None,
        version=int(values.get("version", META_VERSION)),
    )


def write_meta_properties(log_dir: Path, meta: LogDirMeta) -> None:
    lines = ["#kctl log directory metadata", f"version={meta.version}"]
    if meta.broker_id is not None:
        lines.append(f"broker.id={meta.broker_id}")
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
    temporary = log_dir / (META_PROPERTIES + ".tmp")
    temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(temporary, log_dir / META_PROPERTIES)


class LogDirLock:
    """An exclusive ``flock`` on ``<log.dir>/.lock`` held for the manager's lifetime."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / LOCK_FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(self._fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogDirLockedError(
                    f"{log_dir} is in use by another process (lock {self.path} is held)"
                ) from error
            raise

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def is_locked(log_dir: Path) -> bool:
    """Whether a running broker (or another tool) holds ``log_dir``'s lock."""
    path = log_dir / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class LogManager:
    """All partition logs of a broker.

    Concurrency of a ``Log`` (kctl.log.log): the broker calls a log from its event loop (appends,
    reads, truncation, the high watermark, retention, flushes) and from two worker threads: the
    compaction thread (kctl.log.cleaner: reads the segment list, the producer state and the high
    watermark, then ``swap_in_segment``) and the log-dir move thread (``copy_for_move`` below: reads
    ``log_end_offset`` and copies the files). Every method of a log that changes its segment list,
    offsets or producer state takes the log's ``RLock`` (appends, ``truncate_to``,
    ``truncate_fully_and_start_at``, ``roll``, ``flush``/``flush_if_due``, ``delete_old_segments``,
    ``swap_in_segment``, ``update_high_watermark``, ``maybe_increment_log_start_offset``,
    ``remove_expired_producers``, ``close``, ``delete``), as do the readers that walk several
    segments (``read``, ``offset_for_timestamp``, ``aborted_transactions``, the epoch lookups,
    ``segment_summaries``): these are safe from any thread. Its plain properties (``log_end_offset``,
    ``high_watermark``, ``log_start_offset``, ``segments``) read one attribute under the GIL: a
    consistent value, possibly stale by the time it is used. The file regions ``read`` returns stay
    readable after compaction swapped their segment out or retention deleted it (a region holds its
    open file, kctl.log.files).

    Concurrency of the manager: the table of logs is guarded by the manager's ``RLock``:
    ``get_or_create_log``, ``delete_log``, ``all_logs`` (a copy), ``update_topic_config``, ``begin_move``,
    ``complete_move``, ``checkpoint`` and ``close`` take it and are safe from any thread; ``get_log``
    reads the table under the GIL. The broker's event loop runs everything but two calls: the
    compaction thread iterates ``all_logs()`` and works on each ``Log`` (its own lock), and the
    log-dir move thread runs ``copy_for_move`` (no manager lock: it copies files while the log keeps
    serving). ``complete_move`` must run where appends to that partition cannot (the event loop)."""

    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        default_config: LogConfig | None = None,
        *,
        broker_id: int | None = None,
        cluster_id: str | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        file_io: FileIO = DEFAULT_FILE_IO,
        clock: Clock = SYSTEM_CLOCK,
        high_watermark_follows_log_end: bool = True,
    ) -> None:
        """``high_watermark_follows_log_end``: single-replica mode (see :class:`Log`); replication
        passes False and moves each log's high watermark itself."""
        self.log_dirs = [Path(directory).resolve() for directory in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log directory is required")
        self.default_config = default_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._file_io = file_io
        self._clock = clock
        self.high_watermark_follows_log_end = high_watermark_follows_log_end
        self._logs: dict[TopicPartition, Log] = {}
        self._lock = threading.RLock()
        self._checkpoints_written: dict[Path, dict[TopicPartition, int]] = {}  # as last written, by file
        self._dir_locks: list[LogDirLock] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.offline_dirs: set[Path] = set()
        """Log dirs whose disk failed (KIP-112), while running or at start: no log of theirs is open
        any more, nothing is written to them, and they get no clean-shutdown marker (recovered at
        restart)."""
        self.offline_at_start: dict[Path, str] = {}
        """The log dirs that failed while being opened, and why (the hosted partitions whose log is
        in none of the online dirs are offline replicas: kctl.broker.replica_manager)."""
        self._open()

    @property
    def lost_unsynced_writes(self) -> bool:
        """Whether a log directory holding logs was not shut down cleanly: what its logs had written
        since their last fsync may be gone (a power loss), so this broker may lack records it
        acknowledged or replicated before."""
        return any(
            not clean and any(log.parent_dir_is(log_dir) for log in self._logs.values())
            for log_dir, clean in self.had_clean_shutdown.items()
        )

    # -- start-up ------------------------------------------------------------------------------
    def _open(self) -> None:
        """Lock, check and load each log dir. A dir whose disk fails while this happens (an I/O
        error, not a dir of another broker or cluster, nor one locked by another process) starts
        offline, as Kafka's JBOD handling (KIP-112) starts without it; only when every dir fails
        does the start fail."""
        try:
            for log_dir in self.log_dirs:
                try:
                    log_dir.mkdir(parents=True, exist_ok=True)
                    self._dir_locks.append(LogDirLock(log_dir))
                    self._check_meta(log_dir)
                except (LogDirLockedError, InconsistentMetadataError):
                    raise
                except OSError as error:
                    self._offline_at_start(log_dir, error)
            for log_dir in self.log_dirs:
                if log_dir in self.offline_dirs:
                    continue
                try:
                    self._load_dir(log_dir)
                except OSError as error:
                    self._offline_at_start(log_dir, error)
            if len(self.offline_dirs) == len(self.log_dirs):
                failures = "; ".join(f"{d}: {why}" for d, why in self.offline_at_start.items())
                raise LogStorageError(errno.EIO, f"every log directory is offline ({failures})")
        except BaseException:
            self._release_locks()
            raise

    def _offline_at_start(self, log_dir: Path, error: OSError) -> None:
        """``log_dir`` failed while the manager opened it: forget what of it was loaded (without
        touching its files again) and keep it offline until the next start."""
        self.offline_at_start[log_dir] = f"{type(error).__name__}: {error}"
        self.mark_offline(log_dir)
        self.had_clean_shutdown.pop(log_dir, None)
        log_module.error(
            "log dir %s failed while loading (%s): it stays offline, with the replicas it holds, "
            "until a restart finds it healthy",
            log_dir,
            error,
        )

    def _check_meta(self, log_dir: Path) -> None:
        meta = read_meta_properties(log_dir)
        if meta is not None:
            if self.broker_id is not None and meta.broker_id is not None and meta.broker_id != self.broker_id:
                raise InconsistentMetadataError(
                    f"{log_dir} belongs to broker.id={meta.broker_id}, not {self.broker_id}"
                )
            if self.cluster_id is not None and meta.cluster_id and meta.cluster_id != self.cluster_id:
                raise InconsistentMetadataError(
                    f"{log_dir} belongs to cluster {meta.cluster_id}, not {self.cluster_id}"
                )
            self.broker_id = meta.broker_id if self.broker_id is None else self.broker_id
            self.cluster_id = meta.cluster_id if self.cluster_id is None else self.cluster_id
        write_meta_properties(log_dir, LogDirMeta(self.broker_id, self.cluster_id))

    def _load_dir(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        try:
            recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        except CorruptCheckpointError:
            recovery_points, start_offsets, clean = {}, {}, False
        try:
            high_watermarks = read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        except CorruptCheckpointError as error:
            log_module.warning("%s; high watermarks start at the log start offsets", error)
            high_watermarks = {}
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):  # a move never completed
                shutil.rmtree(child, ignore_errors=True)
                continue
            tp = parse_partition_dir(child.name)
            if tp is None:
                continue
            if tp in self._logs:  # a move's crash after its rename: the two copies are the same
                log_module.warning("%s is also in %s: dropping %s", tp, self._logs[tp].directory, child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            self._logs[tp] = Log(
                child,
                tp,
                self.config_for(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                needs_recovery=not clean,
                file_io=self._file_io,
                clock=self._clock,
                high_watermark=high_watermarks.get(tp),
                high_watermark_follows_log_end=self.high_watermark_follows_log_end,
            )
        if clean:
            marker.unlink()
        elif self._logs:
            recovered = [
                log for log in self._logs.values() if log.parent_dir_is(log_dir) and log.recovery_plan
            ]
            log_module.warning(
                "%s was not shut down cleanly: recovered %d partition(s) from their recovery points",
                log_dir,
                len(recovered),
            )

    # -- partitions ----------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                return log
            validate_topic_name(tp.topic)
            if tp.partition < 0:
                raise ValueError(f"partition {tp.partition} is negative")
            if config is not None:
                self.topic_configs[tp.topic] = config
            log_dir = self._least_loaded_dir()
            log = Log(
                log_dir / partition_dir_name(tp),
                tp,
                self.config_for(tp.topic),
                needs_recovery=False,
                file_io=self._file_io,
                clock=self._clock,
                high_watermark_follows_log_end=self.high_watermark_follows_log_end,
            )
            self._logs[tp] = log
            return log

    def _least_loaded_dir(self) -> Path:
        if self.offline_dirs:
            online = [d for d in self.log_dirs if d not in self.offline_dirs]
            if not online:
                raise LogStorageError(errno.EIO, "every log directory is offline")
            if len(online) == 1:
                return online[0]
        elif len(self.log_dirs) == 1:  # no count to make: creating n logs stays O(n), not O(n²)
            return self.log_dirs[0]
        counts = {log_dir: 0 for log_dir in self.log_dirs}
        for log in self._logs.values():
            parent = log.log_dir
            if parent in counts:
                counts[parent] += 1
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        return min(online, key=lambda log_dir: (counts[log_dir], self.log_dirs.index(log_dir)))

    def mark_offline(self, log_dir: Path) -> list[TopicPartition]:
        """``log_dir``'s disk failed: close and forget its logs (their replicas are offline) and
        write nothing there again; the partitions it held. Its logs are recovered at the next start."""
        with self._lock:
            self.offline_dirs.add(log_dir)
            lost = [tp for tp, log in self._logs.items() if log.log_dir == log_dir]
            for tp in lost:
                log = self._logs.pop(tp)
                for segment in log.segments:
                    try:
                        segment.close()
                    except OSError as error:  # the disk that failed: its descriptors go anyway
                        log_module.debug("closing a segment of %s: %s", tp, error)
            return lost

    def dir_of(self, tp: TopicPartition) -> Path | None:
        """The log dir holding ``tp``'s log (None without one)."""
        log = self._logs.get(tp)
        return log.log_dir if log is not None else None

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove a partition: its directory is renamed ``…-delete`` at once, then removed."""
        with self._lock:
            log = self._logs.pop(tp, None)
        if log is None:
            return False
        for segment in log.segments:
            segment.close()
        doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(log.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # -- moves between log directories ---------------------------------------------------------
    def begin_move(self, tp: TopicPartition, destination: Path | str) -> LogMove | None:
        """Start moving ``tp`` to the log directory ``destination``: its (empty) future directory.
        None when the log is already there; LogDirNotFoundError for a directory that is not one of
        ours, KeyError for a partition without a log."""
        target = Path(destination).resolve()
        if target not in self.log_dirs:
            raise LogDirNotFoundError(f"{destination} is not one of the log directories")
        with self._lock:
            log = self._logs[tp]
        if log.log_dir == target:
            return None
        future = target / f"{partition_dir_name(tp)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        future.mkdir()
        return LogMove(tp, log.directory, target, future)

    def copy_for_move(self, move: LogMove) -> None:
        """A copy pass while the partition keeps serving (blocking: run it in a thread)."""
        log = self._logs.get(move.topic_partition)
        if log is None or log.directory != move.source:
            raise KeyError(f"{move.topic_partition} is no longer in {move.source}")
        end = log.log_end_offset
        sync_files(move)
        move.copied_end_offset = end

    def abandon_move(self, move: LogMove) -> None:
        shutil.rmtree(move.future, ignore_errors=True)

    def complete_move(self, move: LogMove) -> Log:
        """Close the log, copy what changed since the last pass, make the future directory the
        partition's directory and reopen the log there; delete the old directory. Returns the new
        ``Log``, which replaces the old one (closed) wherever it is held. Appends must not run
        meanwhile (the broker calls this on its event loop). On failure before the swap the log is
        reopened where it was (``self.get_log``) and the error raised."""
        tp = move.topic_partition
        with self._lock:
            old = self._logs.get(tp)
            if old is None or old.directory != move.source:
                self.abandon_move(move)
                raise KeyError(f"{tp} is no longer in {move.source}")
            final = move.destination / partition_dir_name(tp)
            old.close()
            try:
                if final.exists():
                    raise FileExistsError(f"{final} exists")
                sync_files(move)
                fsync_tree(move.future)
                os.replace(move.future, final)
                fsync_directory(move.destination)
            except BaseException:
                self.abandon_move(move)
                self._logs[tp] = self._reopen(old, old.directory)
                raise
            new = self._logs[tp] = self._reopen(old, final)
        doomed = move.source.with_name(f"{move.source.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(move.source, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return new

    def _reopen(self, old: Log, directory: Path) -> Log:
        """``old`` (closed cleanly) opened again from ``directory``."""
        return Log(
            directory,
            old.topic_partition,
            old.config,
            recovery_point=old.recovery_point,
            log_start_offset=old.log_start_offset,
            needs_recovery=False,
            file_io=self._file_io,
            clock=self._clock,
            high_watermark=old.high_watermark,
            high_watermark_follows_log_end=self.high_watermark_follows_log_end,
        )

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        with self._lock:
            self.topic_configs[topic] = config
            for tp, log in self._logs.items():
                if tp.topic == topic:
                    log.config = config

    # -- periodic work -------------------------------------------------------------------------
    def flush_due_logs(self, on_disk_failure: Callable[[Path, LogStorageError], None] | None = None) -> int:
        """Flush the logs whose flush.ms has passed; how many. A log whose disk fails is reported to
        ``on_disk_failure`` (its log dir) and the others are flushed; without it the error is raised."""
        flushed = 0
        for log in self.all_logs().values():
            try:
                flushed += log.flush_if_due()
            except OSError as error:
                failure = error if isinstance(error, LogStorageError) else LogStorageError(*error.args)
                if on_disk_failure is None or not failure.disk_failed:
                    raise
                on_disk_failure(log.log_dir, failure)
        return flushed

    def run_retention(self) -> dict[TopicPartition, list[RetentionDecision]]:
        results = {}
        for tp, log in self.all_logs().items():
            decisions = log.delete_old_segments()
            if decisions:
                results[tp] = decisions
        return results

    def remove_expired_producers(self, expiration_ms: int) -> dict[TopicPartition, int]:
        """Forget, in every log, the idempotent producers silent for longer than ``expiration_ms``;
        how many per partition (only partitions that forgot some)."""
        removed = {tp: log.remove_expired_producers(expiration_ms) for tp, log in self.all_logs().items()}
        return {tp: count for tp, count in removed.items() if count}

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset, replication-offset (high watermark) and
        cleaner-offset (compacted partitions) checkpoints of every directory
        (``log.flush.offset.checkpoint.interval.ms``, and at close); a file whose offsets have not
        changed since this manager last wrote it is not written again (an idle broker of 10,000
        partitions rewrote and fsynced four files of 10,000 lines every few seconds)."""
        with self._lock:
            for log_dir, logs in self._logs_by_dir().items():
                self._write_checkpoint(
                    log_dir / RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in logs.items()}
                )
                self._write_checkpoint(
                    log_dir / LOG_START_OFFSET_CHECKPOINT,
                    {tp: log.log_start_offset for tp, log in logs.items()},
                )
                self._write_checkpoint(
                    log_dir / REPLICATION_OFFSET_CHECKPOINT,
                    {tp: log.high_watermark for tp, log in logs.items()},
                )
                # compacted partitions (offset gaps expected: `kctl log verify` reads this), with the
                # offset below which they are clean, as Kafka's cleaner-offset-checkpoint
                self._write_checkpoint(
                    log_dir / CLEANER_OFFSET_CHECKPOINT,
                    {tp: log.first_dirty_offset for tp, log in logs.items() if log.config.compact},
                )

    def checkpoint_high_watermarks(self) -> None:
        """Write only the replication-offset (high watermark) checkpoint of every directory, as
        Kafka's ``replica.high.watermark.checkpoint.interval.ms`` task does (every 5 s by default:
        the other three files wait for :meth:`checkpoint`). It runs on the broker's event loop; at
        10,000 partitions the four files' pass held it for 35-60 ms, this one for a few."""
        with self._lock:
            for log_dir, logs in self._logs_by_dir().items():
                self._write_checkpoint(
                    log_dir / REPLICATION_OFFSET_CHECKPOINT,
                    {tp: log.high_watermark for tp, log in logs.items()},
                )

    def _logs_by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        """The logs of each online log dir (under the lock)."""
        online = [log_dir for log_dir in self.log_dirs if log_dir not in self.offline_dirs]
        if len(online) == 1 and len(self.log_dirs) == 1:
            return {online[0]: self._logs}
        by_dir: dict[Path, dict[TopicPartition, Log]] = {log_dir: {} for log_dir in online}
        for tp, log in self._logs.items():
            by_dir.setdefault(log.log_dir, {})[tp] = log
        return by_dir

    def _write_checkpoint(self, path: Path, offsets: dict[TopicPartition, int]) -> None:
        if self._checkpoints_written.get(path) == offsets and path.exists():
            return
        write_checkpoint(path, offsets)
        self._checkpoints_written[path] = offsets

    # -- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker, release the locks."""
        with self._lock:
            for log in self._logs.values():
                log.close()
            self.checkpoint()
            for log_dir in self.log_dirs:
                if log_dir not in self.offline_dirs:  # an offline dir is recovered at the next start
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
            self._logs.clear()
            self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._dir_locks:
            lock.release()
        self._dir_locks.clear()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
