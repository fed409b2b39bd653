"""Framing, sans-io: every Kafka request and response is a 4-byte big-endian size, then that many bytes.

``FrameReceiver`` is the one frame reader of kctl: the broker's connections (kctl.broker.frame_intake),
the client's (kctl.client.connection) and the inter-broker channel (kctl.broker.replication.channel)
all receive through it. It does no I/O: the caller asks ``get_buffer()`` where to receive (a socket's
``recv_into``, an ``asyncio.BufferedProtocol``'s ``get_buffer``), reports ``buffer_updated(n)``, then
takes complete frames with ``next_frame()``; ``feed(data)`` does all three for bytes already read.

Each size prefix is checked as soon as its 4 bytes are in (``next_size()``): a negative size raises
``ProtocolDecodeError``, one above ``max_frame_size`` raises ``FrameTooLarge``, before anything of the
frame is allocated or buffered; the stream is then unusable (every later call raises the same).

Buffers. Bytes arrive in the receive buffer, which starts at ``first_read_size`` (an idle connection
costs little), grows to ``read_size`` once a read fills it, and to ``large_read_size`` for frames too
large for it. Frames up to ``in_place_above`` bytes are copied out of it (several per read: one copy,
into a buffer of their own). A larger frame is received in place: ``get_buffer`` hands out the rest
of the frame's own buffer, so its bytes are copied by the kernel only. That buffer comes from the
``FramePool`` when one was given and a free buffer there fits (no zero-filling and page-faulting of new
memory), else it is a fresh ``bytearray`` — of the frame's whole size, or, with ``first_large_chunk``,
one that starts at that size and doubles as the bytes arrive (up to the frame's size), so a size
announced and never sent allocates little of it (the broker's choice: its peers are not trusted).
A fresh large buffer is offered to the pool once its frame is complete. ``frame()`` prefixes a
payload with its size.

``FramePool``: large receive buffers used again once nothing refers to them any more (every view of
their frame dropped): a client that receives megabytes of Fetch answers a second (the mirror) or a
broker receiving large Produce requests fills the same memory again and again.
"""

from __future__ import annotations

import struct
import sys

from kctl.protocol.exceptions import FrameTooLarge, ProtocolDecodeError

_SIZE = struct.Struct(">i")

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)
FIRST_READ_SIZE = 4 * 1024
"""The receive buffer's first size (an idle connection costs little)."""
READ_SIZE = 64 * 1024
"""What the receive buffer grows to once a read fills it."""
LARGE_READ_SIZE = 256 * 1024
"""What it grows to for a frame larger than it that is still copied out (at most ``in_place_above``)."""
IN_PLACE_ABOVE = LARGE_READ_SIZE // 2
"""Frames larger than this are received in place, into a buffer of their own."""
MIN_READ = 16 * 1024
"""A read into the receive buffer is offered at least this much room (what is left moves to its start)."""
FIRST_LARGE_CHUNK = 2 * 1024 * 1024
"""The broker's first buffer for a large frame (the frames of clients with default settings fit)."""


def _probe_free_refs() -> int:
    """What ``sys.getrefcount`` says of a pooled buffer nothing else refers to, seen the way
    ``FramePool.take`` looks at it (measured, not assumed: it depends on the interpreter)."""
    buffers = [bytearray(1)]
    for buffer in buffers:
        return sys.getrefcount(buffer)
    raise AssertionError("unreachable")


_FREE_REFS = _probe_free_refs()


class FramePool:
    """Receive buffers of ``min_size`` bytes or more, used again once free: at most ``max_buffers``
    kept, ``max_bytes`` in all. A buffer is free when nothing but the pool refers to it (CPython's
    reference count: a ``memoryview`` of it, or of a slice of one, holds a reference). Frames below
    ``min_size`` get a fresh ``bytearray``. Not thread-safe: one receiver (one connection) uses it."""

    __slots__ = ("_buffers", "max_buffers", "max_bytes", "min_size", "reused")

    def __init__(self, min_size: int = 64 * 1024, max_buffers: int = 32, max_bytes: int = 256 << 20) -> None:
        self.min_size = min_size
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        self._buffers: list[bytearray] = []
        self.reused = 0
        """Frames that got a buffer used before (tests, figures)."""

    @property
    def kept_bytes(self) -> int:
        return sum(len(b) for b in self._buffers)

    def take(self, size: int) -> bytearray | None:
        """The smallest free kept buffer of ``size`` bytes or more (contents undefined), or None."""
        if size < self.min_size:
            return None
        best: bytearray | None = None
        for buffer in self._buffers:  # no enumerate: its tuple would hold a reference
            fits = len(buffer) >= size and (best is None or len(buffer) < len(best))
            if fits and sys.getrefcount(buffer) == _FREE_REFS:
                best = buffer
        if best is not None:
            self.reused += 1
        return best

    def capacity(self, size: int) -> int:
        """The size of a fresh buffer for a frame of ``size`` bytes: a multiple of ``min_size``, so
        that slightly larger frames fit it later."""
        return -(-size // self.min_size) * self.min_size if size >= self.min_size else size

    def allocate(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes (contents undefined): of a free kept buffer, else of a
        fresh one, kept when there is room."""
        best = self.take(size)
        if best is not None:
            return memoryview(best)[:size]
        fresh = bytearray(self.capacity(size))
        if size >= self.min_size:
            self.keep(fresh)
        return memoryview(fresh)[:size]

    def keep(self, fresh: bytearray) -> None:
        """Keep ``fresh`` (not from this pool) if there is room, else in place of free smaller buffers
        (the smallest first); otherwise it is not kept."""
        if len(fresh) < self.min_size or any(b is fresh for b in self._buffers):
            return
        total = sum(len(b) for b in self._buffers) + len(fresh)
        if len(self._buffers) >= self.max_buffers or total > self.max_bytes:
            smaller = sorted(
                (b for b in self._buffers if len(b) < len(fresh) and sys.getrefcount(b) == _FREE_REFS),
                key=len,
            )
            dropped: list[bytearray] = []
            count = len(self._buffers)
            for buffer in smaller:
                if count < self.max_buffers and total <= self.max_bytes:
                    break
                dropped.append(buffer)
                count -= 1
                total -= len(buffer)
            if count >= self.max_buffers or total > self.max_bytes:
                return
            self._buffers = [b for b in self._buffers if not any(b is d for d in dropped)]
        self._buffers.append(fresh)


class FrameReceiver:
    """Reassemble size-prefixed frames from a byte stream, sans-io.

    >>> r = FrameReceiver(1024)
    >>> [bytes(f) for f in r.feed(b"\\x00\\x00\\x00\\x02hi\\x00\\x00")]
    [b'hi']

    Receiving from a socket: ``n = sock.recv_into(r.get_buffer())``, ``r.buffer_updated(n)``, then
    ``r.next_frame()`` until it returns None. After ``FrameTooLarge`` or ``ProtocolDecodeError`` the
    stream is unusable: close the connection. Frames are writable ``memoryview``s, each over a buffer
    of its own (they stay valid whatever is received next).
    """

    __slots__ = (
        "_buffer",
        "_end",
        "_error",
        "_fill",
        "_frame",
        "_fresh",
        "_size",
        "_start",
        "_view",
        "first_large_chunk",
        "in_place_above",
        "large_read_size",
        "max_frame_size",
        "pool",
        "read_size",
    )

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        pool: FramePool | None = None,
        *,
        first_large_chunk: int | None = None,
        first_read_size: int = FIRST_READ_SIZE,
        read_size: int = READ_SIZE,
        large_read_size: int = LARGE_READ_SIZE,
        in_place_above: int = IN_PLACE_ABOVE,
    ) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        if not 0 < first_read_size <= read_size <= large_read_size or in_place_above > large_read_size:
            raise ValueError("need first_read_size <= read_size <= large_read_size >= in_place_above")
        self.max_frame_size = max_frame_size
        self.pool = pool
        """Where large frames' buffers come from, and go back to (None: a fresh ``bytearray`` each)."""
        self.first_large_chunk = first_large_chunk
        self.read_size = read_size
        self.large_read_size = large_read_size
        self.in_place_above = in_place_above
        # the receive buffer: _buffer[_start:_end] is received and not yet handed out
        self._buffer = bytearray(first_read_size)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._size = -1  # the next frame's size, once its prefix is in and checked (and consumed)
        self._frame: bytearray | None = None  # a large frame's own buffer, being received in place
        self._fill = 0
        self._fresh = False  # _frame is not from the pool (offered to it once complete)
        self._error: ProtocolDecodeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not handed out as frames yet (size prefixes included)."""
        pending = self._end - self._start
        if self._size >= 0:
            pending += 4
        return pending + (self._fill if self._frame is not None else 0)

    @property
    def capacity(self) -> int:
        """Bytes of the receive buffer (without a large frame's own buffer)."""
        return len(self._buffer)

    # -- receiving ------------------------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Where the next bytes go (never empty): the rest of the large frame being received in place,
        else the free room of the receive buffer. Write into it, then call ``buffer_updated``."""
        size = self._size
        if size > self.in_place_above and self._frame is None and self._end - self._start < size:
            self._begin_in_place(size)
        frame = self._frame
        if frame is not None and self._fill < size:
            have = min(len(frame), size)
            if self._fill == have:  # full: grow it as the bytes come (no view of it is handed out yet)
                grown = bytearray(min(size, 2 * have))
                grown[: self._fill] = frame
                self._frame = frame = grown
                have = len(grown)
            return memoryview(frame)[self._fill : have]
        start, end = self._start, self._end
        need = size if size >= 0 else 4
        if start and (start + need > len(self._buffer) or len(self._buffer) - end < MIN_READ):
            # what is left is part of a small frame (or of a size): move it to the front
            self._buffer[: end - start] = self._view[start:end]  # a copy: the ranges may overlap
            self._start, self._end = 0, end - start
        if self._end == len(self._buffer):  # full of frames not taken yet: room for more
            self._grow(2 * len(self._buffer))
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of what ``get_buffer`` returned last."""
        if self._frame is not None and self._fill < self._size:
            if not 0 <= nbytes <= min(len(self._frame), self._size) - self._fill:
                raise ValueError("buffer_updated() past the end of the frame")
            self._fill += nbytes
            return
        if not 0 <= nbytes <= len(self._buffer) - self._end:
            raise ValueError("buffer_updated() past the end of the receive buffer")
        self._end += nbytes
        if self._end == len(self._buffer) and len(self._buffer) < self.read_size:
            self._grow(self.read_size)  # a busy connection: the buffer a read may fill at once

    def _grow(self, size: int) -> None:
        """Replace the receive buffer by one of ``size`` bytes holding what is not yet taken."""
        start, end = self._start, self._end
        grown = bytearray(size)
        grown[: end - start] = self._view[start:end]
        self._buffer, self._view = grown, memoryview(grown)
        self._start, self._end = 0, end - start

    def _begin_in_place(self, size: int) -> None:
        """Receive the rest of the frame of ``size`` bytes into a buffer of its own."""
        have = self._end - self._start
        pool = self.pool
        buffer = pool.take(size) if pool is not None else None
        self._fresh = buffer is None
        if buffer is None:
            if self.first_large_chunk is not None:  # grows as the bytes arrive
                buffer = bytearray(min(size, max(have, self.first_large_chunk)))
            else:
                buffer = bytearray(pool.capacity(size) if pool is not None else size)
        buffer[:have] = self._view[self._start : self._end]
        self._frame, self._fill = buffer, have
        self._start = self._end = 0

    # -- frames ---------------------------------------------------------------------------------
    def _fail(self, error: ProtocolDecodeError) -> ProtocolDecodeError:
        self._error = error
        self._start = self._end = 0  # nothing of a refused frame stays buffered
        self._frame = None
        return error

    def next_size(self) -> int | None:
        """The size of the next frame once its prefix is in (checked: raises ``FrameTooLarge`` or
        ``ProtocolDecodeError``), else None; the same until the frame is taken."""
        if self._size >= 0:
            return self._size
        if self._error is not None:
            raise self._error
        start = self._start
        if self._end - start < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, start)
        self._start = start + 4
        self._accept(size)
        return size

    def _accept(self, size: int) -> None:
        """Check the next frame's ``size`` (its prefix is consumed by the caller) and expect it."""
        if size < 0:
            raise self._fail(ProtocolDecodeError(f"invalid negative frame size {size}"))
        if size > self.max_frame_size:
            raise self._fail(FrameTooLarge(size, self.max_frame_size))
        self._size = size
        if size <= self.in_place_above and size > len(self._buffer):  # grow for frames of this size
            self._grow(self.read_size if size <= self.read_size else self.large_read_size)

    def frame_ready(self) -> bool:
        """Whether the next frame is complete (``next_frame`` returns it)."""
        size = self.next_size()
        if size is None:
            return False
        if self._frame is not None:
            return self._fill == size
        return self._end - self._start >= size

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None until more is received."""
        size = self.next_size()
        if size is None:
            return None
        frame = self._frame
        if frame is not None:
            if self._fill < size:
                return None
            self._frame = None
            self._fill = 0
            self._size = -1
            if self._fresh and self.pool is not None:
                self.pool.keep(frame)
            return memoryview(frame)[:size]
        start = self._start
        stop = start + size
        if stop > self._end:
            return None
        self._size = -1
        if stop == self._end:
            self._start = self._end = 0
        else:
            self._start = stop
        return self._copy_out(self._view[start:stop])

    def _copy_out(self, data: memoryview) -> memoryview:
        """A frame of its own holding ``data`` (from the pool when it is large enough)."""
        pool = self.pool
        if pool is not None and len(data) >= pool.min_size:
            view = pool.allocate(len(data))
            view[:] = data
            return view
        return memoryview(bytearray(data))

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Take in ``data`` (already read); return the frames it completes (possibly none), in order."""
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = mv.nbytes
        i = 0
        frames: list[memoryview] = []
        while True:
            buffer = self._frame
            if buffer is not None:  # a large frame received in place
                fill, size = self._fill, self._size
                if fill < size:
                    if i >= n:
                        return frames
                    if size <= len(buffer):  # its rest straight into its buffer
                        take = min(size - fill, n - i)
                        memoryview(buffer)[fill : fill + take] = mv[i : i + take]  # (faster than bytearray's)
                        i += take
                        self._fill = fill = fill + take
                    else:  # a buffer that grows as the bytes arrive
                        room = self.get_buffer()
                        take = min(len(room), n - i)
                        room[:take] = mv[i : i + take]
                        del room
                        self.buffer_updated(take)
                        i += take
                        continue
                    if fill < size:
                        return frames
                done = self.next_frame()
                assert done is not None
                frames.append(done)
                continue
            frame = self.next_frame()
            if frame is not None:
                frames.append(frame)
                continue
            if i >= n:
                return frames
            if self._size < 0 and self._start == self._end and n - i >= 4 and self._error is None:
                # a frame starts here: its size is read from ``data``, and a whole small frame
                # copied out of it at once (a large one is received in place by get_buffer below)
                (size,) = _SIZE.unpack_from(mv, i)
                self._accept(size)
                i += 4
                if size <= self.in_place_above and n - i >= size:
                    self._size = -1
                    frames.append(self._copy_out(mv[i : i + size]))
                    i += size
                continue
            room = self.get_buffer()
            take = min(len(room), n - i)
            room[:take] = mv[i : i + take]
            del room
            self.buffer_updated(take)
            i += take


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` prefixed with its 4-byte big-endian size."""
    size = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    return b"".join((_SIZE.pack(size), payload))
