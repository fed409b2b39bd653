"""One log segment: a ``.log`` file of whole record batches plus its ``.index`` and ``.timeindex``, and
its aborted-transaction index ``.txnindex`` (:mod:`kctl.log.transactions`; a file only once a
transaction is aborted in the segment).

The segment appends pre-validated batches as bytes, indexes every ``index.interval.bytes``, and
answers reads with :class:`FileRegion` objects (file, position, size) that the broker can sendfile.
It reads only batch headers (61 bytes) to find positions; it never decodes records, except to locate
one record by timestamp inside a single batch. The positions and headers of the last ``RECENT_BATCHES``
batches it appended are also kept in memory, so a read near the end of the active segment (a fetch
woken by an append) finds its batch without reading a header; any truncation forgets them."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kctl.log.files import FileIO, FileRegion, LogStorageError, SharedFile
from kctl.log.flush_stats import LOG_FLUSHES
from kctl.log.index import OffsetIndex, TimeIndex
from kctl.log.naming import index_file, log_file, time_index_file, txn_index_file
from kctl.log.transactions import TransactionIndex
from kctl.records.header import (
    HEADER_SIZE,
    BatchHeader,
    InvalidRecordBatch,
    parse_header,
    validate_batch,
)

MAX_RELATIVE_OFFSET = 2**31 - 1
SCAN_CHUNK_BYTES = 4 * 1024 * 1024
#: batches appended last whose positions the segment keeps in memory (a woken fetch reads these)
RECENT_BATCHES = 128


def _position(batch: tuple[int, BatchHeader]) -> int:
    return batch[0]


@dataclass(frozen=True)
class ScanResult:
    """Outcome of validating a segment's batches from the start."""

    valid_bytes: int
    batches: int
    records: int
    last_offset: int | None
    error: str | None
    error_position: int | None


class LogSegment:
    """A segment of a partition's log, named by its base offset.

    Concurrency: a segment has no lock of its own; its ``Log`` serializes the calls that change it
    (append, truncation, index appends, flush, close, delete) under the log's lock, from whichever
    thread holds it. Reads of its files by position (``read``, file regions sent with sendfile,
    the dir-move copy) need no lock: the data below ``size`` is never rewritten in place — a
    compacted segment is a new file swapped in by ``Log.swap_in_segment``."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        file_io: FileIO,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self._file_io = file_io
        self.index_interval_bytes = index_interval_bytes
        self.path = log_file(directory, base_offset)
        fd = file_io.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        self._file = SharedFile(self.path, fd, file_io)
        self.size = file_io.size(fd)
        self.offset_index = OffsetIndex(
            index_file(directory, base_offset), base_offset, max_index_size, file_io
        )
        self.time_index = TimeIndex(
            time_index_file(directory, base_offset), base_offset, max_index_size, file_io
        )
        for index_path in (self.offset_index.path, self.time_index.path):
            index_path.touch(exist_ok=True)
        self.txn_index = TransactionIndex(txn_index_file(directory, base_offset), file_io)
        self.created_ms = created_ms
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None if self.size else base_offset
        self._max_timestamp: int | None = None if self.size else -1
        self._offset_of_max_timestamp = base_offset
        self.flushed_size = self.size
        self.failed = False  # set when a failed write could not be undone
        # the batches appended last, oldest first: last offsets, and (position, header) of each
        self._recent_last_offsets: list[int] = []
        self._recent: list[tuple[int, BatchHeader]] = []

    # -- state ---------------------------------------------------------------------------------
    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (base_offset when empty)."""
        if self._next_offset is None:
            self._load_tail_state()
        assert self._next_offset is not None
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch max_timestamp in this segment, -1 when empty."""
        if self._max_timestamp is None:
            self._load_tail_state()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._load_tail_state()
        return self._offset_of_max_timestamp

    def _load_tail_state(self) -> None:
        """Find the last offset and max timestamp by scanning batch headers after the last index entries."""
        timestamp, timestamp_offset = self.time_index.last_entry()
        _, position = self.offset_index.lookup(min(timestamp_offset, self.offset_index.last_entry()[0]))
        next_offset = self.base_offset
        max_timestamp, offset_of_max = timestamp, timestamp_offset
        for _, header in self.iter_headers(position):
            next_offset = header.next_offset
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        if next_offset == self.base_offset and self.size:
            # the tail scan started past every batch: take the last index entry's offset
            next_offset = max(self.offset_index.last_entry()[0] + 1, self.base_offset)
        self._next_offset = next_offset
        self._max_timestamp = max_timestamp
        self._offset_of_max_timestamp = offset_of_max

    def first_batch_max_timestamp(self) -> int | None:
        header = self.read_header(0)
        return None if header is None else header.max_timestamp

    # -- appending -----------------------------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: Sequence[tuple[int, BatchHeader]],
        offsets_of_max: Sequence[int] | None = None,
    ) -> None:
        """Append ``data`` (whole batches; ``batches`` lists each one's position in ``data`` and header,
        with offsets already assigned; ``offsets_of_max`` the offset of each batch's first record with
        its max timestamp, when the records were walked — else the batch's last offset is indexed).
        On a write error the file is cut back and LogStorageError raised."""
        if self.failed:
            raise LogStorageError(errno.EIO, f"{self.path} is offline after an unrecoverable write error")
        position = self.size
        fd = self._file.fd
        try:
            self._file_io.write_all(fd, data)
        except LogStorageError:
            self._undo_partial_write(position)
            raise
        self.size = position + len(data)
        if self._next_offset is None or self._max_timestamp is None:
            self._load_tail_state()
        max_timestamp = self._max_timestamp
        interval = self.index_interval_bytes
        for number, (relative_position, header) in enumerate(batches):
            if header.max_timestamp > max_timestamp:  # type: ignore[operator]
                max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = (
                    header.last_offset if offsets_of_max is None else offsets_of_max[number]
                )
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(header.last_offset, position + relative_position)
                self.time_index.maybe_append(max_timestamp, self._offset_of_max_timestamp)  # type: ignore[arg-type]
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
        self._max_timestamp = max_timestamp
        self._next_offset = batches[-1][1].next_offset
        self._remember(position, batches)

    def _remember(self, position: int, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Keep the appended batches' positions and headers (the last RECENT_BATCHES of them)."""
        lasts, recent = self._recent_last_offsets, self._recent
        for relative_position, header in batches:
            lasts.append(header.base_offset + header.last_offset_delta)
            recent.append((position + relative_position, header))
        if len(recent) > 2 * RECENT_BATCHES:
            del lasts[:-RECENT_BATCHES], recent[:-RECENT_BATCHES]

    def _forget_recent(self) -> None:
        self._recent_last_offsets.clear()
        self._recent.clear()

    def _undo_partial_write(self, position: int) -> None:
        try:
            self._file_io.ftruncate(self._file.fd, position)
        except OSError:
            # The partial batch cannot be cut off: appending after it would corrupt the log, so the
            # segment refuses further appends; recovery truncates it on the next start.
            self.failed = True

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (called when the segment is rolled)."""
        self._forget_recent()
        if self.size and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        started = time.perf_counter()
        try:
            self._file_io.fsync(self._file.fd)
        except OSError as error:  # the log's error: an appender answers KAFKA_STORAGE_ERROR, dir offline
            if isinstance(error, LogStorageError):
                raise
            reason = f"fsync failed: {error.strerror or error}"
            raise LogStorageError(error.errno or errno.EIO, reason) from error
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        LOG_FLUSHES.observe(time.perf_counter() - started)
        self.flushed_size = self.size
        self.failed = False  # set when a failed write could not be undone

    # -- reading -------------------------------------------------------------------------------
    def read_header(self, position: int) -> BatchHeader | None:
        """The batch header at ``position``, or None at the end of the file (or a partial header)."""
        if position + HEADER_SIZE > self.size:
            return None
        data = self._file_io.pread(self._file.fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        return parse_header(data, 0)

    def iter_headers(self, position: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from ``position`` up to ``end`` (default: the size)."""
        limit = self.size if end is None else min(end, self.size)
        while position + HEADER_SIZE <= limit:
            header = self.read_header(position)
            if header is None or position + header.size > limit:
                return
            yield position, header
            position += header.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        recent = self._recent
        if recent and recent[0][1].base_offset <= offset:  # one of the batches appended last, or none
            i = bisect_left(self._recent_last_offsets, offset)
            if i == len(recent):
                return None
            if recent[i][0] >= starting_position:
                return recent[i]
        _, position = self.offset_index.lookup(offset)
        position = max(position, starting_position)
        for batch_position, header in self.iter_headers(position):
            if header.last_offset >= offset:
                return batch_position, header
        return None

    def read(
        self, offset: int, max_bytes: int, max_position: int | None = None, min_one_batch: bool = True
    ) -> FileRegion | None:
        """A region starting at the batch holding ``offset``, at most ``max_bytes`` long (but at least the
        whole first batch when ``min_one_batch``), never past ``max_position``. None if no batch at or
        after ``offset`` lies in this segment."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, header = found
        limit = self.size if max_position is None else min(max_position, self.size)
        if start >= limit:
            return None
        size = min(max_bytes, limit - start)
        if min_one_batch and size < header.size:
            size = min(header.size, limit - start)
        if size <= 0:
            return None
        end = start + size
        next_offset = header.next_offset if size == header.size else self.offset_after(end)
        return FileRegion(self._file, start, size, offset, next_offset)

    def offset_after(self, end: int) -> int:
        """The offset after the last batch that ends at or before file position ``end`` (what a reader
        of the bytes up to ``end`` gets whole): the base offset of the batch ``end`` falls in or
        starts, the segment's next offset at its end. Per batch, never per record: a bisect over the
        batches appended last (a reader at the tail), else the headers from the last index entry at
        or before ``end`` (one index interval of batches at most)."""
        if end >= self.size:
            return self.next_offset
        recent = self._recent
        if recent and recent[0][0] <= end:
            position, header = recent[bisect_right(recent, end, key=_position) - 1]
            return header.base_offset if position + header.size > end else header.next_offset
        for position, header in self.iter_headers(self.offset_index.position_at_or_before(end)):
            if position + header.size > end:
                return header.base_offset
        return self.next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose timestamp is >=
        ``timestamp``; None if this segment has none."""
        from kctl.records.reader import decode_batch  # per-record work, off the hot path

        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for batch_position, header in self.iter_headers(position):
            if header.last_offset < starting_offset or header.max_timestamp < timestamp:
                continue
            data = self._file_io.pread(self._file.fd, header.size, batch_position)
            for record in decode_batch(data, verify_crc=False).records:
                if record.offset >= starting_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def first_offset_with_timestamp(self, timestamp: int, offset: int) -> int:
        """``offset`` is a record with ``timestamp`` (this segment's max) or the last offset of its
        batch: the offset of that batch's first record with ``timestamp`` (decoding the batch only
        when ``offset`` is its last offset and it holds more than one record)."""
        from kctl.records.reader import decode_batch  # per-record work, off the hot path
        from kctl.records.validate import decompression_limit

        found = self.translate_offset(offset)
        if found is None:
            return offset
        position, header = found
        if header.last_offset != offset or header.records_count <= 1 or header.max_timestamp != timestamp:
            return offset
        if header.is_log_append_time:
            return header.base_offset
        data = self._file_io.pread(self._file.fd, header.size, position)
        try:
            records = decode_batch(
                data, verify_crc=False, max_decompressed_size=decompression_limit(header.size)
            ).records
        except InvalidRecordBatch:
            return offset
        return next((record.offset for record in records if record.timestamp == timestamp), offset)

    def tail_problem(self, *, check_crc: bool) -> str | None:
        """Why the batches after the last offset index entry do not end exactly at the end of the
        file (garbage, a partial or unparsable batch, offsets that do not rise within the segment's
        range; with ``check_crc`` a CRC mismatch), or None."""
        indexed_offset, position = self.offset_index.last_entry()
        if position > self.size:
            return f"the offset index points at byte {position}, past the end ({self.size})"
        previous_last = self.base_offset - 1
        if position > 0:  # an entry (none is written for position 0): the batch there ends at its offset
            header = parse_header(self._file_io.pread(self._file.fd, HEADER_SIZE, position), 0)
            if header.last_offset != indexed_offset:
                return f"batch at {position}: last offset {header.last_offset}, index {indexed_offset}"
            previous_last = header.base_offset - 1
        while position < self.size:
            if self.size - position < HEADER_SIZE:
                return f"{self.size - position} trailing bytes at {position} are too few for a batch"
            header = parse_header(self._file_io.pread(self._file.fd, HEADER_SIZE, position), 0)
            if position + header.size > self.size:
                return f"the batch at {position} runs past the end of the file"
            if (
                header.base_offset <= previous_last
                or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET
            ):
                return f"the batch at {position} has offsets {header.base_offset}..{header.last_offset}"
            previous_last = header.last_offset
            if check_crc:
                validate_batch(self._file_io.pread(self._file.fd, header.size, position), 0)
            position += header.size
        return None

    def read_batch_bytes(self, position: int, size: int) -> bytes:
        return self._file_io.pread(self._file.fd, size, position)

    # -- validation and recovery ---------------------------------------------------------------
    def scan(self, *, max_batch_size: int | None = None) -> ScanResult:
        """Validate every batch from the start: framing, magic, CRC-32C, offsets above the previous batch
        and within this segment's range. Stops at the first invalid batch."""
        return scan_file(self._file.fd, self.size, self.base_offset, self._file_io, max_batch_size)

    def rebuild_indexes(self, valid_bytes: int | None = None) -> None:
        """Recreate both indexes from the batches in the first ``valid_bytes`` (default: all)."""
        self._forget_recent()
        end = self.size if valid_bytes is None else valid_bytes
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_last_index_entry = 0
        max_timestamp, offset_of_max = -1, self.base_offset
        next_offset = self.base_offset
        for position, header in self.iter_headers(0, end):
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, position)
                self.time_index.maybe_append(max_timestamp, offset_of_max)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
            next_offset = header.next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, offset_of_max
        self._next_offset = next_offset

    def truncate_bytes(self, size: int) -> int:
        """Cut the file to ``size`` bytes (a batch boundary); return the number of bytes removed."""
        removed = self.size - size
        if removed <= 0:
            return 0
        self._forget_recent()
        self._file_io.ftruncate(self._file.fd, size)
        self.size = size
        self.flushed_size = min(self.flushed_size, size)
        return removed

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.truncate_bytes(position)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.rebuild_indexes()
        return removed

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self._file.close()

    def delete(self) -> None:
        """Unlink the files; readers holding regions finish reading (the descriptor stays open)."""
        for path in (self.path, self.offset_index.path, self.time_index.path):
            with contextlib.suppress(FileNotFoundError):
                self._file_io.remove(path)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self._file.close()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"


def scan_file(
    fd: int, size: int, base_offset: int, file_io: FileIO, max_batch_size: int | None = None
) -> ScanResult:
    """Validate the batches of an open segment file (see :meth:`LogSegment.scan`)."""
    position = 0
    batches = records = 0
    last_offset: int | None = None
    buffer = b""
    buffer_start = 0
    while position < size:
        remaining = size - position
        if remaining < HEADER_SIZE:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"{remaining} trailing bytes are too few for a batch header",
                position,
            )
        # make sure the buffer holds at least the header, then the whole batch
        if position + HEADER_SIZE > buffer_start + len(buffer):
            buffer_start = position
            buffer = file_io.pread(fd, min(max(SCAN_CHUNK_BYTES, HEADER_SIZE), remaining), position)
        relative = position - buffer_start
        try:
            header = parse_header(buffer, relative)
        except InvalidRecordBatch as error:
            return ScanResult(position, batches, records, last_offset, str(error), position)
        if header.size > remaining:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"batch of {header.size} bytes runs past the end of the file ({remaining} bytes left)",
                position,
            )
        if max_batch_size is not None and header.size > max_batch_size:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"batch of {header.size} bytes exceeds the maximum {max_batch_size}",
                position,
            )
        if relative + header.size > len(buffer):
            buffer_start = position
            buffer = file_io.pread(fd, max(SCAN_CHUNK_BYTES, header.size), position)
            relative = 0
            if len(buffer) < header.size:
                raise LogStorageError(errno.EIO, f"short read at position {position}")
        try:
            validate_batch(buffer, relative)
        except InvalidRecordBatch as error:
            return ScanResult(position, batches, records, last_offset, str(error), position)
        if header.base_offset < base_offset:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"batch base offset {header.base_offset} is below the segment's base offset {base_offset}",
                position,
            )
        if header.last_offset - base_offset > MAX_RELATIVE_OFFSET:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"batch last offset {header.last_offset} is too far from the base offset {base_offset}",
                position,
            )
        if last_offset is not None and header.base_offset <= last_offset:
            return ScanResult(
                position,
                batches,
                records,
                last_offset,
                f"batch base offset {header.base_offset} is not above the previous last offset {last_offset}",
                position,
            )
        batches += 1
        records += header.records_count
        last_offset = header.last_offset
        position += header.size
    return ScanResult(position, batches, records, last_offset, None, None)
