"""Sending a log file region on a connection's socket (the fetch path's zero-copy write).

``send_region`` calls ``os.sendfile`` straight on the connection's non-blocking socket while the
transport holds no unsent bytes (so the region follows whatever was written before it): in the common
case — a response smaller than the socket's free send buffer — that is one system call, with no file
object, no selector registration and no future. Only when the socket would block (EAGAIN: a slow
reader, a full send buffer) does the rest go through the event loop's ``sendfile``, which waits for
the socket to be writable. TLS connections never come here (sendfile cannot encrypt), nor regions of
up to ``INLINE_REGION_BYTES``: the server reads those and writes them with the response's other bytes,
one write and one packet instead of three system calls (a fetch at a low rate carries a few records)."""

from __future__ import annotations

import asyncio
import os
from typing import Protocol

#: file regions up to this size are read (pread) and written with the bytes around them
INLINE_REGION_BYTES = 16 * 1024


class Region(Protocol):
    """A file region: kctl.log.files.FileRegion."""

    @property
    def fd(self) -> int: ...

    position: int
    size: int


class ShortFile(OSError):
    """The file ended before the region did (the segment was truncated under the read)."""


def sendfile_now(socket_fd: int, file_fd: int, position: int, size: int) -> int:
    """Send up to ``size`` bytes of ``file_fd`` from ``position`` on the non-blocking ``socket_fd``, as
    many as the socket takes without blocking; answers how many were sent."""
    sent = 0
    while sent < size:
        try:
            n = os.sendfile(socket_fd, file_fd, position + sent, size - sent)
        except BlockingIOError:
            break
        if n == 0:
            raise ShortFile(f"the file ended {size - sent} bytes before the region's end")
        sent += n
    return sent


async def send_region(
    loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, socket_fd: int, region: Region
) -> int:
    """Send all of ``region`` after what ``transport`` already holds; answers how many of its bytes
    went through the event loop (0 when the socket took them all at once). A negative ``socket_fd``
    (the transport has no socket to show) sends it all through the event loop."""
    position, size = region.position, region.size
    if socket_fd >= 0 and transport.get_write_buffer_size() == 0:
        sent = sendfile_now(socket_fd, region.fd, position, size)
        if sent == size:
            return 0
        position += sent
        size -= sent
    # closefd=False: the descriptor belongs to the segment (the region holds a reference on it); the
    # loop's seek on it is harmless, the log appends with O_APPEND and reads with pread
    with os.fdopen(region.fd, "rb", closefd=False) as file:
        sent = await loop.sendfile(transport, file, position, size, fallback=True)
    if sent != size:
        raise ShortFile(f"sendfile sent {sent} of {size} bytes")
    return size
