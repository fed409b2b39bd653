"""The sending side of one broker connection: responses out, in the order they are given.

A response is byte chunks and file regions (``kp.encode_response_chunks``). The bytes of consecutive
responses are coalesced into one write, made when the request loop has no request left (it calls
``flush``), when a handler awaits (at the next turn of the event loop), before a file region, or
once ``FLUSH_BYTES`` gathered. The regions are sent with ``sendfile`` (zero copy; kctl.broker.sendfile:
straight on the socket unless it would block) — small ones (up to ``INLINE_REGION_BYTES``) are read
and written with the bytes around them, and on TLS every region is (sendfile cannot encrypt) — and
released in every case, sent or not.

Flow control: the transport calls the connection's ``pause_writing``/``resume_writing``, passed on to
``pause``/``resume``; ``drain`` waits until the write buffer is below its low-water mark (the request
loop takes no further request while it is above). Once the connection is lost (``lost``) nothing is
written and every ``send``/``drain`` raises ``ConnectionClosed``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from kctl.broker.sendfile import INLINE_REGION_BYTES, ShortFile, send_region

#: response bytes held back (to be coalesced with the next responses) before they are written anyway
FLUSH_BYTES = 256 * 1024


class ConnectionClosed(Exception):
    """The connection is gone, or must close (the reason is the message)."""


class ResponseWriter:
    """Writes one connection's responses to ``transport`` (an asyncio transport, TLS when ``tls``)."""

    def __init__(self, transport: asyncio.Transport, *, tls: bool = False) -> None:
        self.transport = transport
        self.tls = tls
        self.loop = asyncio.get_running_loop()
        self.last_write = self.loop.time()
        """Event-loop time of the last write (the idle check looks at it)."""
        self.writing_paused = False
        self.closed = False
        self._out: list[Any] = []
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._drain_waiter: asyncio.Future[None] | None = None

    async def send(self, chunks: list[Any]) -> int:
        """Queue a response's byte chunks for writing (coalesced with the next responses until the
        loop waits or enough has gathered) and send its file regions with sendfile; release the
        regions whatever happens. Returns the response's size (for the request metrics: no second
        pass over the chunks)."""
        size = 0
        try:
            if self.closed:
                raise ConnectionClosed("connection lost")
            out = self._out
            for chunk in chunks:
                t = type(chunk)
                if t is bytes or t is bytearray or t is memoryview:
                    out.append(chunk)
                    n = len(chunk)
                    self._out_bytes += n
                    size += n
                    continue
                size += chunk.size
                if self.tls or chunk.size <= INLINE_REGION_BYTES:
                    # sendfile cannot encrypt; and a small region is cheaper read and sent in the same
                    # write as the bytes around it (one packet) than in a sendfile call of its own
                    data = os.pread(chunk.fd, chunk.size, chunk.position)
                    if len(data) != chunk.size:
                        raise ConnectionClosed(f"read {len(data)} of {chunk.size} bytes of a log segment")
                    out.append(data)
                    self._out_bytes += chunk.size
                else:
                    self.flush()
                    await self._sendfile(chunk)
                    out = self._out
            if self._out_bytes >= FLUSH_BYTES:
                self.flush()
            elif out and self._flush_handle is None:
                # written at the next turn of the event loop, unless the loop has more to add first
                self._flush_handle = self.loop.call_soon(self.flush)
        finally:
            for chunk in chunks:
                release = getattr(chunk, "release", None)
                if release is not None and not isinstance(chunk, memoryview):
                    release()
        return size

    def flush(self) -> None:
        """Write the response bytes held back, in one write."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        if self.closed:
            return
        self.last_write = self.loop.time()
        if len(out) == 1:
            self.transport.write(out[0])
        else:
            self.transport.writelines(out)

    async def drain(self) -> None:
        """Flush, then wait until the transport's write buffer is below its low-water mark."""
        self.flush()
        while self.writing_paused and not self.closed:
            self._drain_waiter = self.loop.create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None
        if self.closed:
            raise ConnectionClosed("connection lost")

    async def _sendfile(self, region: Any) -> None:
        """Send ``region`` (fd, position, size) on the connection's socket with os.sendfile, straight on
        the socket unless it would block (kctl.broker.sendfile)."""
        transport = self.transport
        if self.closed or transport.is_closing():
            raise ConnectionClosed("connection lost")
        sock = transport.get_extra_info("socket")
        try:
            await send_region(self.loop, transport, sock.fileno() if sock is not None else -1, region)
        except ShortFile as error:
            raise ConnectionClosed(str(error)) from None

    def pause(self) -> None:
        """The transport's write buffer is above its high-water mark."""
        self.writing_paused = True

    def resume(self) -> None:
        """The transport's write buffer is below its low-water mark again."""
        self.writing_paused = False
        self._wake_drain()

    def lost(self) -> None:
        """The connection is gone: drop what is held back, wake a drain."""
        self.closed = True
        self._out.clear()
        self._out_bytes = 0
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._wake_drain()

    def _wake_drain(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
