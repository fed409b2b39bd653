"""kctl.broker.sendfile: a file region goes out with os.sendfile straight on the socket, and through the
event loop only for what the socket would not take at once (a slow reader with a small receive
buffer), byte for byte and in order after what the transport wrote before it."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from kctl.broker.sendfile import ShortFile, send_region, sendfile_now
from kctl.log.files import FileIO, FileRegion, SharedFile

SIZE = 8 * 1024 * 1024  # far more than a loopback socket buffers while its reader does not read


def _region(path: Path, data: bytes, position: int, size: int) -> FileRegion:
    path.write_bytes(data)
    io = FileIO()
    return FileRegion(SharedFile(path, io.open(path, os.O_RDONLY), io), position, size)


def test_sendfile_now_stops_at_eagain(tmp_path: Path) -> None:
    data = os.urandom(SIZE)
    region = _region(tmp_path / "segment.log", data, 0, SIZE)
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        sent = sendfile_now(left.fileno(), region.fd, 0, SIZE)
        assert 0 < sent < SIZE  # the socket took what it could, then would block
        right.setblocking(False)
        got = bytearray()
        while len(got) < sent:
            got += right.recv(1 << 20)
        assert bytes(got) == data[:sent]
    region.release()


def test_sendfile_now_raises_when_the_file_is_shorter(tmp_path: Path) -> None:
    region = _region(tmp_path / "segment.log", b"x" * 100, 0, 100)
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        with pytest.raises(ShortFile):
            sendfile_now(left.fileno(), region.fd, 50, 100)
    region.release()


async def _exchange(region: FileRegion, prefix: bytes, slow_reader: bool) -> tuple[bytes, int]:
    """A server transport writes ``prefix`` then sends ``region``; the client (SO_RCVBUF 4 KiB) reads
    nothing until the send is under way when ``slow_reader``. Answers (bytes received, bytes the event
    loop sent)."""
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[asyncio.StreamWriter] = loop.create_future()

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set_result(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.setblocking(False)
    try:
        await loop.sock_connect(client, server.sockets[0].getsockname())
        writer = await connected
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)
        transport.write(prefix)
        fd = transport.get_extra_info("socket").fileno()
        sending = loop.create_task(send_region(loop, transport, fd, region))
        if slow_reader:
            await asyncio.sleep(0)  # one turn: the direct sendfile ran, hit EAGAIN, and now waits
            assert not sending.done()
        expected = len(prefix) + region.size
        got = bytearray()
        while len(got) < expected:
            chunk = await loop.sock_recv(client, 1 << 16)
            assert chunk, "the server closed early"
            got += chunk
        through_loop = await sending
        writer.close()
        return bytes(got), through_loop
    finally:
        client.close()
        server.close()
        await server.wait_closed()


def test_slow_reader_gets_the_rest_through_the_event_loop(tmp_path: Path) -> None:
    data = os.urandom(SIZE + 1000)
    region = _region(tmp_path / "segment.log", data, 1000, SIZE)
    got, through_loop = asyncio.run(_exchange(region, b"response header", slow_reader=True))
    assert got == b"response header" + data[1000:]
    assert 0 < through_loop < SIZE  # part went straight out, the rest waited for the reader
    region.release()


def test_small_region_goes_straight_out(tmp_path: Path) -> None:
    data = os.urandom(5000)
    region = _region(tmp_path / "segment.log", data, 100, 4000)
    got, through_loop = asyncio.run(_exchange(region, b"h" * 10, slow_reader=False))
    assert got == b"h" * 10 + data[100:4100]
    assert through_loop == 0
    region.release()


async def _through_the_loop_only(region: FileRegion) -> tuple[bytes, int]:
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[asyncio.StreamWriter] = loop.create_future()

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set_result(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    client = socket.socket()
    client.setblocking(False)
    try:
        await loop.sock_connect(client, server.sockets[0].getsockname())
        writer = await connected
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)
        sending = loop.create_task(send_region(loop, transport, -1, region))
        got = bytearray()
        while len(got) < region.size:
            got += await loop.sock_recv(client, 1 << 16)
        through_loop = await sending
        writer.close()
        return bytes(got), through_loop
    finally:
        client.close()
        server.close()
        await server.wait_closed()


def test_without_a_socket_fd_the_event_loop_sends_it_all(tmp_path: Path) -> None:
    data = os.urandom(3000)
    region = _region(tmp_path / "segment.log", data, 0, 3000)
    got, through_loop = asyncio.run(_through_the_loop_only(region))
    assert got == data and through_loop == 3000
    region.release()
