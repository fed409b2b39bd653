"""The request loop of one broker connection: its requests handled one at a time, in arrival order.

Complete frames come from the receiving side (kctl.broker.frame_intake: ``submit``; ``refuse`` for a
bad frame size; ``end_of_stream`` when the client ends its stream) and queue up for the loop's task,
which handles them in order, as Kafka does, so responses leave in request order (Produce with acks=0
gets none). In-flight limits: reading is held (``ReadControl.hold``) once ``MAX_QUEUED_FRAMES``
frames or ``MAX_QUEUED_BYTES`` bytes are queued, released when half that is left; each frame's bytes
of the ``queued.max.request.bytes`` budget are given back once it is handled; and no further request
is taken while the response writer's transport is above its high-water mark, so a client that never
reads its responses stalls only its own connection.

For each frame: the header is parsed and checked (an unsupported ApiVersions gets the v0 error reply
listing the supported versions; any other bad header, or a bad body, closes the connection after the
responses to its earlier requests), SASL's rules are applied (before authentication nothing but
ApiVersions, SaslHandshake and SaslAuthenticate; after a v0 SaslHandshake the frames are raw tokens
answered raw; a failed authentication closes the connection after its answer), the body is
decoded and dispatched, the response handed to the writer (kctl.broker.response_writer) and the
request observed (metrics, request log). A handler that set ``throttle_time_ms`` (a quota exceeded)
mutes the connection that long after its response (KIP-219). A bug in a handler is logged and costs
only its connection. A request parked in its handler (``busy``: a long-polling fetch, an acks=all
produce, a mute) is cancelled when the connection is lost or the client ends its stream."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import kctl.protocol as kp
from kctl.broker.response_writer import ConnectionClosed, ResponseWriter
from kctl.broker.security.sasl import AuthenticationError, CredentialLookup, Session

log = logging.getLogger("kctl.broker.server")

#: reading from a connection is held while this many frames, or bytes of frames, await handling
MAX_QUEUED_FRAMES = 32
MAX_QUEUED_BYTES = 8 * 1024 * 1024

_SIZE = struct.Struct(">i")
#: what a connection may ask before it has authenticated
_BEFORE_AUTHENTICATION = frozenset(
    {kp.ApiKey.API_VERSIONS, kp.ApiKey.SASL_HANDSHAKE, kp.ApiKey.SASL_AUTHENTICATE}
)


class HandledContext(Protocol):
    """What the loop reads of a request's context after its handler (kctl.broker.server.RequestContext)."""

    throttle_time_ms: int
    remote_time: float


C = TypeVar("C", bound=HandledContext)


class ReadControl(Protocol):
    """What the loop asks of the receiving side (kctl.broker.frame_intake.FrameIntake)."""

    def hold(self) -> None:
        """Stop reading: the queue is full."""

    def release(self) -> None:
        """Read again: the queue has room."""

    def give_back(self, nbytes: int) -> None:
        """A frame of ``nbytes`` was handled: its share of queued.max.request.bytes is free."""


class RequestLoop(Generic[C]):
    """Handles the frames of one connection in order; ``start()`` runs it as a task."""

    def __init__(
        self,
        *,
        reading: ReadControl,
        writer: ResponseWriter,
        session: Session,
        new_context: Callable[[kp.RequestHeader], C],
        dispatch: Callable[[C, Any], Awaitable[Any]],
        supported: dict[int, tuple[int, int]],
        credentials: CredentialLookup,
        observe: Callable[[C, int, int, float, float, float, float, float], None] | None = None,
        on_failed_authentication: Callable[[], None] = lambda: None,
        peer: str = "?",
    ) -> None:
        self.reading = reading
        self.writer = writer
        self.session = session
        self.new_context = new_context
        self.dispatch = dispatch
        self.supported = supported
        self.credentials = credentials
        self.observe = observe
        self.on_failed_authentication = on_failed_authentication
        self.peer = peer  # host:port, for the log
        self.task: asyncio.Task[None] | None = None
        # frames to handle; a str is why the connection must close, None is the end of the stream
        self._queue: deque[memoryview | str | None] = deque()
        self._queued_bytes = 0
        self._arrivals: deque[float] = deque()  # arrival time of each queued frame, when observed
        self._holding = False  # reading is held: the queue is full
        self._waiter: asyncio.Future[None] | None = None
        self._dispatching = False  # awaiting a handler (maybe parked: a fetch, an acks=all produce)
        self._stopped = False

    def set_observer(
        self, observe: Callable[[C, int, int, float, float, float, float, float], None] | None
    ) -> None:
        """Observe the next requests with ``observe`` (a logger's level changed at runtime): the
        frames queued unobserved get an arrival time of now, those queued observed no longer need
        theirs. A request being handled keeps the observer it started with."""
        if observe is not None and self.observe is None:
            now = time.monotonic()
            self._arrivals.extend(now for item in self._queue if isinstance(item, memoryview))
        elif observe is None:
            self._arrivals.clear()
        self.observe = observe

    # -- from the receiving side ----------------------------------------------------------------
    def submit(self, frame: memoryview) -> None:
        """A complete request frame (its size prefix removed)."""
        self._queue.append(frame)
        if self.observe is not None:
            self._arrivals.append(time.monotonic())
        self._queued_bytes += len(frame)
        if not self._holding and (
            len(self._queue) >= MAX_QUEUED_FRAMES or self._queued_bytes >= MAX_QUEUED_BYTES
        ):
            self._holding = True
            self.reading.hold()
        self._wake()

    def refuse(self, why: str) -> None:
        """A bad frame: answer what came before, then close the connection because of ``why``."""
        self._queue.append(why)
        self._wake()

    def end_of_stream(self) -> None:
        """The client ended its stream: answer what came before, then close; a parked request has no
        one to answer and is cancelled."""
        self._queue.append(None)
        self._wake()
        self.cancel_parked()

    def stop(self) -> None:
        """The connection is lost: nothing more is handled; a parked request is cancelled."""
        self._stopped = True
        self._queue.clear()
        self._queued_bytes = 0
        self._wake()
        self.cancel_parked()

    @property
    def busy(self) -> bool:
        """A request is in its handler (a long poll, an acks=all produce) or the connection is muted."""
        return self._dispatching

    def cancel_parked(self) -> None:
        if self._dispatching and self.task is not None:
            self.task.cancel()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the task -----------------------------------------------------------------------------
    def start(self, name: str) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self.run(), name=name)
        return self.task

    async def run(self) -> None:
        """Handle the frames until the stream ends or the connection must close, then close it."""
        try:
            await self._serve()
        except (ConnectionError, ConnectionClosed):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection %s failed", self.peer)
        finally:
            transport = self.writer.transport
            if not transport.is_closing():
                self.writer.flush()
                transport.close()

    async def _serve(self) -> None:
        queue = self._queue
        writer = self.writer
        while not self._stopped:
            if not queue:
                writer.flush()
                self._waiter = asyncio.get_running_loop().create_future()
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
                    self._holding
                    and len(queue) <= MAX_QUEUED_FRAMES // 2
                    and self._queued_bytes <= MAX_QUEUED_BYTES // 2
                ):
                    self._holding = False
                    self.reading.release()
                if writer.writing_paused:
                    await writer.drain()
                try:
                    await self._handle(item, self._arrivals.popleft() if self.observe is not None else 0.0)
                finally:
                    del item  # the last view of the frame here: its buffer may be used again
                    self.reading.give_back(size)
                if self.session.close_after_response:
                    writer.flush()
                    self.on_failed_authentication()
                    raise ConnectionClosed("authentication failed")
            elif item is None:  # the client ended the stream; everything before it is answered
                return
            else:
                self._close_because(item)

    def _close_because(self, why: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, why)
        raise ConnectionClosed(why)

    async def _handle(self, frame: memoryview, arrived: float) -> None:
        session = self.session
        supported = self.supported
        if session.raw_tokens:
            await self._raw_token(frame)
            return
        try:
            header = kp.parse_request_header(frame)
        except kp.UnsupportedVersionError as error:
            # parse_request_header always reports the correlation id it read
            if error.api_key == kp.ApiKey.API_VERSIONS and error.correlation_id is not None:
                await self.writer.send([kp.api_versions_error_response(error.correlation_id, supported)])
                return
            self._close_because(f"unsupported {error}")
        except kp.UnsupportedApiError as error:
            self._close_because(f"unknown api key {error.api_key} (version {error.api_version})")
        except kp.ProtocolDecodeError as error:
            self._close_because(f"malformed request header: {error}")
        versions = supported.get(header.api_key)
        if versions is None or not versions[0] <= header.api_version <= versions[1]:
            if header.api_key == kp.ApiKey.API_VERSIONS:
                await self.writer.send([kp.api_versions_error_response(header.correlation_id, supported)])
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
        context = self.new_context(header)
        observe = self.observe
        self._dispatching = True
        started = time.monotonic() if observe is not None else 0.0
        try:
            response = await self.dispatch(context, body)
        finally:
            self._dispatching = False
        handled = time.monotonic() if observe is not None else 0.0
        sent = 0
        if response is not None:
            sent = await self.writer.send(kp.encode_response_chunks(header, response))
        if observe is not None:
            done = time.monotonic()
            remote = context.remote_time
            local = handled - started - remote
            observe(
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
        self.writer.flush()
        self._dispatching = True
        try:
            await asyncio.sleep(throttle_time_ms / 1000)
        finally:
            self._dispatching = False

    async def _raw_token(self, frame: memoryview) -> None:
        """After a v0 SaslHandshake: a raw SASL token in, a raw one out (closing on failure)."""
        try:
            answer = await self.session.authenticate(bytes(frame), self.credentials)
        except AuthenticationError as error:
            log.warning("SASL authentication from %s failed: %s", self.peer, error)
            self.on_failed_authentication()
            raise ConnectionClosed("authentication failed") from None
        await self.writer.send([_SIZE.pack(len(answer)) + answer])
