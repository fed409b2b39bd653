"""Client configuration under Kafka's client property names (``client.id``, ``request.timeout.ms``, ...).

``ClientConfig`` holds the settings every kctl client shares (connection, timeouts, retries). It is
built from keyword arguments (Python names) or from Kafka properties::

    ClientConfig(client_id="tool", request_timeout_ms=5000)
    ClientConfig.from_properties({"client.id": "tool", "request.timeout.ms": "5000"})

``PROPERTIES`` maps each Kafka name to its field; ``from_properties`` parses and checks the values
(``ClientConfigError`` on a bad one) and returns the keys it does not know in ``unknown`` (Kafka's
clients warn about those and go on). Producer and consumer configurations subclass ``ClientConfig``
and extend ``PROPERTIES``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

DEFAULT_CLIENT_ID = "kctl"


class ClientConfigError(ValueError):
    """A client property has a value that cannot be used."""


def _int(minimum: int | None = None) -> Callable[[str, str], int]:
    def parse(key: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ClientConfigError(f"{key}: expected an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise ClientConfigError(f"{key}: must be at least {minimum}, got {value}")
        return value

    return parse


def _str(key: str, text: str) -> str:
    return text


def _security_protocol(key: str, text: str) -> str:
    value = text.strip().upper()
    if value != "PLAINTEXT":
        raise ClientConfigError(f"{key}: only PLAINTEXT is supported, got {text!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Settings shared by every client; defaults are Apache Kafka's client defaults."""

    client_id: str = DEFAULT_CLIENT_ID
    request_timeout_ms: int = 30_000
    """How long to wait for the response to one request."""
    socket_connection_setup_timeout_ms: int = 10_000
    """How long to wait for a TCP connection (and its ApiVersions handshake)."""
    retry_backoff_ms: int = 100
    """First wait before retrying after a retriable error; doubles up to ``retry_backoff_max_ms``."""
    retry_backoff_max_ms: int = 1_000
    default_api_timeout_ms: int = 60_000
    """The deadline of a whole operation, retries included, when the caller gives none."""
    metadata_max_age_ms: int = 300_000
    """Refresh cluster metadata at least this often."""
    send_buffer_bytes: int = -1
    """SO_SNDBUF; -1 keeps the operating system's default."""
    receive_buffer_bytes: int = -1
    """SO_RCVBUF; -1 keeps the operating system's default."""
    security_protocol: str = "PLAINTEXT"

    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = {
        "client.id": ("client_id", _str),
        "request.timeout.ms": ("request_timeout_ms", _int(1)),
        "socket.connection.setup.timeout.ms": ("socket_connection_setup_timeout_ms", _int(1)),
        "retry.backoff.ms": ("retry_backoff_ms", _int(0)),
        "retry.backoff.max.ms": ("retry_backoff_max_ms", _int(0)),
        "default.api.timeout.ms": ("default_api_timeout_ms", _int(1)),
        "metadata.max.age.ms": ("metadata_max_age_ms", _int(0)),
        "send.buffer.bytes": ("send_buffer_bytes", _int(-1)),
        "receive.buffer.bytes": ("receive_buffer_bytes", _int(-1)),
        "security.protocol": ("security_protocol", _security_protocol),
    }
    """Kafka property name -> (field name, parser)."""

    IGNORED: ClassVar[frozenset[str]] = frozenset({"bootstrap.servers"})
    """Keys that are known but not settings of this object (``bootstrap.servers`` is passed apart)."""

    unknown: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    """Keys given to ``from_properties`` that are not client properties."""

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every Kafka property name this configuration accepts."""
        return frozenset(cls.PROPERTIES) | cls.IGNORED

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], **overrides: Any) -> ClientConfig:
        """Parse Kafka client properties; ``overrides`` (Python field names) win over them."""
        values: dict[str, Any] = {}
        unknown: list[str] = []
        for key, text in properties.items():
            spec = cls.PROPERTIES.get(key)
            if spec is None:
                if key not in cls.IGNORED:
                    unknown.append(key)
                continue
            field_name, parse = spec
            values[field_name] = parse(key, str(text))
        values.update(overrides)
        values["unknown"] = tuple(sorted(unknown))
        return cls(**values)

    def with_changes(self, **changes: Any) -> ClientConfig:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def __post_init__(self) -> None:
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            object.__setattr__(self, "retry_backoff_max_ms", self.retry_backoff_ms)

    @property
    def request_timeout(self) -> float:
        """``request.timeout.ms`` in seconds."""
        return self.request_timeout_ms / 1000.0

    @property
    def connect_timeout(self) -> float:
        """``socket.connection.setup.timeout.ms`` in seconds."""
        return self.socket_connection_setup_timeout_ms / 1000.0

    @property
    def default_api_timeout(self) -> float:
        """``default.api.timeout.ms`` in seconds."""
        return self.default_api_timeout_ms / 1000.0


def coerce_config(config: ClientConfig | Mapping[str, str] | None, **overrides: Any) -> ClientConfig:
    """A ``ClientConfig`` from a config object, Kafka properties, or None (defaults); ``overrides``
    are Python field names and win."""
    if config is None:
        return ClientConfig(**overrides)
    if isinstance(config, ClientConfig):
        return config.with_changes(**overrides) if overrides else config
    return ClientConfig.from_properties(config, **overrides)
