"""The broker's network layer: an asyncio TCP server speaking the Kafka framing.

Each connection is an ``asyncio.BufferedProtocol``, so the kernel copies what arrives straight into
buffers of ours. A frame's 4-byte size is checked — negative, or above ``socket.request.max.bytes`` —
before anything of the frame is allocated or buffered. Frames up to ``SMALL_FRAME`` are copied out of
the connection's receive buffer, several per ``recv`` (the buffer starts at ``FIRST_READ_SIZE``, so an
idle connection costs little, and grows to ``READ_SIZE`` once a read fills it, to ``LARGE_READ_SIZE``
for a connection sending frames it cannot hold). A larger frame is received in
place, ``get_buffer`` handing the transport the rest of the frame's own buffer: the connection's
spare — an earlier large frame's buffer, kept once no view of it outlived its request — which saves
zero-filling and page-faulting a new one, or a ``bytearray`` that starts at ``FIRST_LARGE_CHUNK``
(2 MiB: the frames of clients with default settings fit it at once) and doubles as the bytes arrive
(up to the frame's size), so a size announced and never sent allocates nothing of it.

Resource limits (kctl.broker.connection_limits, shared by the listeners): ``max.connections`` and
``max.connections.per.ip`` close a connection over them when it is accepted; each frame's size is
reserved from the ``queued.max.request.bytes`` budget when its size arrives and given back once the
request is handled (a connection whose frame does not fit is not read until it does); a connection
idle for ``connections.max.idle.ms`` is closed.

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
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import kctl.protocol as kp
from kctl.broker.connection_limits import ConnectionLimits
from kctl.broker.request_context import RequestContext
from kctl.broker.security.listeners import ListenerSecurity, certificate_principal
from kctl.broker.security.sasl import AuthenticationError, CredentialLookup, Session
from kctl.broker.sendfile import INLINE_REGION_BYTES, ShortFile, send_region

log = logging.getLogger("kctl.broker.server")

#: bytes of each connection's receive buffer (at most this much is asked of one ``recv``), and what it
#: grows to for a connection sending frames too large for it but small enough to be copied out
READ_SIZE = 64 * 1024
FIRST_READ_SIZE = 4 * 1024
LARGE_READ_SIZE = 256 * 1024
#: frames up to this size are copied out of the receive buffer (several per ``recv``); larger ones are
#: received in place
SMALL_FRAME = LARGE_READ_SIZE // 2
#: a read into the receive buffer asks for at least this much (what is left there moves to its start)
MIN_READ = 16 * 1024
#: a large frame's buffer starts this large (or as large as what arrived with its size) and doubles as
#: its bytes arrive
FIRST_LARGE_CHUNK = 2 * 1024 * 1024
#: a large frame's buffer up to this size is kept, once handled, to receive the connection's next one
MAX_SPARE = 8 * 1024 * 1024
#: reading from a connection pauses while this many frames, or bytes of frames, await handling
MAX_QUEUED_FRAMES = 32
MAX_QUEUED_BYTES = 8 * 1024 * 1024
#: response bytes held back (to be coalesced with the next responses) before they are written anyway
FLUSH_BYTES = 256 * 1024

_SIZE = struct.Struct(">i")


#: (context, decoded body) -> response body, or None for no response (Produce acks=0)
Dispatch = Callable[[RequestContext, Any], Awaitable[Any]]
#: api key -> (min version, max version) this broker answers
SupportedVersions = dict[int, tuple[int, int]]
#: called once per request answered, when metrics or the request log are on: (context, request bytes,
#: response bytes (both on the wire, size prefix included), queue, local, remote, send, total time in
#: seconds; kctl.broker.metrics, kctl.broker.request_log)
RequestObserver = Callable[[RequestContext, int, int, float, float, float, float, float], None]
#: what a connection may ask before it has authenticated
_BEFORE_AUTHENTICATION = frozenset(
    {kp.ApiKey.API_VERSIONS, kp.ApiKey.SASL_HANDSHAKE, kp.ApiKey.SASL_AUTHENTICATE}
)


class ConnectionClosed(Exception):
    pass


def _chunks_size(chunks: list[Any]) -> int:
    """The bytes of a response's chunks (byte strings and file regions)."""
    return sum(
        len(chunk) if isinstance(chunk, bytes | bytearray | memoryview) else chunk.size for chunk in chunks
    )


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
        limits: ConnectionLimits | None = None,
        name: str = "PLAINTEXT",
        on_request: RequestObserver | None = None,
    ) -> None:
        self.name = name  # the listener's name (the metrics' label)
        self.on_request = on_request
        self.connections_created = 0
        self.connections_refused = 0  # over max.connections or max.connections.per.ip
        self.failed_authentications = 0
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
        self.limits = limits if limits is not None else ConnectionLimits()
        self._idle_check: asyncio.TimerHandle | None = None

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
        if self.limits.idle_ms >= 0:
            self._schedule_idle_check()

    def _schedule_idle_check(self) -> None:
        interval = min(max(self.limits.idle_ms / 4000, 0.05), 10.0)
        self._idle_check = asyncio.get_running_loop().call_later(interval, self._close_idle)

    def _close_idle(self) -> None:
        """Close the connections idle for connections.max.idle.ms (none with a request in a handler)."""
        deadline = asyncio.get_running_loop().time() - self.limits.idle_ms / 1000
        for connection in list(self._connections):
            if connection.last_active < deadline and not connection.busy:
                log.info(
                    "closing connection from %s:%s: idle for more than connections.max.idle.ms (%d)",
                    connection.host,
                    connection.port,
                    self.limits.idle_ms,
                )
                connection.abort()
        self._schedule_idle_check()

    async def stop(self) -> None:
        """Stop listening, drop every connection (its task is cancelled, its transport aborted, even
        one still closing because its client reads nothing) and wait for them."""
        if self._server is not None:
            self._server.close()
        if self._idle_check is not None:
            self._idle_check.cancel()
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

    @property
    def connection_count(self) -> int:
        return len(self._connections)


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the protocol callbacks receive frames, ``task`` handles them in order."""

    def __init__(self, server: KafkaServer, connection_id: int) -> None:
        self.server = server
        self.connection_id = connection_id
        self.dispatch = server._dispatch
        self.supported = server._supported
        self.max_request_size = server._max_request_size
        self.limits = server.limits
        self._admitted = False
        self.host = "?"
        self.port = 0
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        # receiving: _buffer[_start:_end] is received but not yet cut into frames
        self._buffer = bytearray(FIRST_READ_SIZE)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._need = 4  # bytes from _start on that the next frame needs: its size, then its whole self
        self._frame: bytearray | None = None  # the buffer of a large frame being received in place
        self._frame_size = 0
        self._fill = 0
        self._reserved = 0  # bytes of the queued.max.request.bytes budget this connection holds
        self._memory_paused = False  # not read until the budget has room for its next frame
        self.last_active = self.loop.time()
        self._spare: bytearray | None = None  # a handled large frame's buffer, to receive the next in
        # frames for the task; a str is why the connection must close, None is the end of the stream
        self._queue: deque[memoryview | str | None] = deque()
        self._queued_bytes = 0
        self._observe = server.on_request
        self._arrivals: deque[float] = deque()  # arrival time of each queued frame, when observed
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
        refused = self.limits.admit(self.host)
        if refused is not None:
            log.warning("closing connection from %s:%s: %s", self.host, self.port, refused)
            self.server.connections_refused += 1
            self._lost = True
            transport.abort()
            return
        self._admitted = True
        if self._tls:
            self.session.principal = certificate_principal(transport.get_extra_info("peercert"))
        sock: socket.socket | None = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already reset by the peer: the transport will tell
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server._connections.add(self)
        self.server.connections_created += 1
        self.task = self.loop.create_task(self._run(), name=f"kctl-connection-{self.connection_id}")

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            have = min(len(frame), self._frame_size)
            if self._fill == have:  # full: grow it as the bytes come (no view of it is alive here)
                grown = bytearray(min(self._frame_size, 2 * have))
                grown[: self._fill] = frame
                self._frame = frame = grown
                have = len(grown)
            return memoryview(frame)[self._fill : have]
        start = self._start
        if start and (start + self._need > len(self._buffer) or len(self._buffer) - self._end < MIN_READ):
            # what is left is part of a small frame (or of a size): move it to the front
            pending = self._end - start
            self._buffer[:pending] = self._buffer[start : self._end]  # a copy: the ranges may overlap
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = self.loop.time()
        frame = self._frame
        if frame is not None:
            self._fill += nbytes
            if self._fill == self._frame_size:
                self._frame = None
                self._enqueue(memoryview(frame)[: self._frame_size])
            return
        self._end += nbytes
        if self._end == len(self._buffer) and len(self._buffer) < READ_SIZE:
            self._grow(READ_SIZE)  # a busy connection: the buffer a read may fill at once
        self._cut_frames()

    def _grow(self, size: int) -> None:
        """Replace the receive buffer by one of ``size`` bytes holding what is not yet cut."""
        start, end = self._start, self._end
        grown = bytearray(size)
        grown[: end - start] = self._view[start:end]
        self._buffer, self._view = grown, memoryview(grown)
        self._start, self._end = 0, end - start

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
        if not self._admitted:
            return
        self._admitted = False
        self.limits.release(self.host)
        self.limits.forget(self.connection_id)
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self.limits.give_back(reserved)
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
        while end - start >= 4 and not self._reading_paused and not self._memory_paused:
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
                self._reserve(size, force=True)  # already received: counted, and reading may pause
                self._enqueue(memoryview(buffer[start + 4 : stop]))
                start = stop
                continue
            if size > SMALL_FRAME:
                if not self._reserve(size):
                    break  # not read until the budget has room (the size stays in the buffer)
                have = end - start - 4
                spare = self._spare
                if spare is not None and len(spare) >= size:
                    self._spare = None
                    frame = spare
                else:  # grows as the bytes arrive: an announced size alone allocates nothing of it
                    frame = bytearray(min(size, max(have, FIRST_LARGE_CHUNK)))
                frame[:have] = self._view[start + 4 : end]
                self._frame, self._frame_size, self._fill = frame, size, have
                start = end
            else:
                self._need = 4 + size
                if self._need > len(buffer):  # grow the receive buffer for frames of this size
                    self._start, self._end = start, end
                    self._grow(READ_SIZE if self._need <= READ_SIZE else LARGE_READ_SIZE)
                    start, end = self._start, self._end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _enqueue(self, frame: memoryview) -> None:
        self._queue.append(frame)
        if self._observe is not None:
            self._arrivals.append(time.monotonic())
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
        if not self._reading_paused and not self._memory_paused and self._receiving:
            assert self.transport is not None
            self.transport.resume_reading()

    def _reserve(self, nbytes: int, *, force: bool = False) -> bool:
        """Take ``nbytes`` of the queued.max.request.bytes budget for a frame; when it does not fit
        (or, forced, overdraws it), stop reading until budget is given back."""
        taken = self.limits.reserve(nbytes, force=force)
        if taken:
            self._reserved += nbytes
        if not taken or self.limits.exhausted:
            if not self._memory_paused:
                self._memory_paused = True
                assert self.transport is not None
                self.transport.pause_reading()
            self.limits.wait(self.connection_id, self._budget_available)
        return taken

    def _give_back(self, nbytes: int) -> None:
        nbytes = min(nbytes, self._reserved)
        if nbytes:
            self._reserved -= nbytes
            self.limits.give_back(nbytes)

    def _budget_available(self) -> None:
        if self._lost or not self._memory_paused:
            return
        self._memory_paused = False
        self._cut_frames()  # the frames (or the size) left in the receive buffer
        if not self._reading_paused and not self._memory_paused and self._receiving:
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
                try:
                    await self._handle(item, self._arrivals.popleft() if self._observe is not None else 0.0)
                finally:
                    self._give_back(size)
                if self.session.close_after_response:
                    self._flush()
                    self.server.failed_authentications += 1
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

    async def _handle(self, frame: memoryview, arrived: float) -> None:
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
        started = time.monotonic() if self._observe is not None else 0.0
        try:
            response = await self.dispatch(context, body)
        finally:
            self._dispatching = False
        handled = time.monotonic() if self._observe is not None else 0.0
        if response is not None:
            chunks = kp.encode_response_chunks(header, response)
            await self._send(chunks)
        if self._observe is not None:
            done = time.monotonic()
            remote = context.remote_time
            local = handled - started - remote
            sent = _chunks_size(chunks) if response is not None else 0
            self._observe(
                context,
                len(frame) + 4,
                sent,
                started - arrived,
                local,
                remote,
                done - handled,
                done - arrived,
            )
        if context.throttle_time_ms > 0:
            await self._mute(context.throttle_time_ms)

    async def _mute(self, throttle_time_ms: int) -> None:
        """A quota was exceeded: the response is on its way, the next request waits ``throttle_time_ms``
        (KIP-219). Losing the connection meanwhile cancels the wait, as for a parked request."""
        self._flush()
        self._dispatching = True
        try:
            await asyncio.sleep(throttle_time_ms / 1000)
        finally:
            self._dispatching = False

    async def _raw_token(self, frame: memoryview) -> None:
        """After a v0 SaslHandshake: a raw SASL token in, a raw one out (closing on failure)."""
        try:
            answer = await self.session.authenticate(bytes(frame), self.server.credentials)
        except AuthenticationError as error:
            log.warning("SASL authentication from %s:%s failed: %s", self.host, self.port, error)
            self.server.failed_authentications += 1
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
        self.last_active = self.loop.time()
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

    @property
    def busy(self) -> bool:
        """A request of this connection is in its handler (a long poll, an acks=all produce)."""
        return self._dispatching

    def abort(self) -> None:
        """Drop the connection now (the broker stops): cancel the task, abort the transport."""
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
