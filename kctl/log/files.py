"""File access for the log, behind one injectable object, and reference-counted segment handles.

Every byte the log writes goes through a :class:`FileIO`, so tests can inject faults (disk full,
short writes, crashes after N bytes) deterministically. A :class:`SharedFile` keeps a segment's
descriptor open while any :class:`FileRegion` handed to a reader still uses it, so a segment deleted
by retention while a fetch is being sent is read to the end (the name is unlinked at once; the bytes
stay readable until the last reader releases them).
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path


class LogStorageError(OSError):
    """An I/O failure of the log's files (disk full, read-only filesystem, I/O error)."""

    @property
    def disk_failed(self) -> bool:
        """Whether the disk itself failed (an I/O error, a read-only or vanished device), as opposed to
        a full one, which deleting data mends: the log dir cannot be trusted any more."""
        return self.errno in DISK_FAILURE_ERRNOS


DISK_FAILURE_ERRNOS = frozenset({errno.EIO, errno.EROFS, errno.ENXIO, errno.ENODEV})


class FileIO:
    """The operating system's file calls, as used by the log. Subclass to inject faults."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        return os.write(fd, data)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def close(self, fd: int) -> None:
        os.close(fd)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def rename(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def remove(self, path: Path) -> None:
        os.unlink(path)

    def fsync_dir(self, directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_all(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        """Write every byte of ``data`` (looping over short writes); raise LogStorageError on failure."""
        try:
            written = self.write(fd, data)
            if written == len(data):
                return
            view = memoryview(data)
            try:
                while written < len(view):
                    count = self.write(fd, view[written:])
                    if count <= 0:
                        raise LogStorageError(errno.EIO, "write made no progress")
                    written += count
            finally:
                view.release()
        except LogStorageError:
            raise
        except OSError as error:
            raise LogStorageError(
                error.errno or errno.EIO, f"write failed: {error.strerror or error}"
            ) from error


DEFAULT_FILE_IO = FileIO()


class SharedFile:
    """An open file descriptor shared by a segment and the readers it hands regions to.

    ``close()`` marks the file closed; the descriptor is released once the last reader is done."""

    __slots__ = ("_closed", "_file_io", "_lock", "_references", "fd", "path")

    def __init__(self, path: Path, fd: int, file_io: FileIO) -> None:
        self.path = path
        self.fd = fd
        self._file_io = file_io
        self._references = 1  # the owner's reference
        self._closed = False
        self._lock = threading.Lock()

    def acquire(self) -> SharedFile:
        with self._lock:
            if self._references == 0:
                raise LogStorageError(errno.EBADF, f"{self.path} is already closed")
            self._references += 1
        return self

    def release(self) -> None:
        with self._lock:
            self._references -= 1
            last = self._references == 0
        if last:
            self._file_io.close(self.fd)

    def close(self) -> None:
        """Drop the owner's reference (once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.release()

    @property
    def closed(self) -> bool:
        return self._closed


class FileRegion:
    """A byte range of a segment file to be sent to a reader (by ``sendfile``) or read into memory.
    A log read says which records a reader gets whole from it: those from ``first_offset`` (the
    offset read from) up to ``next_offset`` (the offset after its last whole batch); -1 when not
    known.

    Holds a reference on the file until :meth:`release` (or the ``with`` block ends)."""

    __slots__ = ("_file", "first_offset", "next_offset", "position", "size")

    def __init__(
        self, file: SharedFile, position: int, size: int, first_offset: int = -1, next_offset: int = -1
    ) -> None:
        self._file = file.acquire()
        self.position = position
        self.size = size
        self.first_offset = first_offset
        self.next_offset = next_offset

    @property
    def records_out(self) -> int:
        """How many records a reader gets whole (``next_offset - first_offset``; 0 when not known)."""
        if self.first_offset < 0 or self.next_offset < 0:
            return 0
        return max(self.next_offset - self.first_offset, 0)

    @property
    def fd(self) -> int:
        return self._file.fd

    @property
    def path(self) -> Path:
        return self._file.path

    def read_bytes(self) -> bytes:
        """The region's bytes, read with pread (for paths that cannot use sendfile)."""
        chunks = []
        position, remaining = self.position, self.size
        while remaining > 0:
            chunk = os.pread(self._file.fd, remaining, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def release(self) -> None:
        if self._file is not None:
            self._file.release()
            self._file = None  # type: ignore[assignment]

    def __enter__(self) -> FileRegion:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion({self.path.name}, position={self.position}, size={self.size})"
