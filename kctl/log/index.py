"""Sparse segment indexes, in Kafka's on-disk entry formats.

* ``.index``: 8-byte entries ``(int32 offset - base_offset, int32 file position)``; an entry maps the
  last offset of a batch to the position where that batch starts.
* ``.timeindex``: 12-byte entries ``(int64 max timestamp so far, int32 offset - base_offset)``; appended
  only when the segment's max timestamp grows.

Entries are kept in compact in-memory arrays (loaded lazily, for binary search) and written to the
file in batches: at flush, close, truncation, or once 64 KiB are pending. An index can lag its segment
only above the recovery point, where recovery rebuilds it from the log after a crash."""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path

from kctl.log.files import FileIO

PENDING_LIMIT = 64 * 1024
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(ValueError):
    """An index file inconsistent with itself or its segment."""


class _Index:
    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int, file_io: FileIO) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._file_io = file_io
        self._unsynced = False  # written or truncated since the last fsync
        self._keys: array | None = None  # loaded lazily
        self._values: array | None = None
        self._pending = bytearray()  # entries not yet written to the file

    # -- file handling -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The index file, open for one write, truncation or fsync. No descriptor is kept between
        them: a broker hosting thousands of partitions holds one descriptor per log (its active
        segment's ``.log``), not three, whatever recovery or appends did to the indexes."""
        fd = self._file_io.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            yield fd
        finally:
            self._file_io.close(fd)

    def _load(self) -> None:
        if self._keys is not None:
            return
        self._write_pending()
        keys, values = array("q"), array("q")
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        usable = len(data) - len(data) % self.entry_size
        for key, value in self._unpack_all(data[:usable]):
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values

    def _unpack_all(self, data: bytes) -> list[tuple[int, int]]:
        raise NotImplementedError

    def _write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= PENDING_LIMIT:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            with self._opened() as fd:
                self._file_io.write_all(fd, self._pending)
            self._pending.clear()
            self._unsynced = True

    def flush(self) -> None:
        self._write_pending()
        if self._unsynced:
            with self._opened() as fd:
                self._file_io.fsync(fd)
            self._unsynced = False

    def close(self) -> None:
        self._write_pending()

    def delete(self) -> None:
        self._pending.clear()
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self._file_io.remove(self.path)
        self._keys, self._values = array("q"), array("q")

    def reset(self) -> None:
        """Remove every entry."""
        self._truncate_entries(0)

    def _truncate_entries(self, count: int) -> None:
        self._load()
        self._write_pending()
        assert self._keys is not None and self._values is not None
        del self._keys[count:]
        del self._values[count:]
        with self._opened() as fd:
            self._file_io.ftruncate(fd, count * self.entry_size)
        self._unsynced = True

    # -- queries -------------------------------------------------------------------------------
    def _arrays(self) -> tuple[array, array]:
        self._load()
        assert self._keys is not None and self._values is not None
        return self._keys, self._values

    def _floor(self, key: int, empty: tuple[int, int]) -> tuple[int, int]:
        """The entry with the largest key <= ``key``, or ``empty``."""
        keys, values = self._arrays()
        slot = bisect_right(keys, key) - 1
        return empty if slot < 0 else (keys[slot], values[slot])

    def _last(self, empty: tuple[int, int]) -> tuple[int, int]:
        keys, values = self._arrays()
        return (keys[-1], values[-1]) if keys else empty

    def entries(self) -> list[tuple[int, int]]:
        keys, values = self._arrays()
        return list(zip(keys, values, strict=True))

    def __len__(self) -> int:
        self._load()
        assert self._keys is not None
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def file_size(self) -> int:
        self._write_pending()
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


class OffsetIndex(_Index):
    """Sparse map from offset to the file position of the batch ending at that offset."""

    entry_size = 8

    def _unpack_all(self, data: bytes) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(relative + base, position) for relative, position in _OFFSET_ENTRY.iter_unpack(data)]

    def append(self, offset: int, position: int) -> None:
        self._load()
        assert self._keys is not None and self._values is not None
        if self._keys and offset <= self._keys[-1]:
            raise CorruptIndexError(
                f"{self.path.name}: offset {offset} is not above the last entry {self._keys[-1]}"
            )
        self._write(_OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self._keys.append(offset)
        self._values.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry whose offset is <= target; (base_offset, 0) if none."""
        return self._floor(target_offset, (self.base_offset, 0))

    def last_entry(self) -> tuple[int, int]:
        return self._last((self.base_offset, 0))

    def position_at_or_before(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none): where to start reading
        headers to find the batch at ``position``."""
        _, positions = self._arrays()
        slot = bisect_right(positions, position) - 1
        return 0 if slot < 0 else positions[slot]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        keys, _ = self._arrays()
        self._truncate_entries(bisect_left(keys, offset))

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError if the index cannot be right for a log of ``log_size`` bytes."""
        if self.file_size() % self.entry_size:
            raise CorruptIndexError(f"{self.path.name}: size {self.file_size()} is not a multiple of 8")
        previous_offset, previous_position = self.base_offset - 1, -1
        for offset, position in self.entries():
            if offset <= previous_offset or (position <= previous_position and previous_position >= 0):
                raise CorruptIndexError(f"{self.path.name}: entries out of order at offset {offset}")
            if position >= log_size:
                raise CorruptIndexError(
                    f"{self.path.name}: entry for offset {offset} points at position {position}, "
                    f"past the end of the log ({log_size} bytes)"
                )
            previous_offset, previous_position = offset, position


class TimeIndex(_Index):
    """Sparse map from max-timestamp-so-far to the offset where it was reached."""

    entry_size = 12

    def _unpack_all(self, data: bytes) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(timestamp, relative + base) for timestamp, relative in _TIME_ENTRY.iter_unpack(data)]

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append (timestamp, offset) if the timestamp is above the last entry's; return whether it was."""
        self._load()
        assert self._keys is not None and self._values is not None
        if self._keys and (timestamp <= self._keys[-1] or offset < self._values[-1]):
            return False
        self._write(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self._keys.append(timestamp)
        self._values.append(offset)
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target; (-1, base_offset) if none."""
        return self._floor(target_timestamp, (-1, self.base_offset))

    def last_entry(self) -> tuple[int, int]:
        return self._last((-1, self.base_offset))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (entry offsets never decrease)."""
        _, offsets = self._arrays()
        self._truncate_entries(bisect_left(offsets, offset))

    def sanity_check(self, last_offset: int) -> None:
        if self.file_size() % self.entry_size:
            raise CorruptIndexError(f"{self.path.name}: size {self.file_size()} is not a multiple of 12")
        previous_timestamp, previous_offset = None, self.base_offset
        for timestamp, offset in self.entries():
            if previous_timestamp is not None and timestamp <= previous_timestamp:
                raise CorruptIndexError(f"{self.path.name}: timestamps out of order at offset {offset}")
            if offset < previous_offset or offset > last_offset:
                raise CorruptIndexError(
                    f"{self.path.name}: entry offset {offset} is outside {self.base_offset}..{last_offset}"
                )
            previous_timestamp, previous_offset = timestamp, offset
