"""Client configuration under Kafka's client property names (``client.id``, ``request.timeout.ms``, ...).

``ClientConfig`` holds the settings every kctl client shares (connection, timeouts, retries). It is
built from keyword arguments (Python names) or from Kafka properties::

    ClientConfig(client_id="tool", request_timeout_ms=5000)
    ClientConfig.from_properties({"client.id": "tool", "request.timeout.ms": "5000"})

``CLIENT_CONFIGS`` defines the properties (one ``ConfigKey`` each: type, default, validator, docs);
``PROPERTIES`` maps each Kafka name to its field; ``from_properties`` parses and checks the values
(``ClientConfigError`` on a bad one) and returns the keys it does not know in ``unknown`` (Kafka's
clients warn about those and go on). Producer and consumer configurations subclass ``ClientConfig``
and extend ``CONFIG_DEF`` (and so ``PROPERTIES``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from kctl.client.security import SecuritySettings
from kctl.common.config_def import ConfigDef, ConfigError, ConfigKey, Custom, Importance, Range
from kctl.common.config_def import ConfigType as T

DEFAULT_CLIENT_ID = "kctl"
C = TypeVar("C", bound="ClientConfig")


class ClientConfigError(ConfigError):
    """A client property has a value that cannot be used."""


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _security_protocol(value: str) -> str:
    if value.upper() not in _PROTOCOLS:
        raise ValueError(f"expected one of {', '.join(_PROTOCOLS)}, got {value!r}")
    return value.upper()


def _sasl_mechanism(value: str) -> str:
    if value.upper() not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(f"expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got {value!r}")
    return value.upper()


CLIENT_CONFIGS = ConfigDef(
    "client",
    [
        ConfigKey(
            "client.id",
            T.STRING,
            DEFAULT_CLIENT_ID,
            doc="A name for this client in the broker's logs and quotas.",
        ),
        ConfigKey(
            "request.timeout.ms",
            T.INT,
            30_000,
            Range(1),
            "How long to wait for the response to one request.",
        ),
        ConfigKey(
            "socket.connection.setup.timeout.ms",
            T.LONG,
            10_000,
            Range(1),
            "How long to wait for a TCP connection (and its ApiVersions handshake).",
        ),
        ConfigKey(
            "retry.backoff.ms",
            T.LONG,
            100,
            Range(0),
            "First wait before retrying after a retriable error; doubles up to retry.backoff.max.ms.",
            Importance.LOW,
        ),
        ConfigKey(
            "retry.backoff.max.ms",
            T.LONG,
            1_000,
            Range(0),
            "Longest wait between retries.",
            Importance.LOW,
        ),
        ConfigKey(
            "default.api.timeout.ms",
            T.INT,
            60_000,
            Range(1),
            "The deadline of a whole operation, retries included, when the caller gives none.",
        ),
        ConfigKey(
            "metadata.max.age.ms",
            T.LONG,
            300_000,
            Range(0),
            "Refresh cluster metadata at least this often.",
            Importance.LOW,
        ),
        ConfigKey(
            "send.buffer.bytes",
            T.INT,
            -1,
            Range(-1),
            "SO_SNDBUF; -1 keeps the operating system's default.",
        ),
        ConfigKey(
            "receive.buffer.bytes",
            T.INT,
            -1,
            Range(-1),
            "SO_RCVBUF; -1 keeps the operating system's default.",
        ),
        ConfigKey(
            "security.protocol",
            T.STRING,
            "PLAINTEXT",
            Custom(_security_protocol, "PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL"),
            "Protocol used to talk to brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        ),
        ConfigKey(
            "sasl.mechanism",
            T.STRING,
            "PLAIN",
            Custom(_sasl_mechanism, "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512"),
            "SASL mechanism (kctl: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default is GSSAPI).",
        ),
        ConfigKey("sasl.username", T.STRING, None, doc="SASL user name (librdkafka)."),
        ConfigKey("sasl.password", T.PASSWORD, None, doc="SASL password (librdkafka)."),
        ConfigKey(
            "sasl.jaas.config",
            T.PASSWORD,
            None,
            doc='Java clients\' JAAS line; its username="..." password="..." are used.',
        ),
        ConfigKey("ssl.ca.location", T.STRING, None, doc="PEM file of the CA certificates to trust."),
        ConfigKey("ssl.certificate.location", T.STRING, None, doc="PEM file of the client's certificate."),
        ConfigKey("ssl.key.location", T.STRING, None, doc="PEM file of the client's private key."),
        ConfigKey("ssl.key.password", T.PASSWORD, None, doc="Password of the client's private key."),
        ConfigKey(
            "ssl.endpoint.identification.algorithm",
            T.STRING,
            "https",
            doc="https: check the broker's certificate matches its host name; none: do not.",
        ),
        ConfigKey(
            "ssl.truststore.location", T.STRING, None, doc="Java name: PEM trust store (as ssl.ca.location)."
        ),
        ConfigKey(
            "ssl.keystore.location",
            T.STRING,
            None,
            doc="Java name: PEM key store, the key and the certificate chain in one file.",
        ),
    ],
    ClientConfigError,
)
_default = CLIENT_CONFIGS.default_of


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Settings shared by every client; defaults are Apache Kafka's client defaults (documented in
    ``CLIENT_CONFIGS``; each field is a property: ``request_timeout_ms`` is ``request.timeout.ms``)."""

    client_id: str = _default("client.id")
    request_timeout_ms: int = _default("request.timeout.ms")
    socket_connection_setup_timeout_ms: int = _default("socket.connection.setup.timeout.ms")
    retry_backoff_ms: int = _default("retry.backoff.ms")
    retry_backoff_max_ms: int = _default("retry.backoff.max.ms")
    default_api_timeout_ms: int = _default("default.api.timeout.ms")
    metadata_max_age_ms: int = _default("metadata.max.age.ms")
    send_buffer_bytes: int = _default("send.buffer.bytes")
    receive_buffer_bytes: int = _default("receive.buffer.bytes")
    security_protocol: str = _default("security.protocol")
    sasl_mechanism: str = _default("sasl.mechanism")
    sasl_username: str | None = _default("sasl.username")
    sasl_password: str | None = dataclasses.field(default=_default("sasl.password"), repr=False)
    sasl_jaas_config: str | None = dataclasses.field(default=_default("sasl.jaas.config"), repr=False)
    ssl_ca_location: str | None = _default("ssl.ca.location")
    ssl_certificate_location: str | None = _default("ssl.certificate.location")
    ssl_key_location: str | None = _default("ssl.key.location")
    ssl_key_password: str | None = dataclasses.field(default=_default("ssl.key.password"), repr=False)
    ssl_endpoint_identification_algorithm: str = _default("ssl.endpoint.identification.algorithm")
    ssl_truststore_location: str | None = _default("ssl.truststore.location")
    ssl_keystore_location: str | None = _default("ssl.keystore.location")

    CONFIG_DEF: ClassVar[ConfigDef] = CLIENT_CONFIGS
    """The definition of this configuration's properties (types, defaults, docs)."""

    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = (
        CLIENT_CONFIGS.attribute_parsers()
    )
    """Kafka property name -> (field name, parser), from ``CONFIG_DEF``."""

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

    @classmethod
    def coerce(cls: type[C], config: ClientConfig | Mapping[str, str] | None, **overrides: Any) -> C:
        """A ``cls`` from one (as it is, or with ``overrides``), from another ``ClientConfig`` (the
        settings both have are kept), from Kafka properties, or from None (defaults); ``overrides``
        are Python field names and win."""
        if config is None:
            return cls(**overrides)
        if isinstance(config, cls):
            return dataclasses.replace(config, **overrides) if overrides else config
        if isinstance(config, ClientConfig):
            names = {f.name for f in dataclasses.fields(cls) if f.init}
            shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names}
            return cls(**{**shared, **overrides})
        return cls.from_properties(config, **overrides)  # type: ignore[return-value]

    def __post_init__(self) -> None:
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            object.__setattr__(self, "retry_backoff_max_ms", self.retry_backoff_ms)

    @property
    def security(self) -> SecuritySettings:
        """The TLS / SASL settings of this configuration's connections."""
        return SecuritySettings.from_config(self)

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
    """A ``ClientConfig`` (any kind of client's config is kept as it is) from a config object, Kafka
    properties, or None (defaults); ``overrides`` are Python field names and win."""
    return ClientConfig.coerce(config, **overrides)
