"""Idempotent-producer state of one partition: for each producer id, its epoch and the sequence
numbers and offsets of its last few batches, so a retried batch is recognised (and answered with its
original offsets instead of being written twice) and a gap in sequences is refused.

Works from batch headers only (producer_id, producer_epoch, base_sequence, last_offset_delta). A
producer the partition has forgotten (no snapshot or batch left that mentions it) is accepted at any
sequence, as Kafka does since KIP-360 — but only where it can have been forgotten: a log that has
lost nothing since offset 0 knows every producer that wrote to it, and there a new producer's first
batch must be at sequence 0 (``Log.knows_every_producer``). What a log cannot tell from its offsets is
recorded once in the file ``producer-state.incomplete`` of the partition directory, with the reason:
a producer expired (``producer.id.expiration.ms``), or the replica took the lead with an ISR of
itself alone (perhaps an unclean election: records other replicas acknowledged may be missing).

Producer snapshots (Kafka's ``<offset>.snapshot`` files) keep the state across segment rolls and
restarts. ``<20-digit offset>.snapshot`` in the partition directory holds the state of every producer as
of that offset, i.e. built from every batch below it. The log writes one when it rolls a segment (at the
new segment's base offset) and when it is closed (at the log end offset); appends never write one. At
load the log takes the newest valid snapshot in [oldest segment base, trusted end] and replays the batch
headers from its offset to the log end (see :class:`kctl.log.log.Log`).

Transactions (KIP-98): a transactional batch (attribute bit 0x10) of a producer with no ongoing
transaction on this partition starts one at its base offset (a later epoch keeps it, and a
non-transactional batch of that producer meanwhile is INVALID_TXN_STATE); a control batch (a COMMIT or
ABORT marker, :mod:`kctl.log.transactions`) ends it, and :meth:`ProducerStateManager.record` returns
the completed transaction. The manager keeps the ongoing transactions' first offsets and the completed
transactions whose marker is not yet below the high watermark; the smallest first offset among them is
the partition's *first unstable offset*, and the last stable offset is the high watermark capped by it.
With no transaction open both sets are empty and nothing is computed.

Snapshot format (version 2; big-endian, like the rest of Kafka's formats)::

    magic          4 bytes  b"KCPS"
    version        int16    2 (version 1 files, without the two transaction fields, are still read)
    crc            uint32   CRC-32C of every byte after this field
    offset         int64    the offset the state covers (equals the file name)
    producer_count int32
    producer_count times, by increasing producer id:
        producer_id    int64
        epoch          int16
        coordinator_epoch     int32  (version 2) the epoch of the coordinator that wrote its last marker
        current_txn_first_offset int64 (version 2) first offset of its ongoing transaction, -1 if none
        batch_count    int8     0..5, oldest first
        batch_count times:
            first_sequence int32
            last_sequence  int32
            first_offset   int64
            last_offset    int64
            max_timestamp  int64

A file whose magic, version, CRC, length or contents (offsets below the snapshot's, at most 5 batches,
no repeated producer) do not check out is corrupt: it is ignored, never trusted, and deleted. Snapshots
are written to ``<name>.tmp``, fsynced, renamed, and the directory fsynced, so a crash leaves either the
whole file or a ``.tmp`` leftover that the log removes at load."""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kctl.log.files import DEFAULT_FILE_IO, FileIO
from kctl.log.naming import SNAPSHOT_SUFFIX, base_offset_of, offset_file_name, snapshot_file
from kctl.records.crc import crc32c
from kctl.records.header import BatchHeader
from kctl.records.record import ControlRecord

INCOMPLETE_MARKER = "producer-state.incomplete"  # the state may lack producers (see the module docstring)
RECENT_BATCHES = 5  # Kafka keeps the metadata of a producer's last 5 batches for deduplication
INT32_MAX = 2**31 - 1

SNAPSHOT_MAGIC = b"KCPS"
SNAPSHOT_VERSION = 2
_PREFIX = struct.Struct(">4shI")  # magic, version, crc
_BODY_HEADER = struct.Struct(">qi")  # offset, producer count
_PRODUCER_V1 = struct.Struct(">qhb")  # producer id, epoch, batch count
_PRODUCER = struct.Struct(">qhiqb")  # producer id, epoch, coordinator epoch, txn first offset, batch count
_BATCH = struct.Struct(">iiqqq")  # first/last sequence, first/last offset, max timestamp

logger = logging.getLogger("kctl.log")


class ProducerStateError(ValueError):
    """A batch an idempotent producer must not write."""


class OutOfOrderSequenceError(ProducerStateError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER: the batch does not follow the producer's last sequence."""


class InvalidProducerEpochError(ProducerStateError):
    """INVALID_PRODUCER_EPOCH: the batch's epoch is older than the producer's current epoch."""


class InvalidTxnStateError(ProducerStateError):
    """INVALID_TXN_STATE: a non-transactional batch from a producer whose transaction is ongoing on the
    partition (Kafka's "Expected transactional write from producer")."""


class CorruptSnapshotError(ValueError):
    """A producer snapshot file that cannot be trusted (torn, truncated, damaged or of another version)."""


@dataclass(frozen=True)
class BatchRecord:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class InvalidCoordinatorEpochError(ProducerStateError):
    """TRANSACTION_COORDINATOR_FENCED: a marker from a coordinator older than the last one seen."""


class CompletedTxn(NamedTuple):
    """A transaction a marker just ended on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchRecord] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no ongoing transaction on this partition

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def _last_sequence(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


# -- the snapshot format ---------------------------------------------------------------------------
def encode_snapshot(offset: int, producers: dict[int, ProducerEntry]) -> bytes:
    """The bytes of a snapshot of ``producers`` as of ``offset`` (format in the module docstring)."""
    body = bytearray(_BODY_HEADER.pack(offset, len(producers)))
    for producer_id in sorted(producers):
        entry = producers[producer_id]
        body += _PRODUCER.pack(
            producer_id,
            entry.epoch,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
            len(entry.batches),
        )
        for batch in entry.batches:
            body += _BATCH.pack(
                batch.first_sequence,
                batch.last_sequence,
                batch.first_offset,
                batch.last_offset,
                batch.max_timestamp,
            )
    return _PREFIX.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, expected_offset: int | None = None) -> tuple[int, dict[int, ProducerEntry]]:
    """(offset, producers) of a snapshot; raises CorruptSnapshotError unless every check passes."""
    if len(data) < _PREFIX.size + _BODY_HEADER.size:
        raise CorruptSnapshotError(f"{len(data)} bytes are too few for a snapshot")
    magic, version, crc = _PREFIX.unpack_from(data, 0)
    if magic != SNAPSHOT_MAGIC:
        raise CorruptSnapshotError(f"bad magic {magic!r}")
    if version not in (1, SNAPSHOT_VERSION):
        raise CorruptSnapshotError(f"unsupported snapshot version {version}")
    body = memoryview(data)[_PREFIX.size :]
    computed = crc32c(body)
    if computed != crc:
        raise CorruptSnapshotError(f"CRC mismatch: stored {crc:08x}, computed {computed:08x}")
    offset, count = _BODY_HEADER.unpack_from(body, 0)
    if expected_offset is not None and offset != expected_offset:
        raise CorruptSnapshotError(f"holds the state at offset {offset}, its name says {expected_offset}")
    if offset < 0 or count < 0:
        raise CorruptSnapshotError(f"negative offset {offset} or producer count {count}")
    producers: dict[int, ProducerEntry] = {}
    position = _BODY_HEADER.size
    layout = _PRODUCER if version >= 2 else _PRODUCER_V1
    try:
        for _ in range(count):
            if version >= 2:
                producer_id, epoch, coordinator_epoch, txn_first, batch_count = layout.unpack_from(
                    body, position
                )
            else:
                producer_id, epoch, batch_count = layout.unpack_from(body, position)
                coordinator_epoch, txn_first = -1, -1
            position += layout.size
            if (
                producer_id < 0
                or producer_id in producers
                or not 0 <= batch_count <= RECENT_BATCHES
                or not -1 <= txn_first < offset
            ):
                raise CorruptSnapshotError(
                    f"bad entry for producer {producer_id} ({batch_count} batches) at byte {position}"
                )
            entry = producers[producer_id] = ProducerEntry(epoch, coordinator_epoch=coordinator_epoch)
            entry.current_txn_first_offset = txn_first
            for _ in range(batch_count):
                batch = BatchRecord(*_BATCH.unpack_from(body, position))
                position += _BATCH.size
                if not 0 <= batch.first_offset <= batch.last_offset < offset:
                    raise CorruptSnapshotError(
                        f"producer {producer_id} batch [{batch.first_offset}, {batch.last_offset}] is "
                        f"not below the snapshot offset {offset}"
                    )
                entry.batches.append(batch)
    except struct.error as error:
        raise CorruptSnapshotError(f"truncated after {position} bytes of the body") from error
    if position != len(body):
        raise CorruptSnapshotError(f"{len(body) - position} trailing bytes after the last producer")
    return offset, producers


def snapshot_files(directory: Path) -> list[tuple[int, Path]]:
    """(offset, path) of the ``<20 digits>.snapshot`` files in ``directory``, by increasing offset."""
    found = []
    for path in directory.iterdir():
        offset = base_offset_of(path)
        if offset is not None and path.name == offset_file_name(offset) + SNAPSHOT_SUFFIX:
            found.append((offset, path))
    return sorted(found)


def read_snapshot(path: Path, file_io: FileIO = DEFAULT_FILE_IO) -> dict[int, ProducerEntry]:
    """The producers in a snapshot file; CorruptSnapshotError when it cannot be trusted."""
    fd = file_io.open(path, os.O_RDONLY)
    try:
        size = file_io.size(fd)
        data = file_io.pread(fd, size, 0) if size else b""
    finally:
        file_io.close(fd)
    if len(data) != size:
        raise CorruptSnapshotError(f"short read: {len(data)} of {size} bytes")
    _, producers = decode_snapshot(data, base_offset_of(path))
    return producers


def write_snapshot(
    directory: Path,
    offset: int,
    producers: dict[int, ProducerEntry],
    file_io: FileIO = DEFAULT_FILE_IO,
    *,
    sync_directory: bool = True,
) -> Path:
    """Write ``<offset>.snapshot`` atomically (temp file, fsync, rename, fsync of the directory unless
    the caller fsyncs it anyway). Raises OSError (LogStorageError) and leaves no temp file behind."""
    path = snapshot_file(directory, offset)
    temporary = path.with_name(path.name + ".tmp")
    data = encode_snapshot(offset, producers)
    try:
        fd = file_io.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            file_io.write_all(fd, data)
            file_io.fsync(fd)
        finally:
            file_io.close(fd)
        file_io.rename(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            file_io.remove(temporary)
        raise
    if sync_directory:
        file_io.fsync_dir(directory)
    return path


# -- the state ------------------------------------------------------------------------------------
class ProducerStateManager:
    """The producers of one partition, and its snapshot files when given the partition ``directory``."""

    def __init__(self, directory: Path | None = None, file_io: FileIO = DEFAULT_FILE_IO) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.directory = directory
        self._file_io = file_io
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its ongoing transaction
        self.unreplicated: list[CompletedTxn] = []  # completed, marker not yet below the high watermark
        # whether the state may lack producers that wrote to the log (kept on disk: INCOMPLETE_MARKER)
        self.incomplete = directory is not None and (directory / INCOMPLETE_MARKER).exists()

    def check(
        self, header: BatchHeader, *, from_coordinator: bool = False, knows_every_producer: bool = False
    ) -> BatchRecord | None:
        """Validate a batch before it is appended. Returns the original batch if this one is a
        duplicate (already written), None if it may be appended; raises ProducerStateError otherwise.
        ``from_coordinator``: a batch the group coordinator writes for a producer (a transactional
        offset commit, Kafka's AppendOrigin.COORDINATOR): its epoch is checked, not its sequence.

        A producer this state does not know may start at any sequence (Kafka's rule since KIP-360:
        its state may have gone with the records retention deleted) — unless
        ``knows_every_producer`` (the log has lost nothing since its start: see
        ``Log.knows_every_producer``). Then its first batch must be at sequence 0: a later one means
        an earlier batch never got here (refused by a broker not yet leader, or appended on an old
        leader and lost with it), and accepting it would let the producer take the missing batch
        for written (librdkafka acknowledges a batch whose answer it lost once a later one
        succeeds)."""
        if header.producer_id < 0 or header.is_control:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            if knows_every_producer and header.base_sequence != 0 and not from_coordinator:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} is new to this partition, which has lost no "
                    f"producer's state: its first batch must have sequence 0, not {header.base_sequence} "
                    "(an earlier batch did not get here)"
                )
            return None
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
            )
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {header.producer_id}: its transaction "
                f"started at offset {entry.current_txn_first_offset}"
            )
        if from_coordinator:
            return None
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} new epoch {header.producer_epoch} must start at "
                    f"sequence 0, not {header.base_sequence}"
                )
            return None
        last_sequence = _last_sequence(header)
        for batch in entry.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last_sequence:
                return batch
        expected = (entry.last_sequence + 1) % (INT32_MAX + 1)
        if entry.batches and header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence}, expected {expected}"
            )
        return None

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker of a fenced producer epoch (InvalidProducerEpochError) or from a fenced
        coordinator (InvalidCoordinatorEpochError), as Kafka's leader does."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} epoch {producer_epoch} is older than {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise InvalidCoordinatorEpochError(
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older "
                f"than {entry.coordinator_epoch}"
            )

    def record(self, header: BatchHeader, marker: ControlRecord | None = None) -> CompletedTxn | None:
        """Remember an appended batch (its header carries the assigned offsets). For a control batch,
        ``marker`` is its COMMIT or ABORT record: the producer's transaction is complete and returned."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            return self._complete(header, marker) if marker is not None else None
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            # a new epoch keeps the coordinator epoch and the ongoing transaction (as Kafka's entry does)
            coordinator_epoch = entry.coordinator_epoch if entry is not None else -1
            txn_first_offset = entry.current_txn_first_offset if entry is not None else -1
            entry = self.producers[header.producer_id] = ProducerEntry(
                header.producer_epoch,
                coordinator_epoch=coordinator_epoch,
                current_txn_first_offset=txn_first_offset,
            )
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self.ongoing[header.producer_id] = header.base_offset
        entry.batches.append(
            BatchRecord(
                header.base_sequence,
                _last_sequence(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

        return None

    def _complete(self, header: BatchHeader, marker: ControlRecord) -> CompletedTxn:
        producer_id = header.producer_id
        entry = self.producers.get(producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            batches = entry.batches if entry is not None and entry.epoch == header.producer_epoch else None
            entry = self.producers[producer_id] = ProducerEntry(header.producer_epoch)
            if batches:
                entry.batches = batches
        if marker.coordinator_epoch is not None:
            entry.coordinator_epoch = marker.coordinator_epoch
        first = self.ongoing.pop(producer_id, None)
        entry.current_txn_first_offset = -1
        completed = CompletedTxn(
            producer_id, header.base_offset if first is None else first, header.base_offset, marker.is_abort
        )
        self.unreplicated.append(completed)
        return completed

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction that is ongoing or whose marker is not yet below
        ``high_watermark``; None when there is none (the common case: two emptiness tests)."""
        if self.unreplicated:
            self.unreplicated = [txn for txn in self.unreplicated if txn.last_offset >= high_watermark]
        if not self.ongoing and not self.unreplicated:
            return None
        firsts = [txn.first_offset for txn in self.unreplicated]
        firsts.extend(self.ongoing.values())
        return min(firsts)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The partition's last stable offset: ``high_watermark`` capped by the first unstable offset."""
        if not self.ongoing and not self.unreplicated:  # no transaction: nothing to compute
            return high_watermark
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` is done (its txn index entry's): the first offset of
        the earliest other ongoing transaction, else the offset after its marker."""
        others = [
            first for producer_id, first in self.ongoing.items() if producer_id != completed.producer_id
        ]
        return min(others) if others else completed.last_offset + 1

    def _set_producers(self, producers: dict[int, ProducerEntry]) -> None:
        self.producers = producers
        self.ongoing = {
            producer_id: entry.current_txn_first_offset
            for producer_id, entry in producers.items()
            if entry.current_txn_first_offset >= 0
        }
        self.unreplicated = []

    def clear(self) -> None:
        self._set_producers({})

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers whose last batch's max timestamp is more than ``expiration_ms`` before
        ``now_ms`` (Kafka's ``producer.id.expiration.ms``); returns their ids. A forgotten producer's
        next batch is accepted at any sequence, as for a new one."""
        cutoff = now_ms - expiration_ms
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if (not entry.batches or entry.batches[-1].max_timestamp < cutoff)
            and entry.current_txn_first_offset < 0  # never a producer in a transaction
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        if expired:
            self.mark_incomplete(f"producer.id.expiration.ms forgot producer(s) {sorted(expired)}")
        return expired

    def mark_incomplete(self, reason: str) -> None:
        """From now on (across restarts too: the snapshots cannot tell) this state may lack producers
        that wrote to the log, so a producer it does not know may start at any sequence. The first
        ``reason`` is kept in the partition directory's ``producer-state.incomplete``."""
        if self.incomplete:
            return
        self.incomplete = True
        if self.directory is None:
            return
        path = self.directory / INCOMPLETE_MARKER
        fd = self._file_io.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self._file_io.write_all(fd, reason.encode() + b"\n")
            self._file_io.fsync(fd)
        finally:
            self._file_io.close(fd)
        self._file_io.fsync_dir(self.directory)

    # -- snapshots ---------------------------------------------------------------------------------
    def _directory(self) -> Path:
        if self.directory is None:
            raise ValueError("this ProducerStateManager has no directory for snapshots")
        return self.directory

    def take_snapshot(self, offset: int, *, sync_directory: bool = True) -> Path:
        """Write the current state as ``<offset>.snapshot`` (the caller guarantees it is the state as of
        ``offset``: every batch below it recorded, none above)."""
        return write_snapshot(
            self._directory(), offset, self.producers, self._file_io, sync_directory=sync_directory
        )

    def load_latest_snapshot(self, lower: int, upper: int) -> int | None:
        """Replace the state by the newest valid snapshot whose offset lies in [lower, upper] and return
        its offset; corrupt snapshots met on the way are deleted, unreadable ones skipped. None (state
        cleared) if there is none."""
        self.clear()
        for offset, path in reversed(snapshot_files(self._directory())):
            if offset > upper:
                continue
            if offset < lower:
                break
            try:
                self._set_producers(read_snapshot(path, self._file_io))
            except CorruptSnapshotError as error:
                logger.warning("ignoring producer snapshot %s and deleting it: %s", path, error)
                with contextlib.suppress(OSError):
                    self._file_io.remove(path)
                continue
            except OSError as error:  # unreadable now, perhaps not for good: skipped, kept
                logger.warning("ignoring producer snapshot %s: %s", path, error)
                continue
            return offset
        return None

    def delete_snapshots_above(self, offset: int) -> int:
        """Delete the snapshots whose offset is above ``offset``; return how many were deleted."""
        deleted = 0
        for snapshot_offset, path in snapshot_files(self._directory()):
            if snapshot_offset > offset:
                with contextlib.suppress(FileNotFoundError):
                    self._file_io.remove(path)
                deleted += 1
        return deleted

    def delete_snapshots_before(self, offset: int) -> int:
        """Delete the snapshots whose offset is below ``offset``, always keeping the newest one; return
        how many were deleted."""
        deleted = 0
        for snapshot_offset, path in snapshot_files(self._directory())[:-1]:
            if snapshot_offset < offset:
                with contextlib.suppress(FileNotFoundError):
                    self._file_io.remove(path)
                deleted += 1
        return deleted

    def delete_all_snapshots(self) -> None:
        for _, path in snapshot_files(self._directory()):
            with contextlib.suppress(FileNotFoundError):
                self._file_io.remove(path)
