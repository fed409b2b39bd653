"""One blocking TCP connection to one broker: the ApiVersions handshake, version negotiation,
request/response matching by correlation id, pipelining, and timeouts on everything.

::

    with BrokerConnection("127.0.0.1", 9092, client_id="tool", timeout=30) as conn:
        metadata = conn.request(ApiKey.METADATA, MetadataRequest(topics=None))
        a = conn.send(ApiKey.LIST_OFFSETS, request_a)        # several requests in flight...
        b = conn.send(ApiKey.LIST_OFFSETS, request_b)
        response_a, response_b = conn.receive(a), conn.receive(b)   # ...answered in order

On connecting, the connection sends ApiVersions v3 and remembers the broker's version ranges. A
broker that does not speak v3 answers in the v0 layout with UNSUPPORTED_VERSION and its own ranges;
the connection then retries with the highest ApiVersions version both sides speak, as Kafka's
clients do. ``request``/``send`` pick the highest version of an API that both the codec and the
broker support (``negotiate_version``), unless told otherwise.

Failure model: any socket error, timeout or undecodable response closes the connection (the
responses still owed can no longer be matched) and raises ``KafkaConnectionError``,
``KafkaTimeoutError`` or ``KafkaProtocolError``; every later call raises ``KafkaConnectionError``.
Open a new connection to retry. With ``security`` (kctl.client.security.SecuritySettings) the socket
speaks TLS (handshake right after the TCP connect) and/or authenticates with SASL right after the
ApiVersions handshake; a refusal raises ``KafkaAuthenticationError``. Sending and receiving are each
guarded by a lock, so threads may share a connection: a response read for another thread's request
is kept until that thread asks for it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import ipaddress
import itertools
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kctl import __version__
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kctl.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    SCHEMAS,
    ApiKey,
    ErrorCode,
    FramePool,
    FrameReceiver,
    ProtocolDecodeError,
    RequestHeader,
    codec_version_ranges,
    decode_response,
    encode_request,
)
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.typed import ApiRequest

if TYPE_CHECKING:
    from kctl.client.security import SecuritySettings

DEFAULT_PORT = 9092
API_VERSIONS_VERSION = 3
"""The ApiVersions version sent first (Kafka 3.x clients send v3)."""
CLIENT_SOFTWARE_NAME = "kctl"
_MAX_CORRELATION_ID = 2**31 - 1

VersionRanges = Mapping[int, tuple[int, int]]

R = TypeVar("R")


# ----------------------------------------------------------------------------------------- addresses


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``"host:port"``, ``"[::1]:9092"``, ``"host"`` or ``"PLAINTEXT://host:port"`` to ``(host, port)``."""
    value = text.strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.rstrip("/")
    if not value:
        raise ValueError(f"empty broker address {text!r}")
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"malformed broker address {text!r}")
        port_text = rest[1:] if rest else ""
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    elif ":" in value:  # a bare IPv6 address
        try:
            ipaddress.IPv6Address(value)
        except ValueError:
            raise ValueError(
                f"malformed broker address {text!r} (an IPv6 address with a port goes in brackets)"
            ) from None
        host, port_text = value, ""
    else:
        host, port_text = value, ""
    if not host:
        raise ValueError(f"no host in broker address {text!r}")
    if not port_text:
        return host, default_port
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"bad port in broker address {text!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"port out of range in broker address {text!r}")
    return host, port


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", "h2"]`` to a list of ``(host, port)``; duplicates dropped."""
    items = (
        servers.split(",") if isinstance(servers, str) else [s for item in servers for s in item.split(",")]
    )
    addresses: list[tuple[str, int]] = []
    for item in items:
        if not item.strip():
            continue
        address = parse_address(item)
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ValueError("no bootstrap servers given")
    return addresses


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ----------------------------------------------------------------------------------------- versions


def api_name(api_key: int) -> str:
    """``"Metadata"`` for 3; ``"api key 99"`` for a key the codec does not know."""
    schema = SCHEMAS.get(api_key)
    return schema.name if schema is not None else f"api key {api_key}"


def negotiate_version(
    api_key: int,
    broker_versions: VersionRanges,
    client_versions: VersionRanges | None = None,
    *,
    min_version: int | None = None,
    max_version: int | None = None,
) -> int:
    """The highest version of ``api_key`` in both the client's and the broker's range.

    ``min_version``/``max_version`` narrow the client's range (a caller that needs a field added in
    some version, or that cannot handle a newer layout). Raises ``IncompatibleBrokerError`` when
    the broker does not list the API or the ranges do not overlap."""
    client_versions = client_versions if client_versions is not None else codec_version_ranges()
    name = api_name(api_key)
    ours = client_versions.get(api_key)
    if ours is None:
        raise IncompatibleBrokerError(f"the client cannot encode {name}", api_key=api_key)
    theirs = broker_versions.get(api_key)
    if theirs is None:
        raise IncompatibleBrokerError(f"the broker does not support {name}", api_key=api_key)
    low = max(ours[0], theirs[0], min_version if min_version is not None else 0)
    high = min(ours[1], theirs[1], max_version if max_version is not None else ours[1])
    if low > high:
        top = min(ours[1], max_version) if max_version is not None else ours[1]
        wanted = f"{max(ours[0], min_version or 0)}-{top}"
        raise IncompatibleBrokerError(
            f"no common version of {name}: the broker supports {theirs[0]}-{theirs[1]}, the client {wanted}",
            api_key=api_key,
        )
    return high


# ----------------------------------------------------------------------------------------- connection


@dataclasses.dataclass(frozen=True, slots=True)
class InFlightRequest:
    """A request that was sent; pass it to ``BrokerConnection.receive`` for its response."""

    correlation_id: int
    api_key: int
    api_version: int
    header: RequestHeader
    expect_response: bool = True
    sent_at: float = 0.0  # time.monotonic() when it was sent

    @property
    def label(self) -> str:
        return f"{api_name(self.api_key)} v{self.api_version} (correlation id {self.correlation_id})"

    def time_left(self, timeout: float) -> float:
        """What is left of a wait of ``timeout`` seconds counted from the send, as Kafka's
        ``request.timeout.ms`` is: the timeout for ``receive`` when other answers were read first
        (requests pipelined on one connection). At least 10 ms, so that an answer already here is
        still read: for small answers (Produce), not for a fetch's megabytes, which take longer to
        read than that."""
        return max(self.sent_at + timeout - time.monotonic(), 0.01)


def _expects_response(api_key: int, body: Any) -> bool:
    """Produce with acks=0 is the one request a Kafka broker never answers."""
    if api_key != ApiKey.PRODUCE:
        return True
    acks = body.get("acks") if isinstance(body, Mapping) else getattr(body, "acks", None)
    return acks != 0


class BrokerConnection:
    """A blocking connection to one broker. Connects (and does the ApiVersions handshake) on creation.

    ``timeout`` (seconds) is the default wait for each response; ``connect_timeout`` bounds the TCP
    connect plus the handshake. ``node_id`` is informational (the broker id when known)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "kctl",
        timeout: float = 30.0,
        connect_timeout: float | None = 10.0,
        node_id: int | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        client_versions: VersionRanges | None = None,
        security: SecuritySettings | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.host = host
        self.port = int(port)
        self.client_id = client_id
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout) if connect_timeout is not None else self.timeout
        self.node_id = node_id
        self.client_versions: dict[int, tuple[int, int]] = dict(
            client_versions if client_versions is not None else codec_version_ranges()
        )
        self.broker_versions: dict[int, tuple[int, int]] = {}
        """``{api_key: (min, max)}`` from the broker's ApiVersions response."""
        self.api_versions_version = -1
        """The ApiVersions version the handshake succeeded with."""
        self._receiver = FrameReceiver(max_frame_size)
        self._frames: collections.deque[memoryview] = collections.deque()
        self._in_flight: collections.deque[InFlightRequest] = collections.deque()
        self._done: dict[int, Any] = {}
        self._send_lock = threading.Lock()
        self._recv_lock = threading.Lock()
        self._correlation = itertools.count(1)
        self._closed_reason: str | None = None
        self._sock: socket.socket | None = None
        self.security = security if security is not None and security.protocol != "PLAINTEXT" else None
        self._connect(send_buffer_bytes, receive_buffer_bytes)

    # ------------------------------------------------------------------------------ life cycle

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def __repr__(self) -> str:
        node = f" node {self.node_id}" if self.node_id is not None else ""
        state = "closed" if self.closed else "open"
        return f"<BrokerConnection{node} {self.address} {state}>"

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._sock is None

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not been read yet."""
        return len(self._in_flight)

    @property
    def frame_pool(self) -> FramePool | None:
        """Where the buffers of large responses come from (None: a fresh buffer each)."""
        return self._receiver.pool

    def use_frame_pool(self, pool: FramePool | None = None) -> FramePool:
        """Receive large responses into buffers used again once every view of an earlier response
        is gone (``kctl.protocol.FramePool``; a new one by default): for a client that moves many
        megabytes of Fetch answers (the mirror), no zero-filled fresh memory per response. The pool
        is used under the connection's receive lock."""
        pool = pool if pool is not None else FramePool()
        self._receiver.pool = pool
        return pool

    def close(self) -> None:
        """Close the socket; requests still in flight are abandoned."""
        self._fail("connection closed by the client")

    def _fail(self, reason: str) -> None:
        sock, self._sock = self._sock, None
        if self._closed_reason is None:
            self._closed_reason = reason
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _check_open(self) -> socket.socket:
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(
                f"connection to {self.address} is closed ({self._closed_reason})",
                host=self.host,
                port=self.port,
            )
        return sock

    def _connect(self, send_buffer_bytes: int, receive_buffer_bytes: int) -> None:
        deadline = time.monotonic() + self.connect_timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"timed out connecting to {self.address} after {self.connect_timeout:g}s"
            ) from None
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise KafkaConnectionError(
                f"cannot connect to {self.address}: {reason}", host=self.host, port=self.port
            ) from error
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
            if receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        except OSError:
            sock.close()
            raise
        security = self.security
        if security is not None and security.tls:
            from kctl.client.security import SecurityError

            try:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                sock = security.wrap(sock, self.host)
            except SecurityError as error:
                sock.close()
                raise KafkaAuthenticationError(f"authentication failed: {error}") from None
            except TimeoutError:
                sock.close()
                raise KafkaTimeoutError(f"timed out in the TLS handshake with {self.address}") from None
            except OSError as error:
                sock.close()
                raise KafkaConnectionError(
                    f"TLS handshake with {self.address} failed: {error}", host=self.host, port=self.port
                ) from error
        self._sock = sock
        self._closed_reason = None
        try:
            self._handshake(deadline)
        except BaseException:
            self._fail("the ApiVersions handshake failed")
            raise
        if security is not None and security.sasl:
            from kctl.client.security import SecurityError

            try:
                security.authenticate(self, max(deadline - time.monotonic(), 0.001))
            except SecurityError as error:
                self._fail("SASL authentication failed")
                raise KafkaAuthenticationError(
                    f"authentication failed: SASL/{security.sasl_mechanism.upper()} for "
                    f"User:{security.sasl_username} on {self.address}: {error}"
                ) from None
            except BaseException:
                self._fail("SASL authentication failed")
                raise

    def _handshake(self, deadline: float) -> None:
        ours = self.client_versions.get(ApiKey.API_VERSIONS, (0, 0))
        version = min(API_VERSIONS_VERSION, ours[1])
        body = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=__version__
        )
        for _attempt in range(3):
            timeout = max(deadline - time.monotonic(), 0.001)
            response = self.receive(self._send(ApiKey.API_VERSIONS, body, version), timeout=timeout)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.NONE:
                self.broker_versions = ranges
                self.api_versions_version = version
                return
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                theirs = ranges.get(ApiKey.API_VERSIONS)
                # The broker's reply lists its ApiVersions range; retry with the best common version
                # (v0 if it did not say, as Kafka's clients do).
                retry = 0
                if theirs is not None and theirs[0] <= min(ours[1], theirs[1]):
                    retry = min(ours[1], theirs[1])
                if retry >= version:
                    retry = version - 1
                version = max(retry, 0)
                continue
            raise BrokerResponseError(
                response.error_code, context=f"ApiVersions handshake with {self.address}"
            )
        raise KafkaProtocolError(f"{self.address} rejected every ApiVersions version")

    # ------------------------------------------------------------------------------ versions

    def supports(self, api_key: int, version: int | None = None) -> bool:
        """Whether the broker answers ``api_key`` (at ``version``, if given)."""
        theirs = self.broker_versions.get(api_key)
        if theirs is None:
            return False
        return version is None or theirs[0] <= version <= theirs[1]

    def version_for(
        self, api_key: int, *, min_version: int | None = None, max_version: int | None = None
    ) -> int:
        """The version ``request``/``send`` would use for ``api_key``."""
        return negotiate_version(
            api_key,
            self.broker_versions,
            self.client_versions,
            min_version=min_version,
            max_version=max_version,
        )

    def _check_version(self, api_key: int, version: int) -> None:
        ours = self.client_versions.get(api_key)
        if ours is None or not ours[0] <= version <= ours[1]:
            raise IncompatibleBrokerError(
                f"the client cannot encode {api_name(api_key)} v{version}", api_key=api_key
            )
        if not self.supports(api_key, version):
            theirs = self.broker_versions.get(api_key)
            supported = f"{theirs[0]}-{theirs[1]}" if theirs else "none"
            raise IncompatibleBrokerError(
                f"the broker does not support {api_name(api_key)} v{version} (it supports {supported})",
                api_key=api_key,
            )

    # ------------------------------------------------------------------------------ requests

    def request(
        self, api_key: int, body: ApiRequest[R], version: int | None = None, *, timeout: float | None = None
    ) -> R:
        """Send one request and wait for its response body (None for Produce with acks=0).

        ``version`` defaults to ``version_for(api_key)``; ``timeout`` (seconds) to ``self.timeout``."""
        return self.receive(self.send(api_key, body, version), timeout=timeout)

    def send(self, api_key: int, body: Any, version: int | None = None) -> InFlightRequest:
        """Send a request without waiting; the responses come back in the order of the requests."""
        if version is None:
            version = self.version_for(api_key)
        else:
            self._check_version(api_key, version)
        return self._send(api_key, body, version)

    def _send(self, api_key: int, body: Any, version: int) -> InFlightRequest:
        with self._send_lock:
            sock = self._check_open()
            correlation_id = next(self._correlation)
            if correlation_id > _MAX_CORRELATION_ID:
                self._correlation = itertools.count(2)
                correlation_id = 1
            header = RequestHeader(api_key, version, correlation_id, self.client_id)
            data = encode_request(header, body)  # an encoding error leaves the connection usable
            request = InFlightRequest(
                correlation_id, api_key, version, header, _expects_response(api_key, body), time.monotonic()
            )
            if request.expect_response:
                self._in_flight.append(request)
            try:
                sock.settimeout(self.timeout)
                sock.sendall(data)
            except TimeoutError:
                self._fail(f"timed out sending {request.label}")
                raise KafkaTimeoutError(f"timed out sending {request.label} to {self.address}") from None
            except OSError as error:
                reason = error.strerror or str(error) or type(error).__name__
                self._fail(f"send failed: {reason}")
                raise KafkaConnectionError(
                    f"lost the connection to {self.address} sending {request.label}: {reason}",
                    host=self.host,
                    port=self.port,
                ) from error
            return request

    def receive(self, request: InFlightRequest | None = None, *, timeout: float | None = None) -> Any:
        """The response body to ``request`` (default: the oldest request in flight), waiting at most
        ``timeout`` seconds (default ``self.timeout``). Responses to earlier requests read on the way
        are kept for their own ``receive`` calls."""
        if request is not None and not request.expect_response:
            return None
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        with self._recv_lock:
            if request is None:
                if not self._in_flight:
                    if self._done:
                        return self._done.pop(min(self._done))
                    raise ValueError("no request is in flight")
                request = self._in_flight[0]
            while True:
                if request.correlation_id in self._done:
                    return self._done.pop(request.correlation_id)
                if request not in self._in_flight:
                    raise ValueError(f"{request.label} is not in flight on this connection")
                self._check_open()
                head = self._in_flight[0]
                frame = self._next_frame(head, deadline)
                self._in_flight.popleft()
                try:
                    _, body = decode_response(head.header, frame)
                except ProtocolDecodeError as error:
                    self._fail(f"undecodable response: {error}")
                    raise KafkaProtocolError(
                        f"cannot decode the response of {self.address} to {head.label}: {error}"
                    ) from None
                if head is request:
                    return body
                self._done[head.correlation_id] = body

    def _next_frame(self, head: InFlightRequest, deadline: float) -> memoryview:
        while not self._frames:
            sock = self._check_open()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(f"timed out waiting for the response to {head.label}")
                raise KafkaTimeoutError(f"timed out waiting for {self.address} to answer {head.label}")
            receiver = self._receiver
            try:
                sock.settimeout(remaining)
                n = sock.recv_into(receiver.get_buffer())
            except TimeoutError:
                continue  # the deadline check above raises
            except OSError as error:
                reason = error.strerror or str(error) or type(error).__name__
                self._fail(f"receive failed: {reason}")
                raise KafkaConnectionError(
                    f"lost the connection to {self.address} waiting for {head.label}: {reason}",
                    host=self.host,
                    port=self.port,
                ) from error
            if n == 0:
                self._fail("closed by the broker")
                raise KafkaConnectionError(
                    f"{self.address} closed the connection before answering {head.label}",
                    host=self.host,
                    port=self.port,
                )
            receiver.buffer_updated(n)
            try:
                frame = receiver.next_frame()
                while frame is not None:
                    self._frames.append(frame)
                    frame = receiver.next_frame()
            except ProtocolDecodeError as error:
                self._fail(f"bad frame: {error}")
                raise KafkaProtocolError(f"bad frame from {self.address}: {error}") from None
        return self._frames.popleft()
