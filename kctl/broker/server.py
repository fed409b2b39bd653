"""The broker's network layer: an asyncio TCP server speaking the Kafka framing.

Each connection reads frames (size-limited before anything is buffered), handles its requests one at a
time in arrival order (as Kafka does, so responses leave in request order), and writes each response
as byte chunks plus file regions sent with ``sendfile`` (zero copy). Bad input — oversized or negative
frame sizes, malformed headers or bodies, unknown APIs — is answered with an error where the protocol
allows it, otherwise that one connection is closed; it is always logged and never affects others."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import kctl.protocol as kp

log = logging.getLogger("kctl.broker.server")

READ_SIZE = 256 * 1024


@dataclass(slots=True)
class RequestContext:
    header: kp.RequestHeader
    client_host: str
    client_port: int
    connection_id: int


#: (context, decoded body) -> response body, or None for no response (Produce acks=0)
Dispatch = Callable[[RequestContext, Any], Awaitable[Any]]
#: api key -> (min version, max version) this broker answers
SupportedVersions = dict[int, tuple[int, int]]


class ConnectionClosed(Exception):
    pass


class KafkaServer:
    """Accepts connections on one listener and feeds requests to ``dispatch``."""

    def __init__(
        self,
        host: str,
        port: int,
        dispatch: Dispatch,
        supported: SupportedVersions,
        *,
        max_request_size: int,
    ) -> None:
        self.host = host
        self.port = port
        self._dispatch = dispatch
        self._supported = supported
        self._max_request_size = max_request_size
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve_connection, self.host, self.port, reuse_address=True, limit=READ_SIZE, backlog=1024
        )
        sockets = self._server.sockets or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        sock: socket.socket | None = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(
            next(self._ids),
            str(peer[0]),
            int(peer[1]),
            reader,
            writer,
            self._dispatch,
            self._supported,
            self._max_request_size,
        )
        try:
            await connection.run()
        except (ConnectionError, ConnectionClosed, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection %s:%s failed", peer[0], peer[1])
        finally:
            self._connections.discard(task)
            writer.close()


class _Connection:
    def __init__(
        self,
        connection_id: int,
        host: str,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dispatch: Dispatch,
        supported: SupportedVersions,
        max_request_size: int,
    ) -> None:
        self.connection_id = connection_id
        self.host = host
        self.port = port
        self.reader = reader
        self.writer = writer
        self.dispatch = dispatch
        self.supported = supported
        self.frames = kp.FrameReader(max_request_size)

    def _close_because(self, why: str) -> None:
        log.warning("closing connection from %s:%s: %s", self.host, self.port, why)
        raise ConnectionClosed(why)

    async def run(self) -> None:
        while True:
            data = await self.reader.read(READ_SIZE)
            if not data:
                return
            try:
                frames = self.frames.feed(data)
            except kp.FrameTooLarge as error:
                self._close_because(f"request of {error.size} bytes exceeds socket.request.max.bytes")
            except kp.ProtocolDecodeError as error:
                self._close_because(str(error))
            for frame in frames:
                await self._handle(frame)

    async def _handle(self, frame: memoryview) -> None:
        try:
            header = kp.parse_request_header(frame)
        except kp.UnsupportedVersionError as error:
            if error.api_key == kp.ApiKey.API_VERSIONS:
                await self._send([kp.api_versions_error_response(error.correlation_id, self.supported)])
                return
            self._close_because(f"unsupported {error}")
        except kp.UnsupportedApiError as error:
            self._close_because(f"unknown api key {error.api_key} (version {error.api_version})")
        except kp.ProtocolDecodeError as error:
            self._close_because(f"malformed request header: {error}")
        versions = self.supported.get(header.api_key)
        if versions is None or not versions[0] <= header.api_version <= versions[1]:
            if header.api_key == kp.ApiKey.API_VERSIONS:
                await self._send([kp.api_versions_error_response(header.correlation_id, self.supported)])
                return
            self._close_because(
                f"api key {header.api_key} version {header.api_version} is not supported by this broker"
            )
        try:
            body = kp.decode_request_body(header, frame, allow_trailing=True)
        except kp.ProtocolDecodeError as error:
            log.debug("malformed request frame: %s", bytes(frame[:512]).hex())
            self._close_because(f"malformed {kp.ApiKey(header.api_key).name} v{header.api_version}: {error}")
        context = RequestContext(header, self.host, self.port, self.connection_id)
        response = await self.dispatch(context, body)
        if response is None:
            return
        chunks = kp.encode_response_chunks(header, response)
        await self._send(chunks)

    async def _send(self, chunks: list[Any]) -> None:
        """Write byte chunks with the transport and file regions with sendfile; release the regions."""
        writer = self.writer
        try:
            pending: list[Any] = []
            for chunk in chunks:
                if isinstance(chunk, bytes | bytearray | memoryview):
                    pending.append(chunk)
                    continue
                if pending:
                    writer.writelines(pending)
                    pending = []
                await _sendfile(writer, chunk)
            if pending:
                writer.writelines(pending)
            await writer.drain()
        finally:
            for chunk in chunks:
                release = getattr(chunk, "release", None)
                if release is not None and not isinstance(chunk, memoryview):
                    release()


async def _sendfile(writer: asyncio.StreamWriter, region: Any) -> None:
    """Send ``region`` (fd, position, size) on the writer's socket with os.sendfile."""
    loop = asyncio.get_running_loop()
    await writer.drain()
    transport = writer.transport
    # closefd=False: the descriptor belongs to the segment (the region holds a reference on it);
    # sendfile's seek on it is harmless, the log appends with O_APPEND and reads with pread.
    with os.fdopen(region.fd, "rb", closefd=False) as file:
        sent = await loop.sendfile(transport, file, region.position, region.size, fallback=True)
    if sent != region.size:
        raise ConnectionClosed(f"sendfile sent {sent} of {region.size} bytes")
