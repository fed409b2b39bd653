"""Loading a partition directory into segments at start (Kafka's LogLoader): leftovers of interrupted
work removed, interrupted compaction swaps completed, recovery after an unclean stop (see
:mod:`kctl.log.recovery`), index checks, and the leader epoch cache made consistent with the loaded log.

Used by :class:`kctl.log.log.Log` only; everything here runs before the log serves any request."""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from kctl.log import recovery
from kctl.log.files import FileIO
from kctl.log.index import CorruptIndexError
from kctl.log.leader_epoch import LeaderEpochCache
from kctl.log.naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_of,
)
from kctl.log.recovery import DELETE, TRUNCATE, SegmentRecovery, plan_recovery
from kctl.log.segment import LogSegment
from kctl.records.header import InvalidRecordBatch

INVALID_SUFFIX = ".invalid"  # a swap file that is not a complete compaction output, set aside
logger = logging.getLogger("kctl.log")

TruncateHook = Callable[[SegmentRecovery], None]


def remove_temporary_files(directory: Path, file_io: FileIO) -> None:
    for path in list(directory.iterdir()):
        if path.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
            file_io.remove(path)


def complete_swaps(directory: Path, file_io: FileIO) -> list[tuple[Path, int, str]]:
    """Finish a compaction swap interrupted by a crash: a ``.log.swap`` replaces what it covers — only
    when it is itself valid to its last byte (the cleaner renames a finished, fsynced file). Any other
    swap file is set aside as ``<name>.invalid`` (nothing is deleted); returns (set-aside path, bytes,
    reason) for each."""
    set_aside: list[tuple[Path, int, str]] = []
    swaps = sorted(p for p in directory.iterdir() if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX))
    for swap in swaps:
        base = base_offset_of(swap)
        if base is None:
            continue
        scan = recovery.scan_path(swap, base, file_io)
        if scan.error is not None:
            target = swap.with_name(swap.name + INVALID_SUFFIX)
            size = swap.stat().st_size
            file_io.rename(swap, target)
            logger.warning(
                "%s: %s is not a complete compaction output (%s at byte %s): set aside as %s (%d bytes); "
                "the segments it would replace are kept",
                directory.name,
                swap.name,
                scan.error,
                scan.error_position,
                target.name,
                size,
            )
            set_aside.append((target, size, scan.error))
            continue
        last = scan.last_offset if scan.last_offset is not None else base
        for path in list(directory.iterdir()):
            other = base_offset_of(path)
            if (
                other is not None
                and base <= other <= last
                and path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX))
            ):
                file_io.remove(path)
        file_io.rename(swap, swap.with_name(swap.name.removesuffix(SWAP_SUFFIX)))
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # rebuilt from the log on load
            stale = swap.with_name(f"{base:020d}{suffix}{SWAP_SUFFIX}")
            if stale.exists():
                file_io.remove(stale)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # index swaps whose log swap was set aside
        for stale in directory.glob(f"*{suffix}{SWAP_SUFFIX}"):
            file_io.remove(stale)
    return set_aside


def check_indexes(segment: LogSegment) -> None:
    try:
        segment.offset_index.sanity_check(segment.size)
        segment.time_index.sanity_check(segment.next_offset - 1 if segment.size else segment.base_offset)
    except CorruptIndexError:
        segment.rebuild_indexes()
    if segment.size and not segment.offset_index.path.exists():
        segment.rebuild_indexes()


def _damaged_tail(segments: Sequence[LogSegment]) -> tuple[int, str] | None:
    """After a clean stop: (base offset, problem) of the first segment whose indexes cannot be loaded
    or whose tail does not end in whole batches (the last segment's tail batches CRC-checked too)."""
    for number, segment in enumerate(segments):
        try:
            check_indexes(segment)
            problem = segment.tail_problem(check_crc=number == len(segments) - 1)
        except (InvalidRecordBatch, CorruptIndexError) as error:  # an index rebuilt over bad offsets
            problem = str(error)
        if problem is not None:
            return segment.base_offset, problem
    return None


def load_segments(
    directory: Path,
    file_io: FileIO,
    new_segment: Callable[[int], LogSegment],
    *,
    needs_recovery: bool,
    recovery_point: int,
    on_truncate: TruncateHook | None,
    set_aside: list[tuple[Path, int, str]] | None = None,
) -> tuple[list[LogSegment], list[SegmentRecovery]]:
    """The directory's segments in offset order (possibly none) and the recovery plan applied to them
    (empty after a clean stop): the segments from the one holding ``recovery_point`` on are validated,
    a damaged one is cut at its first invalid batch and every later one deleted.

    After a clean stop the segments' tails are checked (:func:`_damaged_tail`); a tail that is not
    whole batches makes the load a recovery from that segment on, logged as such. Swap files set aside
    are appended to ``set_aside``."""
    remove_temporary_files(directory, file_io)
    aside = complete_swaps(directory, file_io)
    if set_aside is not None:
        set_aside.extend(aside)
    if not needs_recovery:
        segments, plan = _load(directory, file_io, new_segment, False, recovery_point, on_truncate)
        damaged = _damaged_tail(segments)
        if damaged is None:
            return segments, plan
        for segment in segments:
            segment.close()
        logger.warning(
            "%s: shut down cleanly, but segment %d does not end in whole batches (%s): recovering from it",
            directory.name,
            damaged[0],
            damaged[1],
        )
        needs_recovery, recovery_point = True, damaged[0]
    return _load(directory, file_io, new_segment, needs_recovery, recovery_point, on_truncate)


def _load(
    directory: Path,
    file_io: FileIO,
    new_segment: Callable[[int], LogSegment],
    needs_recovery: bool,
    recovery_point: int,
    on_truncate: TruncateHook | None,
) -> tuple[list[LogSegment], list[SegmentRecovery]]:
    bases = sorted(
        base
        for path in directory.iterdir()
        if path.name.endswith(LOG_SUFFIX) and (base := base_offset_of(path)) is not None
    )
    for path in directory.iterdir():  # indexes whose segment is gone
        base = base_offset_of(path)
        if (
            base is not None
            and base not in bases
            and path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
        ):
            file_io.remove(path)
    plan: list[SegmentRecovery] = []
    if needs_recovery and bases:
        start = max(0, bisect_right(bases, recovery_point) - 1)
        candidates = [(base, directory / f"{base:020d}{LOG_SUFFIX}") for base in bases[start:]]
        plan = plan_recovery(candidates, file_io)
    damaged = {step.base_offset: step for step in plan if step.action != "keep"}
    recovered = {step.base_offset for step in plan}
    segments: list[LogSegment] = []
    for base in bases:
        step = damaged.get(base)
        if step is not None and on_truncate is not None:
            on_truncate(step)
        segment = new_segment(base)
        if step is not None and step.action == DELETE:
            segment.delete()
            continue
        if step is not None and step.action == TRUNCATE:
            segment.truncate_bytes(step.valid_bytes)
        if base in recovered:
            segment.rebuild_indexes()
            segment.txn_index.truncate_to(segment.next_offset)  # aborts whose marker was lost
        elif needs_recovery:
            check_indexes(segment)  # (after a clean stop, _damaged_tail checks them)
        segments.append(segment)
    return segments, plan


def _epochs_and_offsets(segments: Sequence[LogSegment]) -> Iterator[tuple[int, int]]:
    for segment in segments:
        for _, header in segment.iter_headers():
            yield header.partition_leader_epoch, header.base_offset


def _last_batch_epoch(segments: Sequence[LogSegment]) -> int | None:
    for segment in reversed(segments):
        if segment.size:
            found = segment.translate_offset(segment.next_offset - 1)
            if found is not None:
                return found[1].partition_leader_epoch
    return None


def load_leader_epochs(
    cache: LeaderEpochCache,
    segments: Sequence[LogSegment],
    recovered_bases: set[int],
    *,
    log_start_offset: int,
    log_end_offset: int,
) -> None:
    """Load the leader epoch cache and make it agree with the loaded log.

    - The checkpoint file is missing or corrupt: rebuilt from every batch header (61 bytes read per
      batch), unless the log's last batch carries no epoch: epochs never go down in a log, so such a
      log is taken to carry none (a log written without leader epochs keeps no checkpoint file and
      must not pay a scan at every start).
    - The log was recovered: epochs started by batches in the recovered segments but missing from the
      file are added (as Kafka's segment recovery does).
    - Entries at or above the recovered log end offset are dropped (the batches that started them were
      lost), and the one covering the log start offset is moved up to it."""
    if not cache.load():
        last_epoch = _last_batch_epoch(segments)
        if cache.path.exists() or (last_epoch is not None and last_epoch >= 0):
            cache.rebuild(_epochs_and_offsets(segments))  # also replaces (or removes) a corrupt file
    elif recovered_bases:
        recovered = [segment for segment in segments if segment.base_offset in recovered_bases]
        for epoch, base_offset in _epochs_and_offsets(recovered):
            if epoch > cache.latest_epoch:
                cache.assign(epoch, base_offset)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
