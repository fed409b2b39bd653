"""The partition leader's side of Kafka transactions (KIP-98): control batches and the aborted-transaction
index.

**Control batches.** A transaction ends on each partition it wrote to with a *marker*: a record batch
with the control bit (0x20) and the transactional bit (0x10) set in its attributes, the producer's id
and epoch, no sequence (-1) and one control record (:class:`kctl.records.record.ControlRecord`): key
``version int16 (0) | type int16`` (0 = ABORT, 1 = COMMIT), value ``version int16 (0) |
coordinator_epoch int32``. Markers are written by the partition leader (WriteTxnMarkers from the
transaction coordinator), never by producers; followers copy them as any batch.

**Aborted-transaction index.** Each segment has a ``<base offset>.txnindex`` file listing the
transactions aborted by a marker in that segment, in marker order, each entry 34 bytes big-endian as
Kafka writes it::

    version            int16  0
    producer_id        int64
    first_offset       int64  the transaction's first offset
    last_offset        int64  the offset of its ABORT marker
    last_stable_offset int64  the partition's last stable offset once the transaction was complete

A read_committed consumer fetching [fetch offset, upper bound) is sent the entries whose transaction
overlaps the range (``last_offset >= fetch offset`` and ``first_offset < upper bound``), and drops the
records of those producers from each first offset to the marker. The search walks the segments from the
one holding the fetch offset and stops at the first entry whose last stable offset reaches the upper
bound: every transaction that overlaps the range was open then, so it has been seen.

Entries are kept in memory (loaded on first use); an append is written at once and fsynced with its
segment. A torn tail (a length not a multiple of 34) is cut off at load. The file is created by the
first abort in its segment, truncated with it and deleted with it."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kctl.log.files import FileIO
from kctl.log.producer_state import CompletedTxn, ProducerStateManager
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import CONTROL_FLAG_MASK, BatchHeader, parse_header
from kctl.records.reader import decode_records
from kctl.records.record import ControlRecord, ControlRecordType

if TYPE_CHECKING:
    from kctl.log.segment import LogSegment

_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = _ENTRY.size  # 34
ENTRY_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry of the aborted-transaction index (as Fetch v4+ reports: producer id, first offset)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


# -- control records -------------------------------------------------------------------------------
def encode_marker(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, *, commit: bool, timestamp: int
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker (base offset 0: the log assigns it)."""
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    marker = ControlRecord(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch=coordinator_epoch
    )
    builder.append(timestamp, marker.encode_key(), marker.encode_value())
    return builder.build()


def marker_of(batch: bytes | bytearray | memoryview) -> ControlRecord | None:
    """The end-transaction marker (COMMIT or ABORT) a control batch holds; None when the batch is not
    a control batch, or holds another kind of control record or none."""
    header = parse_header(batch, 0)
    if not header.attributes & CONTROL_FLAG_MASK:
        return None
    for record in decode_records(bytes(batch[: header.size]), 0, header):
        try:
            control = ControlRecord.from_record(record)
        except ValueError:
            return None
        return control if control.is_commit or control.is_abort else None
    return None


# -- the aborted-transaction index -----------------------------------------------------------------
class TransactionIndex:
    """The ``.txnindex`` file of one segment. The file is created by the first abort in the segment."""

    def __init__(self, path: Path, file_io: FileIO) -> None:
        self.path = path
        self._file_io = file_io
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            fd = self._file_io.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            size = self._file_io.size(fd)
            data = self._file_io.pread(fd, size, 0) if size else b""
        finally:
            self._file_io.close(fd)
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = [
            AbortedTxn(*_ENTRY.unpack_from(data, position)[1:]) for position in range(0, whole, ENTRY_SIZE)
        ]
        if whole != len(data):  # a torn last entry
            self._rewrite(entries)
        return entries

    def _rewrite(self, entries: Iterable[AbortedTxn]) -> None:
        entries = list(entries)
        if not entries:
            with contextlib.suppress(FileNotFoundError):
                self._file_io.remove(self.path)
            return
        fd = self._file_io.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self._file_io.write_all(fd, b"".join(_ENTRY.pack(ENTRY_VERSION, *entry) for entry in entries))
            self._file_io.fsync(fd)
        finally:
            self._file_io.close(fd)

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry. One whose marker is already indexed is ignored (the replay at load meets the
        aborts again); one missing below the last entry is put in its place."""
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:  # met again by the replay at load
            if all(known.last_offset != entry.last_offset for known in entries):  # missing: put in place
                entries.append(entry)
                entries.sort(key=lambda known: known.last_offset)
                self._rewrite(entries)
            return
        fd = self._file_io.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            self._file_io.write_all(fd, _ENTRY.pack(ENTRY_VERSION, *entry))
        finally:
            self._file_io.close(fd)
        entries.append(entry)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = self._file_io.open(self.path, os.O_RDONLY)
            try:
                self._file_io.fsync(fd)
            finally:
                self._file_io.close(fd)
        self._dirty = False

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or above ``offset``."""
        entries = self.entries
        kept = [entry for entry in entries if entry.last_offset < offset]
        if len(kept) != len(entries):
            self._entries = kept
            self._rewrite(kept)

    def retain(self, kept: list[AbortedTxn]) -> None:
        """Keep only the ``kept`` entries (compaction removed the others' markers)."""
        if len(kept) != len(self.entries):
            self._entries = list(kept)
            self._rewrite(kept)

    def collect(self, fetch_offset: int, upper_bound: int, into: list[AbortedTxn]) -> bool:
        """Add the entries overlapping [fetch_offset, upper_bound) to ``into``; True when the search is
        complete (an entry's last stable offset reached ``upper_bound``)."""
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                into.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return True
        return False

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._file_io.remove(self.path)
        self._entries = []
        self._dirty = False


# -- what the log does with markers ----------------------------------------------------------------
def record_batches(
    state: ProducerStateManager,
    segment: LogSegment,
    data: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    *,
    position_base: int = 0,
) -> None:
    """Record appended batches in the producer state; a control batch (read from ``data`` at its
    position minus ``position_base``) completes its producer's transaction, and an aborted one is added
    to ``segment``'s transaction index. Only control batches are decoded."""
    record = state.record
    for position, header in batches:
        if not header.attributes & CONTROL_FLAG_MASK:
            record(header)
            continue
        start = position - position_base
        marker = marker_of(data[start : start + header.size])
        completed = record(header, marker)
        if completed is not None and completed.is_aborted:
            segment.txn_index.append(_aborted(state, completed))


def _aborted(state: ProducerStateManager, completed: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(
        completed.producer_id,
        completed.first_offset,
        completed.last_offset,
        state.last_stable_offset_after(completed),
    )


def replay(state: ProducerStateManager, segments: Sequence[LogSegment], start: int) -> None:
    """Replay the batch headers of ``segments`` from offset ``start`` into the producer state (after a
    snapshot, or from nothing); markers are read and the aborts they make re-indexed when their entry
    is missing (recovery)."""
    for segment in segments:
        position = 0
        if segment.base_offset < start:
            found = segment.translate_offset(start)
            if found is None:
                continue
            position = found[0]
        for batch_position, header in segment.iter_headers(position):
            if header.last_offset < start:
                continue
            if header.attributes & CONTROL_FLAG_MASK:
                data = segment.read_batch_bytes(batch_position, header.size)
                record_batches(state, segment, data, [(batch_position, header)], position_base=batch_position)
            else:
                state.record(header)


def collect_aborted(segments: Sequence[LogSegment], fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound), from the transaction indexes
    of ``segments`` (those from the one holding ``fetch_offset`` on)."""
    found: list[AbortedTxn] = []
    for segment in segments:
        if segment.txn_index.collect(fetch_offset, upper_bound, found):
            break
    return found
