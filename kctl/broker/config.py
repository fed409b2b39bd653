"""Broker configuration: the definition table ``BROKER_CONFIGS`` (Kafka's broker property names,
types, defaults, validators, docs), the parsed :class:`BrokerConfig`, and how the ``log.*``
properties become the default topic-level :class:`LogConfig` (each topic config's first synonym).

The properties are defined by area in kctl.broker.properties (one module, one list each, keys built
with ``broker_key``), the security ones in kctl.broker.security.config and the transaction
coordinator's in kctl.broker.config_transactions; ``BROKER_SECTIONS``
registers each list, in the order they are documented. A new area is a new module there and one
line in ``BROKER_SECTIONS``.

A real Kafka ``server.properties`` loads unchanged: properties kctl does not use are reported as
ignored, never an error."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.broker.config_transactions import TRANSACTION_CONFIGS
from kctl.broker.properties.groups import GROUP_CONFIGS
from kctl.broker.properties.key import CLUSTER_WIDE_CONFIGS, PER_BROKER_CONFIGS
from kctl.broker.properties.limits import LIMIT_CONFIGS
from kctl.broker.properties.log import LOG_CONFIGS
from kctl.broker.properties.log_output import LOG_OUTPUT_CONFIGS, LOGGER_LEVEL_PREFIX, logger_levels
from kctl.broker.properties.replication import REPLICATION_CONFIGS, REPLICATION_THROTTLE_CONFIGS
from kctl.broker.properties.server import SERVER_CONFIGS
from kctl.broker.security.config import SECURITY_CONFIGS, is_dynamic_listener_config
from kctl.common.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Dynamic,
    ParsedConfig,
    format_value,
)
from kctl.log.config import TOPIC_CONFIGS, LogConfig, parse_topic_config

__all__ = [
    "BROKER_CONFIGS",
    "BROKER_SECTIONS",
    "CLUSTER_WIDE_CONFIGS",
    "PER_BROKER_CONFIGS",
    "BrokerConfig",
    "BrokerConfigError",
    "Listener",
    "parse_listeners",
]


class BrokerConfigError(ConfigError):
    """A broker property that cannot be parsed or is out of range."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


def parse_listeners(text: str) -> list[Listener]:
    listeners = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = _LISTENER.match(part)
        if match is None:
            raise BrokerConfigError(f"listener {part!r} is not NAME://HOST:PORT")
        host = match["host"].strip("[]")
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise BrokerConfigError(f"listener {part!r}: port {port} is out of range")
        listeners.append(Listener(match["name"].upper(), host, port))
    if not listeners:
        raise BrokerConfigError("no listener configured")
    return listeners


#: The broker's properties by area, in the order they are documented and described: one line per
#: area (its module in kctl.broker.properties defines the list).
BROKER_SECTIONS: list[list[ConfigKey]] = [
    SERVER_CONFIGS,
    LOG_CONFIGS,
    REPLICATION_THROTTLE_CONFIGS,
    GROUP_CONFIGS,
    REPLICATION_CONFIGS,
    LIMIT_CONFIGS,
    LOG_OUTPUT_CONFIGS,
    SECURITY_CONFIGS,
    TRANSACTION_CONFIGS,
]

#: Every broker property kctl uses.
BROKER_CONFIGS = ConfigDef(
    "broker", [key for section in BROKER_SECTIONS for key in section], BrokerConfigError
)


def _synonym_groups() -> dict[str, frozenset[str]]:
    groups: dict[str, frozenset[str]] = {}
    for key in BROKER_CONFIGS.values():
        if key.synonyms:
            members = frozenset({key.name, *(s.name for s in key.synonyms)})
            for member in members:
                groups[member] = groups.get(member, frozenset()) | members
    return groups


_SYNONYM_GROUPS = _synonym_groups()


_PREFIXED_FAMILIES = ("listener.name.", LOGGER_LEVEL_PREFIX)


class BrokerConfig:
    """Parsed broker properties. ``values`` holds every known property (defaults filled in),
    ``explicit`` the names that were set, ``ignored`` the unknown names that were given."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        given = {str(k): str(v) for k, v in (properties or {}).items()}
        parsed = self._load(given)
        self.explicit = set(parsed.given)
        # listener.name.<listener>.<property>: Kafka's per-listener overrides (kctl.broker.security);
        # log.level.<logger>: a logger's level (kctl.broker.properties.log_output)
        self.ignored = [name for name in parsed.unknown if not name.startswith(_PREFIXED_FAMILIES)]
        try:
            #: logger name -> level, from the log.level.<logger> properties
            self.logger_levels = logger_levels(given)
        except ConfigError as error:
            raise BrokerConfigError(error.key, error.reason) from None
        self.properties = given
        #: dynamic configs (AlterConfigs, stored in the registry): this broker's and the cluster's
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}

    def _load(self, given: Mapping[str, str]) -> ParsedConfig:
        parsed = BROKER_CONFIGS.parse(given)
        self.raw: dict[str, str | None] = {name: key.default_text() for name, key in BROKER_CONFIGS.items()}
        self.raw.update({name: given[name] for name in parsed.given})
        self.values: dict[str, Any] = dict(parsed.values)
        self._derive()
        return parsed

    def apply_dynamic(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> set[str]:
        """Layer the dynamic configs over the static ones, as Kafka ranks them: this broker's, then
        the cluster-wide defaults, then server.properties, then the built-in defaults; a name set by
        a higher layer hides its synonyms in lower ones (a dynamic ``log.retention.hours`` wins over a
        static ``log.retention.ms``). Only dynamic keys are taken. Returns the names whose value
        changed; raises BrokerConfigError (nothing changed) when the result does not parse."""
        merged = dict(self.properties)
        layers = [
            {
                k: v
                for k, v in layer.items()
                if (k in BROKER_CONFIGS and BROKER_CONFIGS[k].dynamic != Dynamic.READ_ONLY)
                or is_dynamic_listener_config(k)
            }
            for layer in (default, per_broker)
        ]
        for layer in layers:
            for name in layer:
                for other in _SYNONYM_GROUPS.get(name, ()):
                    merged.pop(other, None)
            merged.update(layer)
        before, prefixed = dict(self.values), self._listener_layer()
        try:
            self._load(merged)
        except ConfigError:
            self._load(self.effective_properties())
            raise
        self.dynamic_default, self.dynamic_broker = layers
        changed = {name for name, value in self.values.items() if before.get(name) != value}
        now = self._listener_layer()
        return changed | {n for n in prefixed.keys() | now.keys() if prefixed.get(n) != now.get(n)}

    def _listener_layer(self) -> dict[str, str]:
        return {k: v for k, v in self.effective_properties().items() if is_dynamic_listener_config(k)}

    def effective_properties(self) -> dict[str, str]:
        """server.properties with the dynamic configs layered over it (listener-prefixed ones too):
        what the listeners' security is built from."""
        merged = dict(self.properties)
        for layer in (self.dynamic_default, self.dynamic_broker):
            for name in layer:
                for other in _SYNONYM_GROUPS.get(name, ()):
                    merged.pop(other, None)
            merged.update(layer)
        return merged

    def _derive(self) -> None:
        v = self.values
        self.broker_id: int = v["broker.id"]
        self.listeners = parse_listeners(v["listeners"])
        self.advertised_listeners = (
            parse_listeners(v["advertised.listeners"]) if v["advertised.listeners"] else self.listeners
        )
        dirs = v["log.dirs"] or v["log.dir"]
        self.log_dirs = [Path(d.strip()) for d in dirs.split(",") if d.strip()]
        if not self.log_dirs:
            raise BrokerConfigError("log.dirs is empty")
        self.zookeeper_connect: str | None = v["zookeeper.connect"] or None
        if v["replica.socket.timeout.ms"] < v["replica.fetch.wait.max.ms"]:
            raise BrokerConfigError(
                "replica.socket.timeout.ms",
                f"{v['replica.socket.timeout.ms']} must be at least replica.fetch.wait.max.ms "
                f"({v['replica.fetch.wait.max.ms']})",
            )
        if v["log.flush.interval.ms"] is None:
            v["log.flush.interval.ms"] = LONG_MAX
        try:
            self.log_config = self.default_log_config()
        except ValueError as error:
            raise BrokerConfigError(str(error)) from None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def default_log_config(self) -> LogConfig:
        """Topic-level defaults from the ``log.*`` broker properties."""
        overrides = {
            name: format_value(self.values[key.synonyms[0].name])
            for name, key in TOPIC_CONFIGS.items()
            if key.synonyms
        }
        return LogConfig().with_overrides(overrides)

    def topic_config_source(self, topic_key: str) -> tuple[str, str] | None:
        """(broker property, value) that sets the default of ``topic_key``, if set explicitly."""
        key = TOPIC_CONFIGS.get(topic_key)
        broker = key.synonyms[0].name if key is not None and key.synonyms else None
        if broker is None or broker not in self.explicit:
            return None
        return broker, format_value(self.values[broker]) or ""

    def validate_topic_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig for a topic with ``overrides``; raises ValueError for unknown or bad values."""
        parse_topic_config(overrides)
        return self.log_config.with_overrides(overrides)
