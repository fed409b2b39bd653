"""``kctl log verify``: consistency findings about partition directories, segment files and checkpoints,
read-only and without a broker (the listings of ``kctl log dump`` are kctl.log.inspect's).

It shares the validation rules of recovery (:func:`kctl.log.segment.scan_file`) so verify reports
what recovery would cut: framing, CRCs, offset order and ranges, trailing garbage, each ``.index``
and ``.timeindex`` against its log, producer snapshots (each must decode; those above the log end are
noted, the broker deletes them), each segment's aborted-transaction index (``.txnindex``,
:mod:`kctl.log.transactions`) against its ABORT markers (whole 34-byte entries, each an ABORT marker
of its producer at its last offset, every ABORT marker indexed, no index without its segment), a
partition's ``leader-epoch-checkpoint`` (it must parse, epochs and start offsets rise, none starts
past the log end) and, when named, a log directory's offset checkpoints."""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kctl.log.checkpoint import CorruptCheckpointError, read_checkpoint
from kctl.log.inspect import (
    OFFSET_CHECKPOINTS,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    BatchInfo,
    Unreadable,
    is_checkpoint_file,
    read_batches,
    read_offset_index,
    read_time_index,
    segment_logs,
)
from kctl.log.leader_epoch import CorruptLeaderEpochCheckpointError, read_leader_epoch_checkpoint
from kctl.log.naming import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_of,
    index_file,
    parse_partition_dir,
    time_index_file,
    txn_index_file,
)
from kctl.log.producer_state import CorruptSnapshotError, read_snapshot, snapshot_files
from kctl.log.transactions import ENTRY_SIZE, AbortedTxn, marker_of
from kctl.records.header import InvalidRecordBatch, parse_header
from kctl.records.validate import decompression_limit, walk_batch


@dataclass(frozen=True)
class Finding:
    """Something wrong in a partition directory."""

    file: str
    position: int | None
    offset: int | None
    problem: str

    def as_row(self) -> dict[str, Any]:
        return {"file": self.file, "position": self.position, "offset": self.offset, "problem": self.problem}


@dataclass
class VerifyReport:
    path: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not problems: e.g. an index the broker will rebuild

    @property
    def clean(self) -> bool:
        return not self.findings


def _verify_checkpoint_file(path: Path, report: VerifyReport) -> None:
    """A named checkpoint file: it must parse; a leader epoch checkpoint is also held against its
    partition directory's log."""
    if path.name == LEADER_EPOCH_CHECKPOINT:
        segments = segment_logs(path.parent)
        log_start = segments[0][0] if segments else 0
        log_end = log_start
        for base_offset, log_path in segments:
            log_end = max(log_end, base_offset)
            for item in read_batches(log_path):
                if isinstance(item, Unreadable):
                    break
                log_end = item[0].last_offset + 1
        _verify_leader_epochs(path, log_start, log_end, report)
        return
    try:
        read_checkpoint(path)
    except CorruptCheckpointError as error:
        report.findings.append(Finding(path.name, None, None, f"checkpoint cannot be parsed: {error}"))


def _verify_leader_epochs(path: Path, log_start: int, log_end: int, report: VerifyReport) -> None:
    """The leader epoch checkpoint of a partition whose segments span [log_start, log_end)."""
    try:
        entries = read_leader_epoch_checkpoint(path)
    except (CorruptLeaderEpochCheckpointError, OSError) as error:
        report.findings.append(
            Finding(
                path.name,
                None,
                None,
                f"leader epoch checkpoint cannot be trusted ({error}); the broker rebuilds it from the "
                "batches' leader epochs",
            )
        )
        return
    for entry in entries or []:
        if entry.start_offset > log_end:
            report.findings.append(
                Finding(
                    path.name,
                    None,
                    entry.start_offset,
                    f"epoch {entry.epoch} starts at offset {entry.start_offset}, past the log end offset "
                    f"{log_end}",
                )
            )
        elif entry.start_offset < log_start:
            report.notes.append(
                f"{path.name}: epoch {entry.epoch} starts at offset {entry.start_offset}, below the first "
                f"segment's base offset {log_start}; the broker moves it up at start"
            )


# -- verification --------------------------------------------------------------------------------
def verify_targets(path: Path) -> list[Path]:
    """What ``verify`` checks for ``path``: the path itself when it is a segment, a checkpoint or a
    partition directory; for a log directory (partition directories inside, no segments), each
    partition directory and the directory's offset checkpoints, in name order. Empty when a
    directory holds nothing to check."""
    path = Path(path)
    if not path.is_dir() or parse_partition_dir(path.name) is not None or segment_logs(path):
        return [path]
    children = sorted(path.iterdir())
    partitions = [c for c in children if c.is_dir() and parse_partition_dir(c.name) is not None]
    checkpoints = [c for c in children if c.name in OFFSET_CHECKPOINTS and c.is_file()]
    return [*partitions, *checkpoints]


def verify(path: Path) -> VerifyReport:
    """Check a partition directory or one segment: framing, CRCs, offset order and ranges, trailing
    garbage, and the consistency of each ``.index`` and ``.timeindex`` with its log."""
    path = Path(path)
    report = VerifyReport(str(path))
    if is_checkpoint_file(path):
        _verify_checkpoint_file(path, report)
        return report
    segments = segment_logs(path)
    previous_last: int | None = None
    for base_offset, log_path in segments:
        if not log_path.exists():
            report.findings.append(Finding(log_path.name, None, None, "segment file is missing"))
            continue
        report.segments += 1
        previous_last = _verify_segment(base_offset, log_path, previous_last, report)
    if path.is_dir():
        _verify_orphans(path, {base for base, _ in segments}, report)
        log_end = previous_last + 1 if previous_last is not None else (segments[-1][0] if segments else 0)
        _verify_snapshots(path, log_end, report)
        if (path / LEADER_EPOCH_CHECKPOINT).exists():
            log_start = segments[0][0] if segments else 0
            _verify_leader_epochs(path / LEADER_EPOCH_CHECKPOINT, log_start, log_end, report)
    return report


def records_problem(data: bytes, compacted: bool) -> str | None:
    """Why the (CRC-valid) batch ``data`` would be refused by produce validation, or None: an unknown
    codec, a record count that disagrees with the offset range (a compacted batch may hold fewer),
    records that do not parse or decompress (within the bound produce applies)."""
    header = parse_header(data, 0)
    if header.records_count > header.last_offset_delta + 1 or (
        not compacted and not header.is_control and header.records_count != header.last_offset_delta + 1
    ):
        return (
            f"batch declares {header.records_count} records but its offset range holds "
            f"{header.last_offset_delta + 1}"
        )
    try:
        walk_batch(data, 0, header, max_decompressed_size=decompression_limit(header.size), compacted=True)
    except InvalidRecordBatch as error:
        return f"records do not decode: {error}"
    return None


def _is_compacted(directory: Path) -> bool:
    """Whether the partition in ``directory`` was compacted (its log dir's cleaner checkpoint names
    it): gaps in its offsets are then expected."""
    tp = parse_partition_dir(directory.name)
    checkpoint = directory.parent / CLEANER_OFFSET_CHECKPOINT
    if tp is None or not checkpoint.is_file():
        return False
    try:
        return tp in read_checkpoint(checkpoint)
    except (CorruptCheckpointError, OSError):
        return False


def _verify_segment(
    base_offset: int, log_path: Path, previous_last: int | None, report: VerifyReport
) -> int | None:
    compacted = _is_compacted(log_path.parent)
    name = log_path.name
    batch_starts: dict[int, BatchInfo] = {}
    aborts: dict[int, int] = {}  # ABORT marker offset -> producer id
    for item in read_batches(log_path):
        if isinstance(item, Unreadable):
            report.findings.append(
                Finding(name, item.position, None, f"{item.reason} ({item.size} bytes unreadable)")
            )
            break
        info, data = item
        report.batches += 1
        report.records += info.records_count
        report.bytes += info.size
        batch_starts[info.position] = info
        if not info.valid:
            report.findings.append(
                Finding(name, info.position, info.base_offset, info.error or "invalid batch")
            )
        if info.base_offset < base_offset:
            report.findings.append(
                Finding(
                    name,
                    info.position,
                    info.base_offset,
                    f"base offset {info.base_offset} is below the segment's base offset {base_offset}",
                )
            )
        if previous_last is not None and info.base_offset <= previous_last:
            report.findings.append(
                Finding(
                    name,
                    info.position,
                    info.base_offset,
                    f"offsets out of order: base offset {info.base_offset} is not above the previous "
                    f"last offset {previous_last}",
                )
            )
        if info.is_control and info.valid and info.magic == 2:
            marker = marker_of(data)
            if marker is not None and marker.is_abort:
                aborts[info.base_offset] = info.producer_id
        if info.records_count <= 0:
            report.findings.append(Finding(name, info.position, info.base_offset, "batch has no records"))
        elif info.valid and info.magic == 2:
            problem = records_problem(data, compacted)
            if problem is not None:
                report.findings.append(Finding(name, info.position, info.base_offset, problem))
        if previous_last is not None and info.base_offset > previous_last + 1 and not compacted:
            report.findings.append(
                Finding(
                    name,
                    info.position,
                    info.base_offset,
                    f"offset gap: offsets {previous_last + 1}..{info.base_offset - 1} are missing "
                    "(the partition is not compacted)",
                )
            )
        previous_last = info.last_offset
    _verify_offset_index(base_offset, log_path, batch_starts, report)
    _verify_time_index(base_offset, log_path, batch_starts, report)
    _verify_txn_index(txn_index_file(log_path.parent, base_offset), aborts, report)
    return previous_last


def _verify_txn_index(path: Path, aborts: dict[int, int], report: VerifyReport) -> None:
    """The segment's ``.txnindex`` against its ABORT markers (``aborts``: marker offset -> producer)."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) % ENTRY_SIZE:
        report.findings.append(
            Finding(path.name, None, None, f"{len(data) % ENTRY_SIZE} bytes of a torn entry at the end")
        )
    indexed: set[int] = set()
    for position in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, *fields = struct.unpack_from(">hqqqq", data, position)
        entry = AbortedTxn(*fields)
        indexed.add(entry.last_offset)
        if version != 0 or aborts.get(entry.last_offset) != entry.producer_id:
            report.findings.append(
                Finding(
                    path.name,
                    position,
                    entry.last_offset,
                    f"entry {entry} (version {version}): no ABORT marker of its producer at its last offset",
                )
            )
        elif entry.first_offset > entry.last_offset:
            report.findings.append(
                Finding(path.name, position, entry.last_offset, f"entry {entry} starts after its marker")
            )
    for offset, producer_id in sorted(aborts.items()):
        if offset not in indexed:
            report.findings.append(
                Finding(
                    path.name,
                    None,
                    offset,
                    f"the ABORT marker of producer {producer_id} at offset {offset} is not indexed: "
                    "read_committed consumers would see the aborted records",
                )
            )


def _read_index_for_verify(
    path: Path,
    reader: Callable[[Path, int], tuple[list[tuple[int, int]], int]],
    base_offset: int,
    segment_has_batches: bool,
    report: VerifyReport,
) -> list[tuple[int, int]]:
    """The entries of an index file; a missing file is a note, trailing partial entries a finding."""
    if not path.exists():
        if segment_has_batches:
            report.notes.append(f"{path.name} is missing; the broker and `kctl log recover` rebuild it")
        return []
    entries, leftover = reader(path, base_offset)
    if leftover:
        report.findings.append(
            Finding(path.name, None, None, f"{leftover} trailing bytes do not form an entry")
        )
    return entries


def _verify_offset_index(
    base_offset: int, log_path: Path, batches: dict[int, BatchInfo], report: VerifyReport
) -> None:
    path = index_file(log_path.parent, base_offset)
    entries = _read_index_for_verify(path, read_offset_index, base_offset, bool(batches), report)
    previous_offset = previous_position = -1
    for slot, (offset, position) in enumerate(entries):
        where = slot * OFFSET_INDEX_ENTRY.size
        if offset <= previous_offset or position <= previous_position:
            report.findings.append(
                Finding(path.name, where, offset, "index entries are not in increasing order")
            )
        batch = batches.get(position)
        if batch is None:
            report.findings.append(
                Finding(
                    path.name,
                    where,
                    offset,
                    f"entry points at position {position}, where no batch starts",
                )
            )
        elif batch.last_offset != offset:
            report.findings.append(
                Finding(
                    path.name,
                    where,
                    offset,
                    f"entry offset {offset} does not match the batch at position {position} "
                    f"(last offset {batch.last_offset})",
                )
            )
        previous_offset, previous_position = offset, position


def _verify_time_index(
    base_offset: int, log_path: Path, batches: dict[int, BatchInfo], report: VerifyReport
) -> None:
    path = time_index_file(log_path.parent, base_offset)
    entries = _read_index_for_verify(path, read_time_index, base_offset, bool(batches), report)
    ordered = sorted(batches.values(), key=lambda info: info.last_offset)
    last_offsets = [info.last_offset for info in ordered]
    previous_timestamp: int | None = None
    for slot, (timestamp, offset) in enumerate(entries):
        where = slot * TIME_INDEX_ENTRY.size
        if previous_timestamp is not None and timestamp <= previous_timestamp:
            report.findings.append(Finding(path.name, where, offset, "timestamps are not increasing"))
        # the offset of the record with the max timestamp: inside its batch, or the batch's last offset
        slot_of = bisect_left(last_offsets, offset)
        batch = ordered[slot_of] if slot_of < len(ordered) else None
        if batch is None or not batch.base_offset <= offset:
            report.findings.append(Finding(path.name, where, offset, f"no batch holds offset {offset}"))
        elif batch.max_timestamp != timestamp:
            report.findings.append(
                Finding(
                    path.name,
                    where,
                    offset,
                    f"timestamp {timestamp} does not match the batch ending at offset {offset} "
                    f"(max timestamp {batch.max_timestamp})",
                )
            )
        previous_timestamp = timestamp


def _verify_snapshots(directory: Path, log_end: int, report: VerifyReport) -> None:
    """Producer snapshots: each must decode; one above the log end is stale (not a problem)."""
    for offset, path in snapshot_files(directory):
        try:
            read_snapshot(path)
        except (CorruptSnapshotError, OSError) as error:
            report.findings.append(
                Finding(
                    path.name,
                    None,
                    offset,
                    f"producer snapshot cannot be trusted ({error}); the broker deletes it and rebuilds "
                    "the producer state from the log",
                )
            )
            continue
        if offset > log_end:
            report.notes.append(
                f"{path.name} is above the log end offset {log_end}; the broker deletes it at start"
            )


def _verify_orphans(directory: Path, bases: set[int], report: VerifyReport) -> None:
    for child in sorted(directory.iterdir()):
        base = base_offset_of(child)
        if base is None:
            continue
        if child.name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            report.findings.append(Finding(child.name, None, None, "leftover of an interrupted compaction"))
        elif child.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and base not in bases:
            report.findings.append(Finding(child.name, None, None, "index file without a segment"))
