"""Framing, sans-io: every Kafka request and response is a 4-byte big-endian size, then that many bytes.

``FrameReader`` turns whatever arrives from a socket into complete frames; it checks each size prefix
as soon as it has its 4 bytes — a negative size or one above the limit raises before anything of the
frame is buffered. Each frame is returned as a writable ``memoryview`` over its own ``bytearray``
(one copy from the socket's chunks). The client's connections use it; the broker receives frames in
place with its own ``asyncio.BufferedProtocol`` (``kctl.broker.server``), the same checks first.
``frame()`` prefixes a payload with its size.
"""

from __future__ import annotations

import struct

from kctl.protocol.exceptions import FrameTooLarge, ProtocolDecodeError

_SIZE = struct.Struct(">i")

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)


class FrameReader:
    """Reassemble size-prefixed frames from a byte stream.

    >>> r = FrameReader(1024)
    >>> [bytes(f) for f in r.feed(b"\\x00\\x00\\x00\\x02hi\\x00\\x00")]
    [b'hi']

    After ``FrameTooLarge`` or ``ProtocolDecodeError`` the stream is unusable: close the connection.
    """

    __slots__ = ("_fill", "_frame", "_prefix", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must not be negative")
        self.max_frame_size = max_frame_size
        self._prefix = bytearray()  # a size prefix split across feeds
        self._frame: bytearray | None = None  # the frame being filled
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
        self._frame = bytearray(size)
        self._fill = 0

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
                frames.append(memoryview(frame))
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
