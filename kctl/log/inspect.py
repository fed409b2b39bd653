"""Read-only inspection of partition directories and segment files for the offline tools:
batch listings (``kctl log dump``) and consistency findings (``kctl log verify``).

Everything here opens files read-only and works without a broker; it shares the validation rules
of recovery (:func:`kctl.log.segment.scan_file`) so verify reports what recovery would cut. Producer
snapshots (``<offset>.snapshot``) are not segments: listings skip them, and verify checks that each one
decodes (version, CRC, contents) and notes those above the log end, which the broker deletes.

Transactions: a control batch's record is shown (``--deep``) as its end-transaction marker (``control``:
COMMIT or ABORT, ``coordinator_epoch``); verify checks each segment's aborted-transaction index
(``.txnindex``, :mod:`kctl.log.transactions`) against the ABORT markers in the segment: whole 34-byte
entries, each one an ABORT marker of its producer at its last offset, every ABORT marker indexed (a
missing entry would let read_committed consumers see aborted records), no index without its segment.

Checkpoint files are listed by :func:`checkpoint_rows` and checked by :func:`verify` when named: a
partition's ``leader-epoch-checkpoint`` (also checked by verify of its partition directory: it must
parse, epochs and start offsets rise, none starts past the log end) and a log directory's offset
checkpoints (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``, ...)."""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kctl.log.checkpoint import CorruptCheckpointError, read_checkpoint
from kctl.log.leader_epoch import CorruptLeaderEpochCheckpointError, read_leader_epoch_checkpoint
from kctl.log.naming import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
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
from kctl.records.header import (
    HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    InvalidRecordBatch,
    compute_crc,
    parse_header,
)
from kctl.records.legacy import LOG_OVERHEAD, InvalidLegacyMessage, parse_message, records_of
from kctl.records.validate import decompression_limit, walk_batch

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
OFFSET_CHECKPOINTS = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    }
)
READ_CHUNK = 4 * 1024 * 1024


class NotASegmentError(ValueError):
    """A path that is neither a partition directory nor a segment family file."""


@dataclass
class BatchInfo:
    """One batch as found in a segment file (valid or not)."""

    file: str
    position: int
    base_offset: int
    last_offset: int
    records_count: int
    size: int
    magic: int
    compression: str
    timestamp_type: str
    first_timestamp: int
    max_timestamp: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    crc_stored: int
    crc_computed: int
    valid: bool
    error: str | None = None
    records: list[dict[str, Any]] | None = None

    def as_row(self) -> dict[str, Any]:
        row = {
            "file": self.file,
            "position": self.position,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "count": self.records_count,
            "size": self.size,
            "magic": self.magic,
            "compression": self.compression,
            "timestamp_type": self.timestamp_type,
            "first_timestamp": self.first_timestamp,
            "max_timestamp": self.max_timestamp,
            "leader_epoch": self.partition_leader_epoch,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "transactional": self.is_transactional,
            "control": self.is_control,
            "crc": f"{self.crc_stored:08x}",
            "crc_computed": f"{self.crc_computed:08x}",
            "valid": self.valid,
            "error": self.error,
        }
        return row


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


# -- locating files ------------------------------------------------------------------------------
def segment_logs(path: Path) -> list[tuple[int, Path]]:
    """(base_offset, .log path) of the segments at ``path``: a partition directory or one segment file
    (``.log``, or its ``.index``/``.timeindex``, which name the same segment)."""
    if path.is_dir():
        found = []
        for child in path.iterdir():
            if child.name.endswith(LOG_SUFFIX) and (base := base_offset_of(child)) is not None:
                found.append((base, child))
        return sorted(found)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if is_checkpoint_file(path):
        raise NotASegmentError(
            f"{path} is a checkpoint, not a segment file (`kctl log dump` lists it, `kctl log verify` "
            "checks it)"
        )
    base = base_offset_of(path)
    if base is None:
        raise NotASegmentError(f"{path} is not named by a 20-digit base offset")
    if path.name.endswith(SNAPSHOT_SUFFIX):
        raise NotASegmentError(
            f"{path} is a producer snapshot, not a segment file (`kctl log verify` on its partition "
            "directory checks it)"
        )
    return [(base, path.with_name(path.name.split(".", 1)[0] + LOG_SUFFIX))]


# -- checkpoints ---------------------------------------------------------------------------------
def is_checkpoint_file(path: Path) -> bool:
    """Whether ``path`` is a leader epoch checkpoint or a log directory's offset checkpoint."""
    return path.is_file() and (path.name == LEADER_EPOCH_CHECKPOINT or path.name in OFFSET_CHECKPOINTS)


def checkpoint_rows(path: Path) -> list[dict[str, Any]]:
    """The entries of a checkpoint file: ``{"type": "leader_epoch", "file", "epoch", "start_offset"}``
    rows for a leader-epoch-checkpoint, ``{"type": "checkpoint", "file", "topic", "partition",
    "offset"}`` rows for an offset checkpoint. Raises CorruptLeaderEpochCheckpointError /
    CorruptCheckpointError when it does not parse."""
    if path.name == LEADER_EPOCH_CHECKPOINT:
        entries = read_leader_epoch_checkpoint(path) or []
        return [
            {"type": "leader_epoch", "file": path.name, "epoch": e.epoch, "start_offset": e.start_offset}
            for e in entries
        ]
    return [
        {
            "type": "checkpoint",
            "file": path.name,
            "topic": tp.topic,
            "partition": tp.partition,
            "offset": offset,
        }
        for tp, offset in sorted(read_checkpoint(path).items())
    ]


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


# -- reading batches -----------------------------------------------------------------------------
def _batch_info(
    name: str, position: int, header: BatchHeader, crc_computed: int, error: str | None
) -> BatchInfo:
    return BatchInfo(
        file=name,
        position=position,
        base_offset=header.base_offset,
        last_offset=header.last_offset,
        records_count=header.records_count,
        size=header.size,
        magic=header.magic,
        compression=_CODEC_NAMES.get(header.compression, f"unknown({header.compression})"),
        timestamp_type="LogAppendTime" if header.is_log_append_time else "CreateTime",
        first_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        crc_stored=header.crc,
        crc_computed=crc_computed,
        valid=error is None,
        error=error,
    )


@dataclass(frozen=True)
class Unreadable:
    """Bytes at the end of a segment that cannot be framed as batches."""

    file: str
    position: int
    size: int
    reason: str


def read_batches(log_path: Path) -> Iterator[tuple[BatchInfo, bytes] | Unreadable]:
    """Every batch of a segment file in order, with its bytes. A batch whose framing holds (sane length,
    magic 2) is yielded even when its CRC is wrong; the walk stops with an :class:`Unreadable` at the
    first bytes that cannot be framed (truncated batch, bad length or magic, garbage)."""
    with open(log_path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        position = 0
        while position < size:
            remaining = size - position
            head = os.pread(handle.fileno(), HEADER_SIZE, position)
            if remaining < HEADER_SIZE:
                yield Unreadable(
                    log_path.name,
                    position,
                    remaining,
                    f"{remaining} trailing bytes are too few for a batch header",
                )
                return
            if head[MAGIC_OFFSET] in (0, 1):  # the seeds' message formats (before RecordBatch)
                legacy = _legacy_entry(handle.fileno(), log_path.name, position, remaining)
                yield legacy
                if isinstance(legacy, Unreadable):
                    return
                position += legacy[0].size
                continue
            try:
                header = parse_header(head, 0)
            except InvalidRecordBatch as error:
                yield Unreadable(log_path.name, position, remaining, str(error))
                return
            if header.size > remaining:
                yield Unreadable(
                    log_path.name,
                    position,
                    remaining,
                    f"batch of {header.size} bytes is truncated: only {remaining} bytes remain",
                )
                return
            data = os.pread(handle.fileno(), header.size, position)
            crc = compute_crc(data, 0, header.size)
            problem = (
                None if crc == header.crc else (f"CRC mismatch: stored {header.crc:08x}, computed {crc:08x}")
            )
            yield _batch_info(log_path.name, position, header, crc, problem), data
            position += header.size


def holds_legacy_messages(log_path: Path) -> bool:
    """Whether a segment file starts with a magic 0/1 message (the formats before RecordBatch)."""
    try:
        with open(log_path, "rb") as handle:
            head = handle.read(MAGIC_OFFSET + 1)
    except FileNotFoundError:
        return False
    return len(head) > MAGIC_OFFSET and head[MAGIC_OFFSET] in (0, 1)


def _legacy_entry(fd: int, name: str, position: int, remaining: int) -> tuple[BatchInfo, bytes] | Unreadable:
    """A magic 0/1 log entry as a BatchInfo (a compressed wrapper: its inner messages' offsets), or
    Unreadable when it cannot be framed."""
    head = os.pread(fd, LOG_OVERHEAD, position)
    size = LOG_OVERHEAD + struct.unpack_from(">i", head, 8)[0]
    data = os.pread(fd, max(min(size, remaining), LOG_OVERHEAD), position)
    try:
        message = parse_message(data)
    except InvalidLegacyMessage as error:
        return Unreadable(name, position, remaining, f"magic {head[MAGIC_OFFSET]} message: {error}")
    error_text: str | None = None
    try:
        records = records_of(message)
    except InvalidLegacyMessage as error:
        records, error_text = [], str(error)
    if not message.crc_ok:
        error_text = f"CRC-32 mismatch: stored {message.crc_stored:08x}, computed {message.crc_computed:08x}"
    timestamps = [r.timestamp for r in records] or [message.timestamp]
    info = BatchInfo(
        file=name,
        position=position,
        base_offset=records[0].offset if records else message.offset,
        last_offset=message.offset,
        records_count=len(records),
        size=message.size,
        magic=message.magic,
        compression=_CODEC_NAMES.get(message.codec, f"unknown({message.codec})"),
        timestamp_type="LogAppendTime" if message.log_append_time else "CreateTime",
        first_timestamp=timestamps[0],
        max_timestamp=max(timestamps),
        partition_leader_epoch=-1,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
        is_control=False,
        crc_stored=message.crc_stored,
        crc_computed=message.crc_computed,
        valid=error_text is None,
        error=error_text,
    )
    return info, data


def decode_records(data: bytes) -> list[dict[str, Any]]:
    """Each record of a batch (or of a magic 0/1 log entry) as a dict (offset, timestamp, key, value,
    headers); bytes stay bytes."""
    from kctl.records.reader import decode_batch

    if len(data) > MAGIC_OFFSET and data[MAGIC_OFFSET] in (0, 1):
        try:
            records = records_of(parse_message(data))
        except InvalidLegacyMessage as error:
            raise InvalidRecordBatch(str(error)) from None
        return [
            {"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value, "headers": []}
            for r in records
        ]

    batch = decode_batch(data, verify_crc=False)
    rows: list[dict[str, Any]] = [
        {
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": record.key,
            "value": record.value,
            "headers": list(record.headers),
        }
        for record in batch.records
    ]
    if batch.header.is_control and rows and (marker := marker_of(data)) is not None:
        rows[0]["control"] = "COMMIT" if marker.is_commit else "ABORT"
        rows[0]["coordinator_epoch"] = marker.coordinator_epoch
    return rows


def read_offset_index(path: Path, base_offset: int) -> tuple[list[tuple[int, int]], int]:
    """(offset, position) entries and the count of trailing bytes that do not form an entry."""
    data = path.read_bytes()
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    entries = [
        (relative + base_offset, position) for relative, position in _OFFSET_ENTRY.iter_unpack(data[:usable])
    ]
    return entries, len(data) - usable


def read_time_index(path: Path, base_offset: int) -> tuple[list[tuple[int, int]], int]:
    """(timestamp, offset) entries and the count of trailing bytes that do not form an entry."""
    data = path.read_bytes()
    usable = len(data) - len(data) % _TIME_ENTRY.size
    entries = [
        (timestamp, relative + base_offset) for timestamp, relative in _TIME_ENTRY.iter_unpack(data[:usable])
    ]
    return entries, len(data) - usable


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
        where = slot * _OFFSET_ENTRY.size
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
        where = slot * _TIME_ENTRY.size
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
