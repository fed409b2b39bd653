"""The broker's network layer: an asyncio TCP server speaking the Kafka framing.

Each connection is an ``asyncio.BufferedProtocol``, so the kernel copies what arrives straight into
buffers of ours. A frame's 4-byte size is checked — negative, or above ``socket.request.max.bytes`` —
before anything of the frame is allocated or buffered. Frames up to ``SMALL_FRAME`` are copied out of
the connection's receive buffer, several per ``recv`` (the buffer grows from ``READ_SIZE`` to
``LARGE_READ_SIZE`` for a connection sending frames it cannot hold). A larger frame is received in
place, ``get_buffer`` handing the transport the rest of the frame's own buffer: a ``bytearray`` of
exactly its size, or the connection's spare — an earlier large frame's buffer, kept once no view of
it outlived its request — which saves zero-filling and page-faulting a new one.

Complete frames queue up for the connection's task, which handles them one at a time in arrival
order (as Kafka does, so responses leave in request order; Produce with acks=0 gets none). Reading
pauses once ``MAX_QUEUED_FRAMES`` frames or ``MAX_QUEUED_BYTES`` bytes are queued (what was already
received waits in the receive buffer) and resumes when half that is left; the task takes no further
request while the transport's write buffer is above its high-water mark, so a client that never reads
its responses stalls only its own connection. A response is byte chunks and file regions. The bytes
of consecutive responses are coalesced into one write, made when the task has no request left, when
a handler awaits (at the next turn of the event loop), before a file region, or once ``FLUSH_BYTES``
gathered; the regions are sent with ``sendfile`` (zero copy; kctl.broker.sendfile: straight on the
socket unless it would block) — small ones are read and written with the bytes around them — and
released in every case.

Bad input — oversized or negative frame sizes, malformed headers or bodies, unknown APIs — is
answered with an error where the protocol allows it (ApiVersions at an unknown version gets the v0
error reply listing the supported versions), otherwise that one connection is closed after the
responses to its earlier requests; it is always logged and never affects others. Neither does a bug
in a handler: it is logged and costs only its connection. A request parked in its handler (a long-polling
fetch, an acks=all produce waiting for replication) is cancelled when its connection is lost or the
client ends its stream (as Kafka closes a connection on EOF).

Security (kctl.broker.security): a listener may speak TLS (the transport is asyncio's SSL transport;
file regions are then read with ``pread`` and written through it, as sendfile cannot encrypt) and
SASL. Each connection has a ``Session``: on a SASL listener nothing but ApiVersions, SaslHandshake and
SaslAuthenticate is served until the client has authenticated (anything else closes the connection),
after a v0 SaslHandshake the frames are raw SASL tokens answered raw, and a failed authentication
closes the connection after its answer. The session's principal is on every RequestContext."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import kctl.protocol as kp
from kctl.broker.security.listeners import ListenerSecurity, certificate_principal
from kctl.broker.security.sasl import AuthenticationError, CredentialLookup, Session
from kctl.broker.sendfile import INLINE_REGION_BYTES, ShortFile, send_region

log = logging.getLogger("kctl.broker.server")

#: bytes of each connection's receive buffer (at most this much is asked of one ``recv``), and what it
#: grows to for a connection sending frames too large for it but small enough to be copied out
READ_SIZE = 64 * 1024
LARGE_READ_SIZE = 256 * 1024
#: frames up to this size are copied out of the receive buffer (several per ``recv``); larger ones are
#: received in place
SMALL_FRAME = LARGE_READ_SIZE // 2
#: a read into the receive buffer asks for at least this much (what is left there moves to its start)
MIN_READ = 16 * 1024
#: a large frame's buffer up to this size is kept, once handled, to receive the connection's next one
MAX_SPARE = 8 * 1024 * 1024
#: reading from a connection pauses while this many frames, or bytes of frames, await handling
MAX_QUEUED_FRAMES = 32
MAX_QUEUED_BYTES = 8 * 1024 * 1024
#: response bytes held back (to be coalesced with the next responses) before they are written anyway
FLUSH_BYTES = 256 * 1024

_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class RequestContext:
    """What a handler knows of a request besides its body: the decoded header (api key and version,
    correlation id, client id), the client's address and the id of its connection."""

    header: kp.RequestHeader
    client_host: str
    client_port: int
    connection_id: int
    session: Session | None = None


#: (context, decoded body) -> response body, or None for no response (Produce acks=0)
Dispatch = Callable[[RequestContext, Any], Awaitable[Any]]
#: api key -> (min version, max version) this broker answers
SupportedVersions = dict[int, tuple[int, int]]
#: what a connection may ask before it has authenticated
_BEFORE_AUTHENTICATION = frozenset(
    {kp.ApiKey.API_VERSIONS, kp.ApiKey.SASL_HANDSHAKE, kp.ApiKey.SASL_AUTHENTICATE}
)


class ConnectionClosed(Exception):
    pass


def _unexported(buffer: bytearray) -> bool:
    """Whether no view of the bytearray ``buffer`` is alive (anything still holding part of a request
    holds a memoryview of it): a bytearray cannot be resized while exported. O(1): the shrink and the
    growth back stay within its allocation."""
    try:
        del buffer[-1]
    except BufferError:
        return False
    buffer.append(0)
    return True


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
        security: ListenerSecurity | None = None,
        credentials: CredentialLookup | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._dispatch = dispatch
        self._supported = supported
        self._max_request_size = max_request_size
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._ids = itertools.count(1)
        self.security = security
        self.credentials: CredentialLookup = credentials or (lambda user: {})

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ssl_context = self.security.ssl_context if self.security is not None else None
        self._server = await loop.create_server(
            self._new_connection,
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
            ssl=ssl_context,
            ssl_handshake_timeout=10.0 if ssl_context is not None else None,
        )
        sockets = self._server.sockets or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening, drop every connection (its task is cancelled, its transport aborted, even
        one still closing because its client reads nothing) and wait for them."""
        if self._server is not None:
            self._server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        tasks = [c.task for c in connections if c.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _new_connection(self) -> _Connection:
        return _Connection(self, next(self._ids))


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the protocol callbacks receive frames, ``task`` handles them in order."""

    def __init__(self, server: KafkaServer, connection_id: int) -> None:
        self.server = server
        self.connection_id = connection_id
        self.dispatch = server._dispatch
        self.supported = server._supported
        self.max_request_size = server._max_request_size
        self.host = "?"
        self.port = 0
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        # receiving: _buffer[_start:_end] is received but not yet cut into frames
        self._buffer = bytearray(READ_SIZE)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._need = 4  # bytes from _start on that the next frame needs: its size, then its whole self
        self._frame: memoryview | None = None  # a large frame being received in place
        self._fill = 0
        self._spare: bytearray | None = None  # a handled large frame's buffer, to receive the next in
        # frames for the task; a str is why the connection must close, None is the end of the stream
        self._queue: deque[memoryview | str | None] = deque()
        self._queued_bytes = 0
        self._reading_paused = False
        self._receiving = True  # until the end of the stream, a bad frame size, or the connection is lost
        self._lost = False
        self._waiter: asyncio.Future[None] | None = None
        self._dispatching = False  # the task awaits a handler (maybe parked: a fetch, an acks=all produce)
        # sending: response bytes not yet written, and the transport's flow control
        self._out: list[Any] = []
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self.session = Session.start(server.security)
        self._tls = server.security is not None and server.security.tls

    # -- protocol callbacks ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.host, self.port = str(peer[0]), int(peer[1])
        if self._tls:
            self.session.principal = certificate_principal(transport.get_extra_info("peercert"))
        sock: socket.socket | None = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already reset by the peer: the transport will tell
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server._connections.add(self)
        self.task = self.loop.create_task(self._run(), name=f"kctl-connection-{self.connection_id}")

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return self._frame[self._fill :]
        start = self._start
        if start and (start + self._need > len(self._buffer) or len(self._buffer) - self._end < MIN_READ):
            # what is left is part of a small frame (or of a size): move it to the front
            pending = self._end - start
            self._buffer[:pending] = self._buffer[start : self._end]  # a copy: the ranges may overlap
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._fill += nbytes
            if self._fill == len(frame):
                self._frame = None
                self._enqueue(frame)
            return
        self._end += nbytes
        self._cut_frames()

    def eof_received(self) -> bool:
        # keep the transport open: the requests already received are answered, then the task closes it
        if self._receiving:
            self._receiving = False
            self._queue.append(None)
            self._wake()
        if self._dispatching and self.task is not None:
            self.task.cancel()  # the client closed while a request was parked: no one waits for it
        return not self._tls  # asyncio's TLS transport closes itself (and warns if asked not to)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._connections.discard(self)
        self._lost = True
        self._receiving = False
        self._queue.clear()
        self._queued_bytes = 0
        self._frame = self._spare = None
        self._out.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._wake()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        if self._dispatching and self.task is not None:
            self.task.cancel()  # a parked request (long-polling fetch, acks=all produce) has no one to answer

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # -- receiving ----------------------------------------------------------------------------
    def _cut_frames(self) -> None:
        """Queue the complete frames in the receive buffer, until the queue is full (the rest waits
        there for reading to resume); start receiving a large frame in place."""
        buffer = self._buffer
        start, end = self._start, self._end
        self._need = 4
        while end - start >= 4 and not self._reading_paused:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0:
                self._refuse(f"invalid negative frame size {size}")
                return
            if size > self.max_request_size:
                self._refuse(
                    f"request of {size} bytes exceeds socket.request.max.bytes ({self.max_request_size})"
                )
                return
            stop = start + 4 + size
            if stop <= end:
                self._enqueue(memoryview(buffer[start + 4 : stop]))
                start = stop
                continue
            if size > SMALL_FRAME:
                spare = self._spare
                if spare is not None and len(spare) >= size:
                    self._spare = None
                    frame = memoryview(spare)[:size]
                else:  # zero-filled by bytearray(): a reused buffer saves that and the page faults
                    frame = memoryview(bytearray(size))
                have = end - start - 4
                frame[:have] = self._view[start + 4 : end]
                self._frame, self._fill = frame, have
                start = end
            else:
                self._need = 4 + size
                if self._need > len(buffer):  # grow the receive buffer for frames of this size
                    grown = bytearray(LARGE_READ_SIZE)
                    grown[: end - start] = self._view[start:end]
                    self._buffer, self._view = grown, memoryview(grown)
                    start, end = 0, end - start
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _enqueue(self, frame: memoryview) -> None:
        self._queue.append(frame)
        self._queued_bytes += len(frame)
        if not self._reading_paused and (
            len(self._queue) >= MAX_QUEUED_FRAMES or self._queued_bytes >= MAX_QUEUED_BYTES
        ):
            self._reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        self._wake()

    def _resume_reading(self) -> None:
        self._reading_paused = False
        self._cut_frames()  # first the frames left in the receive buffer when reading paused
        if not self._reading_paused and self._receiving:
            assert self.transport is not None
            self.transport.resume_reading()

    def _refuse(self, why: str) -> None:
        """A bad frame size: read nothing more; the task answers what came before, then closes."""
        self._receiving = False
        if not self._reading_paused:
            self._reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        self._queue.append(why)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the connection's task ------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._serve()
        except (ConnectionError, ConnectionClosed):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection %s:%s failed", self.host, self.port)
        finally:
            transport = self.transport
            if transport is not None and not transport.is_closing():
                if not self._lost:
                    self._flush()
                transport.close()

    async def _serve(self) -> None:
        queue = self._queue
        while not self._lost:
            if not queue:
                self._flush()
                self._waiter = self.loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
                continue
            item = queue.popleft()
            if type(item) is memoryview:
                size = len(item)
                self._queued_bytes -= size
                if (
                    self._reading_paused
                    and self._receiving
                    and len(queue) <= MAX_QUEUED_FRAMES // 2
                    and self._queued_bytes <= MAX_QUEUED_BYTES // 2
                ):
                    self._resume_reading()
                if self._writing_paused:
                    await self._drain()
                await self._handle(item)
                if self.session.close_after_response:
                    self._flush()
                    raise ConnectionClosed("authentication failed")
                if size > SMALL_FRAME and self._spare is None:
                    buffer = item.obj
                    del item  # the last view of ours: is any left elsewhere (in what the handler kept)?
                    if isinstance(buffer, bytearray) and len(buffer) <= MAX_SPARE and _unexported(buffer):
                        self._spare = buffer
            elif item is None:  # the client ended the stream; everything before it is answered
                return
            else:
                self._close_because(item)

    def _close_because(self, why: str) -> None:
        log.warning("closing connection from %s:%s: %s", self.host, self.port, why)
        raise ConnectionClosed(why)

    async def _handle(self, frame: memoryview) -> None:
        session = self.session
        if session.raw_tokens:
            await self._raw_token(frame)
            return
        try:
            header = kp.parse_request_header(frame)
        except kp.UnsupportedVersionError as error:
            # parse_request_header always reports the correlation id it read
            if error.api_key == kp.ApiKey.API_VERSIONS and error.correlation_id is not None:
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
        if (
            not session.authenticated or session.expires_at is not None
        ) and header.api_key not in _BEFORE_AUTHENTICATION:
            if not session.authenticated:
                self._close_because(f"{kp.ApiKey(header.api_key).name} before SASL authentication")
            if session.expired:
                self._close_because("the SASL session expired (connections.max.reauth.ms)")
        try:
            body = kp.decode_request_body(header, frame, allow_trailing=True)
        except kp.ProtocolDecodeError as error:
            log.debug("malformed request frame: %s", bytes(frame[:512]).hex())
            self._close_because(f"malformed {kp.ApiKey(header.api_key).name} v{header.api_version}: {error}")
        context = RequestContext(header, self.host, self.port, self.connection_id, session)
        self._dispatching = True
        try:
            response = await self.dispatch(context, body)
        finally:
            self._dispatching = False
        if response is None:
            return
        chunks = kp.encode_response_chunks(header, response)
        await self._send(chunks)

    async def _raw_token(self, frame: memoryview) -> None:
        """After a v0 SaslHandshake: a raw SASL token in, a raw one out (closing on failure)."""
        try:
            answer = await self.session.authenticate(bytes(frame), self.server.credentials)
        except AuthenticationError as error:
            log.warning("SASL authentication from %s:%s failed: %s", self.host, self.port, error)
            raise ConnectionClosed("authentication failed") from None
        await self._send([_SIZE.pack(len(answer)) + answer])

    # -- sending ------------------------------------------------------------------------------
    async def _send(self, chunks: list[Any]) -> None:
        """Queue a response's byte chunks for writing (coalesced with the next responses until the
        task waits or enough has gathered) and send its file regions with sendfile; release the
        regions whatever happens."""
        try:
            if self._lost:
                raise ConnectionClosed("connection lost")
            out = self._out
            for chunk in chunks:
                t = type(chunk)
                if t is bytes or t is bytearray or t is memoryview:
                    out.append(chunk)
                    self._out_bytes += len(chunk)
                elif self._tls or chunk.size <= INLINE_REGION_BYTES:
                    # sendfile cannot encrypt; and a small region is cheaper read and sent in the same
                    # write as the bytes around it (one packet) than in a sendfile call of its own
                    data = os.pread(chunk.fd, chunk.size, chunk.position)
                    if len(data) != chunk.size:
                        raise ConnectionClosed(f"read {len(data)} of {chunk.size} bytes of a log segment")
                    out.append(data)
                    self._out_bytes += chunk.size
                else:
                    self._flush()
                    await self._sendfile(chunk)
                    out = self._out
            if self._out_bytes >= FLUSH_BYTES:
                self._flush()
            elif out and self._flush_handle is None:
                # written at the next turn of the event loop, unless this task has more to add first
                self._flush_handle = self.loop.call_soon(self._flush)
        finally:
            for chunk in chunks:
                release = getattr(chunk, "release", None)
                if release is not None and not isinstance(chunk, memoryview):
                    release()

    def _flush(self) -> None:
        """Write the response bytes held back, in one write."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        transport = self.transport
        if self._lost or transport is None:
            return
        if len(out) == 1:
            transport.write(out[0])
        else:
            transport.writelines(out)

    async def _drain(self) -> None:
        """Wait until the transport's write buffer is below its low-water mark."""
        self._flush()
        while self._writing_paused and not self._lost:
            self._drain_waiter = self.loop.create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None
        if self._lost:
            raise ConnectionClosed("connection lost")

    async def _sendfile(self, region: Any) -> None:
        """Send ``region`` (fd, position, size) on the connection's socket with os.sendfile, straight on
        the socket unless it would block (kctl.broker.sendfile)."""
        transport = self.transport
        if self._lost or transport is None or transport.is_closing():
            raise ConnectionClosed("connection lost")
        sock = transport.get_extra_info("socket")
        try:
            await send_region(self.loop, transport, sock.fileno() if sock is not None else -1, region)
        except ShortFile as error:
            raise ConnectionClosed(str(error)) from None

    def abort(self) -> None:
        """Drop the connection now (the broker stops): cancel the task, abort the transport."""
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
