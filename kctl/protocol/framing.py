"""Framing, sans-io: every Kafka request and response is a 4-byte big-endian size, then that many bytes.

``FrameReader`` turns whatever arrives from a socket into complete frames; it checks each size prefix
as soon as it has its 4 bytes — a negative size or one above the limit raises before anything of the
frame is buffered. Each frame is returned as a writable ``memoryview`` over its own buffer (one copy
from the socket's chunks; or none: a reader of large frames asks ``pending()`` for the rest of the
frame being filled, receives into it and reports ``filled(n)``). The client's connections use it;
the broker receives frames in place with its own ``asyncio.BufferedProtocol`` (``kctl.broker.server``),
the same checks first. ``frame()`` prefixes a payload with its size.

``FramePool``: a frame's buffer is a fresh ``bytearray`` (zero-filled, and for a large frame new pages
the kernel must fault in and zero) unless the reader was given a pool, which hands out its large
buffers again once nothing refers to them any more (every view of the frame dropped): a client that
receives megabytes of Fetch answers a second (the mirror) fills the same memory again and again.
"""

from __future__ import annotations

import struct
import sys

from kctl.protocol.exceptions import FrameTooLarge, ProtocolDecodeError

_SIZE = struct.Struct(">i")

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)


def _probe_free_refs() -> int:
    """What ``sys.getrefcount`` says of a pooled buffer nothing else refers to, seen the way
    ``FramePool.allocate`` looks at it (measured, not assumed: it depends on the interpreter)."""
    buffers = [bytearray(1)]
    for buffer in buffers:
        return sys.getrefcount(buffer)
    raise AssertionError("unreachable")


_FREE_REFS = _probe_free_refs()


class FramePool:
    """Receive buffers of ``min_size`` bytes or more, used again once free: at most ``max_buffers``
    kept, ``max_bytes`` in all. A buffer is free when nothing but the pool refers to it (CPython's
    reference count: a ``memoryview`` of it, or of a slice of one, holds a reference). Frames below
    ``min_size`` get a fresh ``bytearray``. Not thread-safe: one reader (one connection) uses it."""

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

    def allocate(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes (contents undefined)."""
        if size < self.min_size:
            return memoryview(bytearray(size))
        best: bytearray | None = None
        for buffer in self._buffers:  # no enumerate: its tuple would hold a reference
            fits = len(buffer) >= size and (best is None or len(buffer) < len(best))
            if fits and sys.getrefcount(buffer) == _FREE_REFS:
                best = buffer
        if best is not None:
            self.reused += 1
            return memoryview(best)[:size]
        capacity = -(-size // self.min_size) * self.min_size  # a multiple of min_size: more fits later
        fresh = bytearray(capacity)
        self._keep(fresh)
        return memoryview(fresh)[:size]

    def _keep(self, fresh: bytearray) -> None:
        """Keep ``fresh`` if there is room, else in place of free smaller buffers (the smallest
        first); otherwise it is not kept."""
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


class FrameReader:
    """Reassemble size-prefixed frames from a byte stream.

    >>> r = FrameReader(1024)
    >>> [bytes(f) for f in r.feed(b"\\x00\\x00\\x00\\x02hi\\x00\\x00")]
    [b'hi']

    After ``FrameTooLarge`` or ``ProtocolDecodeError`` the stream is unusable: close the connection.
    """

    __slots__ = ("_fill", "_frame", "_prefix", "max_frame_size", "pool")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, pool: FramePool | None = None) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        self.max_frame_size = max_frame_size
        self.pool = pool
        """Where frames' buffers come from (None: a fresh ``bytearray`` each)."""
        self._prefix = bytearray()  # a size prefix split across feeds
        self._frame: memoryview | None = None  # the frame being filled
        self._fill = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (prefix included)."""
        return len(self._prefix) + (self._fill + 4 if self._frame is not None else 0)

    def _start(self, size: int) -> None:
        if size < 0:
            raise ProtocolDecodeError(f"invalid negative frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)
        self._frame = memoryview(bytearray(size)) if self.pool is None else self.pool.allocate(size)
        self._fill = 0

    def pending(self) -> memoryview | None:
        """The unfilled rest of the frame being received (None between frames): receive into it
        directly, then call ``filled``."""
        frame = self._frame
        return None if frame is None else frame[self._fill :]

    def filled(self, n: int) -> memoryview | None:
        """``n`` bytes were written into ``pending()``: the frame, when that completed it."""
        frame = self._frame
        if frame is None or not 0 <= n <= len(frame) - self._fill:
            raise ValueError("filled() without a pending frame, or past its end")
        self._fill += n
        if self._fill < len(frame):
            return None
        self._frame = None
        self._fill = 0
        return frame

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Consume ``data``; return the frames it completes (possibly none), in order."""
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = mv.nbytes
        i = 0
        frames: list[memoryview] = []
        while True:
            frame = self._frame
            if frame is None:
                if i >= n:
                    break
                if self._prefix:
                    take = min(4 - len(self._prefix), n - i)
                    self._prefix += mv[i : i + take]
                    i += take
                    if len(self._prefix) < 4:
                        break
                    (size,) = _SIZE.unpack(self._prefix)
                    self._prefix.clear()
                elif n - i >= 4:
                    (size,) = _SIZE.unpack_from(mv, i)
                    i += 4
                else:
                    self._prefix += mv[i:n]
                    break
                self._start(size)
                frame = self._frame
                assert frame is not None
            fill = self._fill
            take = min(len(frame) - fill, n - i)
            if take:
                frame[fill : fill + take] = mv[i : i + take]
                fill += take
                i += take
            if fill == len(frame):
                frames.append(frame)
                self._frame = None
                self._fill = 0
            else:
                self._fill = fill
                break
        return frames


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` prefixed with its 4-byte big-endian size."""
    size = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    return b"".join((_SIZE.pack(size), payload))
