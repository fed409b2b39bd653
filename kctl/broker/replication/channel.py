"""The inter-broker client: one asyncio connection from this broker to another, over kctl.protocol
(kctl.broker never imports kctl.client).

A ``BrokerChannel`` connects lazily to the other broker's endpoint (``inter.broker.listener.name``'s,
or its first), checks with ApiVersions that it answers the versions the replica fetcher uses, and
authenticates when that listener speaks TLS and/or SASL (``security``: kctl.broker.security.inter_broker;
a SASL session with a lifetime is renewed by reconnecting before it ends), and sends requests with
increasing correlation ids. The connection is an ``asyncio.BufferedProtocol`` (``_ResponseProtocol``):
responses are received by the one frame receiver (kctl.protocol.framing.FrameReceiver; large Fetch
answers straight into buffers of their own, used again from a small pool once the fetcher is done
with them), and each is matched to its request as it completes.
Every request has a timeout. A failure (refused connection, reset, timeout, malformed response) closes
the connection and fails every request in flight with ``ChannelError``; the next request reconnects,
no sooner than the backoff after the failure (doubling up to ``max_backoff`` while failures repeat)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

import kctl.protocol as kp
from kctl.protocol.framing import IN_PLACE_ABOVE, FramePool, FrameReceiver
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.security.inter_broker import InterBrokerSecurity

log = logging.getLogger("kctl.broker.replication")

_SIZE = struct.Struct(">i")
CLIENT_ID = "kctl-replica-fetcher"


class ChannelError(Exception):
    """The request could not be sent or answered (connection failed, closed, or timed out)."""


class BrokerChannel:
    """Requests to one broker at ``host:port``, from broker ``source_id``."""

    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        request_timeout: float = 30.0,
        backoff: float = 0.1,
        max_backoff: float = 1.0,
        max_response_size: int = 100 * 1024 * 1024,
        security: InterBrokerSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.request_timeout = request_timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_response_size = max_response_size
        self.security = security
        self._renew_at: float | None = None  # reconnect before the SASL session ends
        self.versions: dict[int, tuple[int, int]] = {}
        self._transport: asyncio.Transport | None = None
        # Fetch answers' buffers, used again once the fetcher dropped every view of them
        self._pool = FramePool(min_size=IN_PLACE_ABOVE + 1, max_buffers=2, max_bytes=32 * 1024 * 1024)
        self._pending: dict[int, tuple[kp.RequestHeader, asyncio.Future[Any]]] = {}
        self._correlation = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._failures = 0
        self._next_attempt = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def retarget(self, host: str, port: int) -> None:
        """The broker re-registered at another address: reconnect there on the next request."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._disconnect(ChannelError(f"broker {self.broker_id} moved to {host}:{port}"))

    async def _ensure_connected(self) -> None:
        if self.connected:
            return
        async with self._connect_lock:
            if self.connected:
                return
            if self._closed:
                raise ChannelError(f"the channel to broker {self.broker_id} is closed")
            delay = self._next_attempt - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                if self._closed:
                    raise ChannelError(f"the channel to broker {self.broker_id} is closed")
            try:
                tls = self.security.ssl_context if self.security is not None else None
                receiver = FrameReceiver(self.max_response_size, self._pool)
                async with asyncio.timeout(self.request_timeout):
                    transport, _ = await asyncio.get_running_loop().create_connection(
                        lambda: _ResponseProtocol(self, receiver), self.host, self.port, ssl=tls
                    )
            except (OSError, TimeoutError) as error:
                self._failed()
                raise ChannelError(
                    f"cannot connect to broker {self.broker_id} at {self.host}:{self.port}: {error}"
                ) from None
            self._transport = transport
            try:
                response = await self._send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            except ChannelError:
                self._failed()
                raise
            if response.error_code:
                self._disconnect(ChannelError(f"ApiVersions failed: {kp.error_name(response.error_code)}"))
                self._failed()
                raise ChannelError(f"broker {self.broker_id} refused ApiVersions")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            await self._authenticate()
            self._failures = 0
            self._next_attempt = 0.0

    async def _authenticate(self) -> None:
        """SASL over the new connection when the inter-broker listener asks for it."""
        self._renew_at = None
        security = self.security
        if security is None or not security.sasl:
            return
        from kctl.broker.security.inter_broker import InterBrokerAuthenticationError

        try:
            lifetime_ms = await security.authenticate(self._send)
        except (ChannelError, InterBrokerAuthenticationError) as error:
            # logged by the caller, rate-limited (the next attempt is about a second away)
            failure = ChannelError(
                f"authentication to broker {self.broker_id} ({security.listener}, {security.mechanism} "
                f"as {security.username}) failed: {error}"
            )
            self._disconnect(failure)
            self._failed()
            raise failure from None
        if lifetime_ms > 0:
            self._renew_at = time.monotonic() + lifetime_ms * 0.85 / 1000

    def _failed(self) -> None:
        self._failures += 1
        delay = min(self.backoff * 2 ** (self._failures - 1), self.max_backoff)
        self._next_attempt = time.monotonic() + delay

    def check_version(self, api_key: int, version: int) -> None:
        low, high = self.versions.get(api_key, (0, -1))
        if not low <= version <= high:
            raise ChannelError(f"broker {self.broker_id} does not answer {ApiKey(api_key).name} v{version}")

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float | None = None) -> Any:
        """Send one request and return the decoded response body; raises ChannelError."""
        if (
            self._renew_at is not None
            and time.monotonic() >= self._renew_at
            and self.connected
            and not self._pending
        ):
            self._disconnect(ChannelError(f"renewing the session with broker {self.broker_id}"))
        await self._ensure_connected()
        self.check_version(api_key, version)
        return await self._send(api_key, version, body, timeout)

    async def _send(self, api_key: int, version: int, body: Any, timeout: float | None = None) -> Any:
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ChannelError(f"not connected to broker {self.broker_id}")
        header = kp.RequestHeader(api_key, version, next(self._correlation) & 0x7FFFFFFF, CLIENT_ID)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[header.correlation_id] = (header, future)
        try:
            transport.write(kp.encode_request(header, body))
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
            # arrives with the response, and a replica fetcher being closed went on fetching
            async with asyncio.timeout(timeout or self.request_timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            self._disconnect(ChannelError(f"{ApiKey(api_key).name} to broker {self.broker_id} timed out"))
            self._failed()
            raise ChannelError(f"{ApiKey(api_key).name} to broker {self.broker_id} timed out") from None
        finally:
            self._pending.pop(header.correlation_id, None)

    def _response(self, transport: asyncio.BaseTransport, frame: memoryview) -> None:
        """A complete response frame arrived on ``transport``: answer its request."""
        if transport is not self._transport:
            return  # a connection given up already
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        entry = self._pending.get(correlation_id)
        if entry is None:
            log.debug("response %d from broker %d has no request", correlation_id, self.broker_id)
            return
        header, future = entry
        if not future.done():
            try:
                future.set_result(kp.decode_response(header, frame)[1])
            except kp.ProtocolError as error:
                self._connection_failed(transport, f"malformed response: {error}")

    def _connection_failed(self, transport: asyncio.BaseTransport, why: str) -> None:
        """The connection ``transport`` broke (or sent what cannot be read): give it up."""
        if transport is self._transport:
            self._disconnect(ChannelError(f"connection to broker {self.broker_id} failed: {why}"))
            self._failed()
        else:
            transport.close()

    def _disconnect(self, error: Exception) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        pending, self._pending = self._pending, {}
        for _header, future in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a waiter may have timed out already

    async def close(self) -> None:
        self._closed = True
        self._disconnect(ChannelError(f"the channel to broker {self.broker_id} is closed"))


class _ResponseProtocol(asyncio.BufferedProtocol):
    """One connection of a ``BrokerChannel``: bytes into the frame receiver, frames to the channel."""

    def __init__(self, channel: BrokerChannel, receiver: FrameReceiver) -> None:
        self.channel = channel
        self.receiver = receiver
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        receiver = self.receiver
        transport = self.transport
        assert transport is not None
        receiver.buffer_updated(nbytes)
        try:
            frame = receiver.next_frame()
            while frame is not None:
                if frame.nbytes < 4:
                    raise kp.ProtocolDecodeError(f"a response of {frame.nbytes} bytes has no header")
                self.channel._response(transport, frame)
                del frame  # the last view here: the pool may use its buffer again
                if transport.is_closing():
                    return
                frame = receiver.next_frame()
        except kp.ProtocolDecodeError as error:
            self.channel._connection_failed(transport, f"bad response: {error}")

    def eof_received(self) -> bool:
        if self.transport is not None:
            self.channel._connection_failed(self.transport, "closed by the broker")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.channel._connection_failed(self.transport, str(exc) if exc else "connection lost")
