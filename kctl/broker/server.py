"""The broker's network layer: an asyncio TCP server speaking the Kafka framing.

``KafkaServer`` accepts connections on one listener. Each connection (``_Connection``, an
``asyncio.BufferedProtocol``) is three parts, each in a module of its own:

* receiving — kctl.broker.frame_intake: the kernel copies what arrives straight into the buffers of
  the one frame receiver (kctl.protocol.framing.FrameReceiver); each frame's size is checked
  (negative, or above ``socket.request.max.bytes``) before anything of it is allocated, and reserved
  from the ``queued.max.request.bytes`` budget;
* the request loop — kctl.broker.request_loop: the connection's task, handling its requests one at
  a time in arrival order (so responses leave in request order), holding reading while too many
  frames or bytes wait, muting the connection after a throttled response (KIP-219), SASL's rules;
* sending — kctl.broker.response_writer: responses coalesced into few writes, file regions with
  ``sendfile``.

Resource limits (kctl.broker.connection_limits, shared by the listeners): ``max.connections`` and
``max.connections.per.ip`` close a connection over them when it is accepted; a connection idle for
``connections.max.idle.ms`` is closed (never one with a request in its handler).

Bad input — oversized or negative frame sizes, malformed headers or bodies, unknown APIs — is
answered with an error where the protocol allows it (ApiVersions at an unknown version gets the v0
error reply listing the supported versions), otherwise that one connection is closed after the
responses to its earlier requests; it is always logged and never affects others. Neither does a bug
in a handler: it is logged and costs only its connection. A request parked in its handler (a long-polling
fetch, an acks=all produce waiting for replication) is cancelled when its connection is lost or the
client ends its stream (as Kafka closes a connection on EOF).

Security (kctl.broker.security): a listener may speak TLS (the transport is asyncio's SSL transport;
file regions are then read with ``pread`` and written through it, as sendfile cannot encrypt) and
SASL. Each connection has a ``Session`` (the principal of its client certificate, or the one it
authenticated as with SASL), which is on every RequestContext."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import kctl.protocol as kp
from kctl.broker.connection_limits import ConnectionLimits
from kctl.broker.frame_intake import FrameIntake
from kctl.broker.request_context import RequestContext
from kctl.broker.request_loop import RequestLoop
from kctl.broker.response_writer import ResponseWriter
from kctl.broker.security.listeners import ListenerSecurity, certificate_principal
from kctl.broker.security.sasl import CredentialLookup, Session

log = logging.getLogger("kctl.broker.server")



#: (context, decoded body) -> response body, or None for no response (Produce acks=0)
Dispatch = Callable[[RequestContext, Any], Awaitable[Any]]
#: api key -> (min version, max version) this broker answers
SupportedVersions = dict[int, tuple[int, int]]
#: called once per request answered, when metrics or the request log are on: (context, request bytes,
#: response bytes (both on the wire, size prefix included), queue, local, remote, send, total time in
#: seconds; kctl.broker.metrics, kctl.broker.request_log)
RequestObserver = Callable[[RequestContext, int, int, float, float, float, float, float], None]
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

    def set_request_observer(self, on_request: RequestObserver | None) -> None:
        """Observe the requests with ``on_request`` from now on (None: none), on the open connections
        too (a logger's level changed at runtime turns the request log on or off)."""
        self.on_request = on_request
        for connection in self._connections:
            connection.set_observer(on_request)


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the transport's callbacks, passed on to its three parts — ``intake``
    (frames in), ``requests`` (the loop handling them in order; its task is ``task``) and ``writer``
    (responses out) — which exist from ``connection_made`` on, for an admitted connection."""

    def __init__(self, server: KafkaServer, connection_id: int) -> None:
        self.server = server
        self.connection_id = connection_id
        self.host = "?"
        self.port = 0
        self.loop = asyncio.get_running_loop()
        self._last_read = self.loop.time()
        self._admitted = False
        self.transport: asyncio.Transport | None = None
        self.intake: FrameIntake | None = None
        self.writer: ResponseWriter | None = None
        self.requests: RequestLoop[RequestContext] | None = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        server = self.server
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.host, self.port = host, port = str(peer[0]), int(peer[1])
        refused = server.limits.admit(host)
        if refused is not None:
            log.warning("closing connection from %s:%s: %s", host, port, refused)
            server.connections_refused += 1
            transport.abort()
            return
        self._admitted = True
        tls = server.security is not None and server.security.tls
        session = Session.start(server.security)
        if tls:
            session.principal = certificate_principal(transport.get_extra_info("peercert"))
        sock: socket.socket | None = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already reset by the peer: the transport will tell
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection_id = self.connection_id
        self.intake = intake = FrameIntake(
            transport,
            None,
            limits=server.limits,
            connection_id=connection_id,
            max_request_size=server._max_request_size,
        )
        self.writer = writer = ResponseWriter(transport, tls=tls)

        def new_context(header: kp.RequestHeader) -> RequestContext:
            return RequestContext(header, host, port, connection_id, session)

        def failed_authentication() -> None:
            server.failed_authentications += 1

        self.requests = requests = RequestLoop(
            reading=intake,
            writer=writer,
            session=session,
            new_context=new_context,
            dispatch=server._dispatch,
            supported=server._supported,
            credentials=server.credentials,
            observe=server.on_request,
            on_failed_authentication=failed_authentication,
            peer=f"{host}:{port}",
        )
        intake.sink = requests
        server._connections.add(self)
        server.connections_created += 1
        self.task = requests.start(f"kctl-connection-{connection_id}")

    def set_observer(self, observe: RequestObserver | None) -> None:
        """Observe this connection's next requests with ``observe`` (kctl.broker.request_loop)."""
        if self.requests is not None:
            self.requests.set_observer(observe)

    def get_buffer(self, sizehint: int) -> memoryview:
        assert self.intake is not None
        return self.intake.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_read = self.loop.time()
        assert self.intake is not None
        self.intake.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        # keep the transport open: the requests already received are answered, then the loop closes it
        if self.intake is not None and self.requests is not None:
            self.intake.end_of_stream()
            self.requests.cancel_parked()  # the client closed while a request was parked: no one waits
        return not (self.writer is not None and self.writer.tls)  # asyncio's TLS transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self.server.limits.release(self.host)
        self.server._connections.discard(self)
        if self.intake is not None:
            self.intake.lost()
        if self.writer is not None:
            self.writer.lost()
        if self.requests is not None:
            self.requests.stop()

    def pause_writing(self) -> None:
        if self.writer is not None:
            self.writer.pause()

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer.resume()

    @property
    def last_active(self) -> float:
        """Event-loop time of the last read or write."""
        written = self.writer.last_write if self.writer is not None else 0.0
        return max(self._last_read, written)

    @property
    def busy(self) -> bool:
        """A request of this connection is in its handler (a long poll, an acks=all produce)."""
        return self.requests is not None and self.requests.busy

    def abort(self) -> None:
        """Drop the connection now (the broker stops): cancel the task, abort the transport."""
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
