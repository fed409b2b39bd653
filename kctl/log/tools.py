"""Offline repair of partition directories (no broker running): ``recover`` (truncate at the first
invalid batch, save what was cut, rebuild indexes; a ``.log.swap`` that is not a valid compaction
output is set aside as ``.invalid``, never trusted, and counted as cut) and ``purge`` (retention
rules applied by hand).

Both refuse to touch a directory whose log dir is locked by a running broker, or one that holds no
segment file (``NoSegmentsError``: a log directory's root or a mistyped path, where opening a log
would create one), and both can plan without changing anything (``dry_run``). ``purge`` refuses a
``before_offset`` past the log end offset (``PurgeTargetError``): every segment would go. On a
partition directory both open it as a :class:`Log`, which also keeps its producer snapshots
consistent (stale or corrupt ``.snapshot`` files are deleted, one is written at the log end when
the log is closed); neither ever treats a snapshot as a segment."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.clock import SYSTEM_CLOCK, Clock
from kctl.log.config import LogConfig
from kctl.log.files import DEFAULT_FILE_IO
from kctl.log.inspect import segment_logs
from kctl.log.loader import INVALID_SUFFIX
from kctl.log.log import Log
from kctl.log.manager import is_locked
from kctl.log.naming import LOG_SUFFIX, SWAP_SUFFIX, base_offset_of, parse_partition_dir
from kctl.log.recovery import DELETE, KEEP, TRUNCATE, SegmentRecovery, plan_recovery, scan_path
from kctl.log.retention import RetentionDecision, SegmentSummary, plan_retention
from kctl.log.segment import LogSegment

CUT_SUFFIX = ".cut"


class DirectoryInUseError(RuntimeError):
    """The partition's log directory is locked by a running broker."""


class NoSegmentsError(FileNotFoundError):
    """The directory holds no segment file: it is not a partition directory (nothing is created)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(
            f"{directory} holds no segment file: not a partition directory (e.g. /data/my_topic_0)"
        )


class PurgeTargetError(ValueError):
    """An offset to purge below that lies past the partition's log end offset: refused, since every
    segment lies below it (nothing is deleted)."""

    def __init__(self, directory: Path, offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is past the log end offset of {directory} ({log_end_offset}): nothing deleted"
        )
        self.offset = offset
        self.log_end_offset = log_end_offset


@dataclass
class RecoverReport:
    path: str
    dry_run: bool
    steps: list[SegmentRecovery] = field(default_factory=list)
    side_files: dict[str, str] = field(
        default_factory=dict
    )  # segment name -> side file holding its cut bytes
    # swap files that are not complete compaction outputs: (swap name, bytes, reason, where it is kept)
    set_aside: list[tuple[str, int, str, str]] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        return any(step.action != KEEP for step in self.steps) or bool(self.set_aside)

    @property
    def kept_bytes(self) -> int:
        return sum(step.valid_bytes for step in self.steps)

    @property
    def cut_bytes(self) -> int:
        return sum(step.cut_bytes for step in self.steps) + sum(size for _, size, _, _ in self.set_aside)


def _ensure_not_in_use(partition_dir: Path) -> None:
    log_dir = partition_dir.parent
    if is_locked(log_dir):
        raise DirectoryInUseError(
            f"{log_dir} is locked by a running broker; stop it first (the broker recovers its own logs)"
        )


def _side_file(segment_path: Path) -> Path:
    candidate = segment_path.with_name(segment_path.name + CUT_SUFFIX)
    counter = 1
    while candidate.exists():
        candidate = segment_path.with_name(f"{segment_path.name}{CUT_SUFFIX}.{counter}")
        counter += 1
    return candidate


def _save_cut_bytes(step: SegmentRecovery) -> Path:
    """Copy the bytes recovery is about to cut from ``step.path`` into a side file next to it."""
    target = _side_file(step.path)
    with open(step.path, "rb") as source, open(target, "wb") as sink:
        source.seek(step.valid_bytes)
        shutil.copyfileobj(source, sink, 1024 * 1024)
        sink.flush()
        os.fsync(sink.fileno())
    return target


def _topic_partition(partition_dir: Path) -> TopicPartition:
    return parse_partition_dir(partition_dir.name) or TopicPartition(partition_dir.name, 0)


def recover(path: Path, *, dry_run: bool = False, config: LogConfig | None = None) -> RecoverReport:
    """Recover a partition directory or a single segment file (``config`` sets the index settings)."""
    config = config or LogConfig()
    path = Path(path)
    segments = segment_logs(path)
    if not segments:
        raise NoSegmentsError(path)
    partition_dir = path if path.is_dir() else path.parent
    report = RecoverReport(str(path), dry_run, plan_recovery(segments))
    if path.is_dir():
        for swap in sorted(partition_dir.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
            base = base_offset_of(swap)
            scan = scan_path(swap, base, DEFAULT_FILE_IO) if base is not None else None
            if scan is not None and scan.error is not None:
                kept_as = swap.with_name(swap.name + INVALID_SUFFIX)
                report.set_aside.append((swap.name, swap.stat().st_size, scan.error, str(kept_as)))
    if dry_run:
        return report
    _ensure_not_in_use(partition_dir)

    def save(step: SegmentRecovery) -> None:
        if step.cut_bytes > 0:
            report.side_files[step.path.name] = str(_save_cut_bytes(step))

    if path.is_dir():
        log = Log(
            partition_dir,
            _topic_partition(partition_dir),
            config,
            recovery_point=0,
            needs_recovery=True,
            on_truncate=save,
        )
        log.close()
        report.steps = log.recovery_plan or report.steps  # what was done, after any swap completed
        return report
    # a single segment: truncate it and rebuild its indexes; other segments are left alone
    (step,) = report.steps
    if step.action in (TRUNCATE, DELETE):
        save(step)
    segment = LogSegment(
        partition_dir,
        step.base_offset,
        file_io=DEFAULT_FILE_IO,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        created_ms=SYSTEM_CLOCK.time_ms(),
    )
    try:
        if step.action in (TRUNCATE, DELETE):
            segment.truncate_bytes(step.valid_bytes)
        segment.rebuild_indexes()
        segment.flush()
    finally:
        segment.close()
    return report


@dataclass
class PurgeReport:
    path: str
    dry_run: bool
    deleted: list[RetentionDecision]
    log_start_offset: int
    log_end_offset: int


def _summaries(partition_dir: Path) -> list[SegmentSummary]:
    from kctl.log.inspect import Unreadable, read_batches

    summaries = []
    segments = segment_logs(partition_dir)
    for position, (base, log_path) in enumerate(segments):
        max_timestamp, next_offset, size = -1, base, log_path.stat().st_size
        for item in read_batches(log_path):
            if isinstance(item, Unreadable):
                break
            info, _ = item
            max_timestamp = max(max_timestamp, info.max_timestamp)
            next_offset = info.last_offset + 1
        summaries.append(
            SegmentSummary(
                base_offset=base,
                next_offset=next_offset,
                size=size,
                max_timestamp=max_timestamp,
                modified_ms=int(log_path.stat().st_mtime * 1000),
                is_active=position == len(segments) - 1,
            )
        )
    return summaries


def purge(
    partition_dir: Path,
    *,
    retention_ms: int | None = None,
    retention_bytes: int | None = None,
    before_offset: int | None = None,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> PurgeReport:
    """Delete whole segments by age, total size, or below an offset — the broker's retention rules.
    Raises ``NoSegmentsError`` for a directory without segments, ``PurgeTargetError`` for a
    ``before_offset`` past the log end offset (the log end offset itself deletes every record)."""
    partition_dir = Path(partition_dir)
    if not partition_dir.is_dir():
        raise NotADirectoryError(f"{partition_dir} is not a partition directory")
    summaries = _summaries(partition_dir)
    if not summaries:
        raise NoSegmentsError(partition_dir)
    if before_offset is not None and before_offset > summaries[-1].next_offset:
        raise PurgeTargetError(partition_dir, before_offset, summaries[-1].next_offset)
    rules = {
        "retention_ms": -1 if retention_ms is None else retention_ms,
        "retention_bytes": -1 if retention_bytes is None else retention_bytes,
        "log_start_offset": 0 if before_offset is None else before_offset,
    }
    if dry_run:
        decisions = plan_retention(summaries, now_ms=clock.time_ms(), **rules)
        start = decisions[-1].next_offset if decisions else summaries[0].base_offset
        end = summaries[-1].next_offset
        return PurgeReport(str(partition_dir), True, decisions, start, end)
    _ensure_not_in_use(partition_dir)
    log = Log(partition_dir, _topic_partition(partition_dir), LogConfig(), needs_recovery=False, clock=clock)
    try:
        decisions = log.delete_old_segments(**rules)
        return PurgeReport(str(partition_dir), False, decisions, log.log_start_offset, log.log_end_offset)
    finally:
        log.close()
