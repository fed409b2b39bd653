"""The inter-broker client: one asyncio connection from this broker to another, over kctl.protocol
(kctl.broker never imports kctl.client).

A ``BrokerChannel`` connects lazily to the other broker's endpoint (``inter.broker.listener.name``'s,
or its first), checks with ApiVersions that it answers the versions the replica fetcher uses, and
authenticates when that listener speaks TLS and/or SASL (``security``: kctl.broker.security.inter_broker;
a SASL session with a lifetime is renewed by reconnecting before it ends), and sends requests with
increasing correlation ids; a reader task matches each response to its request.
Every request has a timeout. A failure (refused connection, reset, timeout, malformed response) closes
the connection and fails every request in flight with ``ChannelError``; the next request reconnects,
no sooner than the backoff after the failure (doubling up to ``max_backoff`` while failures repeat)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

import kctl.protocol as kp
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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[kp.RequestHeader, asyncio.Future[Any]]] = {}
        self._correlation = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._failures = 0
        self._next_attempt = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

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
                async with asyncio.timeout(self.request_timeout):
                    reader, writer = await asyncio.open_connection(self.host, self.port, ssl=tls)
            except (OSError, TimeoutError) as error:
                self._failed()
                raise ChannelError(
                    f"cannot connect to broker {self.broker_id} at {self.host}:{self.port}: {error}"
                ) from None
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.get_running_loop().create_task(
                self._read_responses(reader), name=f"kctl-channel-{self.broker_id}"
            )
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
        writer = self._writer
        if writer is None or writer.is_closing():
            raise ChannelError(f"not connected to broker {self.broker_id}")
        header = kp.RequestHeader(api_key, version, next(self._correlation) & 0x7FFFFFFF, CLIENT_ID)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[header.correlation_id] = (header, future)
        try:
            writer.write(kp.encode_request(header, body))
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

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if size < 0 or size > self.max_response_size:
                    raise ChannelError(f"bad response size {size}")
                payload = await reader.readexactly(size)
                (correlation_id,) = _SIZE.unpack_from(payload, 0)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    log.debug("response %d from broker %d has no request", correlation_id, self.broker_id)
                    continue
                header, future = entry
                if not future.done():
                    try:
                        future.set_result(kp.decode_response(header, bytearray(payload))[1])
                    except kp.ProtocolError as error:
                        raise ChannelError(f"malformed response: {error}") from error
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.IncompleteReadError, ChannelError) as error:
            self._disconnect(ChannelError(f"connection to broker {self.broker_id} failed: {error}"))
            self._failed()

    def _disconnect(self, error: Exception) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        task, self._read_task = self._read_task, None
        if writer is not None:
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for _header, future in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a waiter may have timed out already

    async def close(self) -> None:
        self._closed = True
        task = self._read_task
        self._disconnect(ChannelError(f"the channel to broker {self.broker_id} is closed"))
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
