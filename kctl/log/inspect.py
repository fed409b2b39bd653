"""Read-only inspection of partition directories and segment files for the offline tools: locating
segments, reading their batches and records, their indexes and the checkpoint files — the listings of
``kctl log dump``, and what ``kctl log verify`` (kctl.log.verify) reads.

Everything here opens files read-only and works without a broker. Producer snapshots
(``<offset>.snapshot``) are not segments: listings skip them. A control batch's record is shown
(``--deep``) as its end-transaction marker (``control``: COMMIT or ABORT, ``coordinator_epoch``).
Checkpoint files are listed by :func:`checkpoint_rows`: a partition's ``leader-epoch-checkpoint`` and
a log directory's offset checkpoints (``replication-offset-checkpoint``,
``recovery-point-offset-checkpoint``, ...)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.log.checkpoint import read_checkpoint
from kctl.log.leader_epoch import read_leader_epoch_checkpoint
from kctl.log.naming import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    base_offset_of,
)
from kctl.log.transactions import marker_of
from kctl.records.header import (
    HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    InvalidRecordBatch,
    compute_crc,
    parse_header,
)
from kctl.records.legacy import LOG_OVERHEAD, InvalidLegacyMessage, parse_message, records_of

OFFSET_INDEX_ENTRY = struct.Struct(">ii")
"""An ``.index`` entry: offset relative to the segment's base offset, position in its log."""
TIME_INDEX_ENTRY = struct.Struct(">qi")
"""A ``.timeindex`` entry: timestamp, offset relative to the segment's base offset."""
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
    usable = len(data) - len(data) % OFFSET_INDEX_ENTRY.size
    entries = [
        (relative + base_offset, position)
        for relative, position in OFFSET_INDEX_ENTRY.iter_unpack(data[:usable])
    ]
    return entries, len(data) - usable


def read_time_index(path: Path, base_offset: int) -> tuple[list[tuple[int, int]], int]:
    """(timestamp, offset) entries and the count of trailing bytes that do not form an entry."""
    data = path.read_bytes()
    usable = len(data) - len(data) % TIME_INDEX_ENTRY.size
    entries = [
        (timestamp, relative + base_offset)
        for timestamp, relative in TIME_INDEX_ENTRY.iter_unpack(data[:usable])
    ]
    return entries, len(data) - usable
