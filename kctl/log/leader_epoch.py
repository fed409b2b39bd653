"""The leader epoch cache of one partition (KIP-101, KIP-279): the offset at which each leader epoch
started, persisted as ``<partition dir>/leader-epoch-checkpoint``.

Every batch a leader appends carries its leader epoch in ``partition_leader_epoch``; the cache keeps one
``(epoch, start_offset)`` entry per epoch, both rising. It answers OffsetsForLeaderEpoch
(:meth:`LeaderEpochCache.end_offset_for`), which a follower uses after a leader change to find where
its log diverges from the new leader's and truncate there instead of at its high watermark.

File format (Kafka's)::

    0                       version
    2                       number of entries
    0 0                     <epoch> <start_offset>, by increasing epoch
    3 120

Written atomically on every change (temporary file, fsync, rename, fsync of the directory) and never
created for an empty cache, so a log that never saw a leader epoch has no such file.

One change is not written at once: the epoch a newly elected leader records at its log end offset
before it appends anything (``assign(..., durable=False)``, from ``Partition.make_leader``). At a
failover a broker takes the lead of thousands of partitions in one pass of its event loop: two
fsyncs each held it for seconds, and the write alone (a temporary file and a rename, 0.3-0.5 ms)
for seconds more. :meth:`LeaderEpochCache.sync` writes it, durably, before the log's recovery point
passes any batch: ``Log.flush`` calls it before it advances the recovery point, and every other
write of the file (an epoch met on an append, a truncation) writes it too. Below the recovery
point the file therefore holds every epoch of the batches there; above it, a crash or a power loss
either cuts the batches of the epoch too, or the log's recovery finds them and adds their epoch
back (the loader's ``recovered_bases``, as Kafka's segment recovery does); an epoch with no batch
on disk needs no entry. A clean close flushes, and so writes it."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kctl.log.files import DEFAULT_FILE_IO, FileIO, LogStorageError
from kctl.log.naming import LEADER_EPOCH_CHECKPOINT

LEADER_EPOCH_CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger("kctl.log")


class CorruptLeaderEpochCheckpointError(ValueError):
    """A leader-epoch-checkpoint file that does not parse, or whose entries do not rise."""


@dataclass(frozen=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    listed = list(entries)
    lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(listed))]
    lines += [f"{entry.epoch} {entry.start_offset}" for entry in listed]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_leader_epoch_checkpoint(text: str, name: str = LEADER_EPOCH_CHECKPOINT) -> list[EpochEntry]:
    """The entries of a checkpoint's text; CorruptLeaderEpochCheckpointError unless it is well formed
    (version 0, the declared count, non-negative epochs and offsets, both strictly rising)."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptLeaderEpochCheckpointError(f"{name}: missing version or count line")
    if lines[0].strip() != str(LEADER_EPOCH_CHECKPOINT_VERSION):
        raise CorruptLeaderEpochCheckpointError(f"{name}: unsupported version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError as error:
        raise CorruptLeaderEpochCheckpointError(f"{name}: bad count line {lines[1]!r}") from error
    body = lines[2:]
    if len(body) != count:
        raise CorruptLeaderEpochCheckpointError(f"{name}: expected {count} entries, found {len(body)}")
    entries: list[EpochEntry] = []
    for line in body:
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError(line)
            entry = EpochEntry(int(parts[0]), int(parts[1]))
        except ValueError as error:
            raise CorruptLeaderEpochCheckpointError(f"{name}: malformed entry {line!r}") from error
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CorruptLeaderEpochCheckpointError(f"{name}: negative epoch or offset in {line!r}")
        if entries and (entry.epoch <= entries[-1].epoch or entry.start_offset < entries[-1].start_offset):
            raise CorruptLeaderEpochCheckpointError(
                f"{name}: entry {line!r} does not follow epoch {entries[-1].epoch} at offset "
                f"{entries[-1].start_offset}"
            )
        entries.append(entry)
    return entries


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry] | None:
    """The entries in ``path``; None when the file does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as error:
        raise CorruptLeaderEpochCheckpointError(f"{path.name}: not ASCII text") from error
    return parse_leader_epoch_checkpoint(text, path.name)


class LeaderEpochCache:
    """The ``(epoch, start_offset)`` entries of one partition, in memory and in its checkpoint file."""

    def __init__(self, directory: Path, file_io: FileIO = DEFAULT_FILE_IO) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LEADER_EPOCH_CHECKPOINT
        self._file_io = file_io
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        self._unwritten = False  # an entry assign(..., durable=False) left to sync()

    # -- state ---------------------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._start_offsets, strict=True)]

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._start_offsets[0]) if self._epochs else None

    def __len__(self) -> int:
        return len(self._epochs)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the batch at ``offset`` was written in, UNDEFINED_EPOCH if below every entry."""
        index = bisect_right(self._start_offsets, offset) - 1
        return self._epochs[index] if index >= 0 else UNDEFINED_EPOCH

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> bool:
        """Replace the entries by the checkpoint file's. False (cache left empty) when the file is
        missing or corrupt; a corrupt file is logged and left for the next write to replace."""
        self._set([])
        try:
            entries = read_leader_epoch_checkpoint(self.path)
        except CorruptLeaderEpochCheckpointError as error:
            logger.warning("ignoring %s: %s", self.path, error)
            return False
        except OSError as error:
            logger.warning("cannot read %s: %s", self.path, error)
            return False
        if entries is None:
            return False
        self._set(entries)
        return True

    def rebuild(self, epochs_and_offsets: Iterable[tuple[int, int]]) -> None:
        """Replace the entries by the first offset of each new epoch in ``epochs_and_offsets`` ((epoch,
        base offset) of the log's batches in offset order; a batch without an epoch, -1, is skipped)
        and write the file (removed instead when nothing was found)."""
        self._set([])
        for epoch, base_offset in epochs_and_offsets:
            if epoch > self.latest_epoch:
                self._epochs.append(epoch)
                self._start_offsets.append(base_offset)
        self._write()

    def _set(self, entries: list[EpochEntry]) -> None:
        self._epochs = [entry.epoch for entry in entries]
        self._start_offsets = [entry.start_offset for entry in entries]

    # -- changes -------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; return whether anything changed.

        Only an epoch larger than the latest is recorded: a stale or repeated one is ignored. Entries
        at or above ``start_offset`` (left by an append that failed after its epoch was recorded) are
        replaced, so start offsets keep rising with epochs. ``durable=False`` leaves the file to
        :meth:`sync` (the module's docstring says when that is safe)."""
        if epoch < 0 or start_offset < 0 or epoch <= self.latest_epoch:
            return False
        keep = bisect_left(self._start_offsets, start_offset)
        if keep < len(self._epochs):  # routine: a leader change before anything was appended
            logger.debug(
                "%s: epoch %d at offset %d replaces entries %s",
                self.directory.name,
                epoch,
                start_offset,
                self.entries[keep:],
            )
            del self._epochs[keep:], self._start_offsets[keep:]
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        if durable:
            self._write()
        else:
            self._unwritten = True
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated to it)."""
        keep = bisect_left(self._start_offsets, end_offset)
        if end_offset < 0 or keep == len(self._epochs):
            return False
        del self._epochs[keep:], self._start_offsets[keep:]
        self._write()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start offset rose to ``start_offset``: drop the entries wholly below it and move the
        one covering it up to start there (an entry starting exactly at it is kept as is)."""
        covering = bisect_right(self._start_offsets, start_offset) - 1
        if covering < 0 or (covering == 0 and self._start_offsets[0] == start_offset):
            return False
        del self._epochs[:covering], self._start_offsets[:covering]
        self._start_offsets[0] = start_offset
        self._write()
        return True

    def clear(self) -> None:
        """Forget every entry and remove the file (the log was truncated fully)."""
        self._set([])
        self._write()

    # -- queries -------------------------------------------------------------------------------
    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers for ``requested_epoch``: the end offset
        of an epoch is the start offset of the next larger epoch, or ``log_end_offset`` for the latest.

        - UNDEFINED_EPOCH requested, the cache empty, or an epoch above the latest: (-1, -1);
        - the latest epoch: (latest, log_end_offset);
        - an epoch with a known epoch at or below it: (that largest known epoch <= requested, start
          offset of the first epoch above requested) — an unknown epoch between two known ones
          answers for the one before it;
        - an epoch below every known one (their entries went with retention): (requested, start
          offset of the earliest known epoch), so the follower truncates to where the leader's
          known history begins."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    # -- the file ------------------------------------------------------------------------------
    def sync(self) -> None:
        """Write, durably, an entry ``assign(..., durable=False)`` left unwritten (nothing to do
        otherwise). Raises LogStorageError."""
        if self._unwritten:
            self._write()

    def _write(self) -> None:
        """Write the checkpoint atomically and durably (remove it when the cache is empty). Raises
        LogStorageError: the caller must not go on as if the change were durable."""
        try:
            if not self._epochs:
                if self.path.exists():
                    self._file_io.remove(self.path)
                    self._file_io.fsync_dir(self.directory)
                self._unwritten = False
                return
            temporary = self.path.with_name(self.path.name + ".tmp")
            fd = self._file_io.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                self._file_io.write_all(fd, encode_leader_epoch_checkpoint(self.entries))
                self._file_io.fsync(fd)
            finally:
                self._file_io.close(fd)
            self._file_io.rename(temporary, self.path)
            self._file_io.fsync_dir(self.directory)
            self._unwritten = False
        except LogStorageError:
            self._remove_temporary()
            raise
        except OSError as error:
            self._remove_temporary()
            raise LogStorageError(
                error.errno or errno.EIO, f"cannot write {self.path}: {error.strerror or error}"
            ) from error

    def _remove_temporary(self) -> None:
        with contextlib.suppress(OSError):
            self._file_io.remove(self.path.with_name(self.path.name + ".tmp"))

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.directory.name}, {[(e.epoch, e.start_offset) for e in self.entries]})"
