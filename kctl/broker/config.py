"""Broker configuration: Kafka's broker property names, their defaults, parsing and validation, and
how the ``log.*`` properties become the default topic-level :class:`LogConfig`.

A real Kafka ``server.properties`` loads unchanged: properties kctl does not use are reported as
ignored, never an error."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.log.config import LogConfig, parse_topic_config

HOUR_MS = 60 * 60 * 1000


class BrokerConfigError(ValueError):
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


def _int(minimum: int | None = None) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise BrokerConfigError(f"{name}: {raw!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise BrokerConfigError(f"{name}: {value} is below the minimum {minimum}")
        return value

    return parse


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise BrokerConfigError(f"{name}: {raw!r} must be true or false")
    return value == "true"


def _str(name: str, raw: str) -> str:
    return raw.strip()


@dataclass(frozen=True)
class BrokerProperty:
    name: str
    parse: Callable[[str, str], Any]
    default: str | None
    doc: str


_PROPERTIES = [
    BrokerProperty("broker.id", _int(0), "0", "This broker's id in the cluster."),
    BrokerProperty(
        "listeners", _str, "PLAINTEXT://127.0.0.1:9092", "Addresses to listen on, NAME://HOST:PORT,..."
    ),
    BrokerProperty("advertised.listeners", _str, None, "Addresses given to clients (default: listeners)."),
    BrokerProperty("log.dirs", _str, None, "Comma-separated data directories (default: log.dir)."),
    BrokerProperty("log.dir", _str, "./data", "The data directory when log.dirs is not set."),
    BrokerProperty(
        "num.partitions",
        _int(1),
        "1",
        "Partitions of auto-created topics and of topics created without a count.",
    ),
    BrokerProperty("default.replication.factor", _int(1), "1", "Replication factor of auto-created topics."),
    BrokerProperty(
        "auto.create.topics.enable", _bool, "true", "Create a topic on first produce or metadata request."
    ),
    BrokerProperty("delete.topic.enable", _bool, "true", "Allow DeleteTopics."),
    BrokerProperty(
        "message.max.bytes", _int(0), "1048588", "Largest record batch accepted (topic: max.message.bytes)."
    ),
    BrokerProperty("socket.request.max.bytes", _int(1), "104857600", "Largest request frame accepted."),
    BrokerProperty(
        "zookeeper.connect",
        _str,
        None,
        "ZooKeeper connection string host:port[,host:port][/chroot]; empty: embedded.",
    ),
    BrokerProperty("zookeeper.session.timeout.ms", _int(1), "18000", "ZooKeeper session timeout."),
    BrokerProperty(
        "zookeeper.connection.timeout.ms",
        _int(1),
        None,
        "ZooKeeper connection timeout (default: the session timeout).",
    ),
    BrokerProperty(
        "log.segment.bytes", _int(14), "1073741824", "Segment size at which a new segment is rolled."
    ),
    BrokerProperty(
        "log.roll.ms",
        _int(1),
        None,
        "Segment age at which a new segment is rolled (default: log.roll.hours).",
    ),
    BrokerProperty(
        "log.roll.hours", _int(1), "168", "Segment age in hours at which a new segment is rolled."
    ),
    BrokerProperty("log.retention.ms", _int(-1), None, "Age after which segments are deleted; -1: forever."),
    BrokerProperty("log.retention.minutes", _int(-1), None, "log.retention.ms in minutes."),
    BrokerProperty("log.retention.hours", _int(-1), "168", "log.retention.ms in hours."),
    BrokerProperty(
        "log.retention.bytes",
        _int(-1),
        "-1",
        "Size per partition above which the oldest segments are deleted.",
    ),
    BrokerProperty("log.retention.check.interval.ms", _int(1), "300000", "How often retention runs."),
    BrokerProperty(
        "log.flush.interval.messages",
        _int(1),
        str(2**63 - 1),
        "Records appended before a partition is fsynced.",
    ),
    BrokerProperty(
        "log.flush.interval.ms",
        _int(0),
        None,
        "Time after which unflushed records are fsynced (default: never).",
    ),
    BrokerProperty(
        "log.flush.scheduler.interval.ms", _int(1), "1000", "How often the flush.ms policy is checked."
    ),
    BrokerProperty(
        "log.flush.offset.checkpoint.interval.ms",
        _int(1),
        "60000",
        "How often recovery points are checkpointed.",
    ),
    BrokerProperty("log.cleanup.policy", _str, "delete", "delete, compact or compact,delete."),
    BrokerProperty("log.cleaner.enable", _bool, "true", "Run compaction for compacted topics."),
    BrokerProperty("log.cleaner.backoff.ms", _int(0), "15000", "Pause between compaction passes."),
    BrokerProperty("log.cleaner.delete.retention.ms", _int(0), "86400000", "How long tombstones are kept."),
    BrokerProperty(
        "log.cleaner.min.cleanable.ratio", _str, "0.5", "Dirty ratio at which a log is compacted."
    ),
    BrokerProperty(
        "log.cleaner.min.compaction.lag.ms", _int(0), "0", "Minimum age of records before compaction."
    ),
    BrokerProperty("log.index.interval.bytes", _int(0), "4096", "Bytes between offset index entries."),
    BrokerProperty("log.index.size.max.bytes", _int(4), "10485760", "Maximum index size per segment."),
    BrokerProperty("log.message.timestamp.type", _str, "CreateTime", "CreateTime or LogAppendTime."),
    BrokerProperty(
        "log.segment.delete.delay.ms", _int(0), "60000", "Delay before a deleted segment's files go."
    ),
    BrokerProperty("log.preallocate", _bool, "false", "Preallocate segment files."),
    BrokerProperty("offsets.topic.num.partitions", _int(1), "50", "Partitions of __consumer_offsets."),
    BrokerProperty(
        "offsets.retention.minutes", _int(1), "10080", "How long committed offsets of empty groups are kept."
    ),
    BrokerProperty(
        "group.initial.rebalance.delay.ms", _int(0), "3000", "Delay of a new group's first rebalance."
    ),
    BrokerProperty(
        "group.min.session.timeout.ms", _int(1), "6000", "Smallest session timeout a member may use."
    ),
    BrokerProperty(
        "group.max.session.timeout.ms", _int(1), "1800000", "Largest session timeout a member may use."
    ),
    BrokerProperty("group.max.size", _int(1), "2147483647", "Most members a group may have."),
    BrokerProperty("offset.metadata.max.bytes", _int(0), "4096", "Largest metadata of a committed offset."),
    BrokerProperty(
        "offsets.topic.replication.factor", _int(1), "1", "Replication factor of __consumer_offsets."
    ),
    BrokerProperty(
        "offsets.retention.check.interval.ms", _int(1), "600000", "How often expired offsets are removed."
    ),
    BrokerProperty(
        "producer.id.expiration.ms",
        _int(1),
        "86400000",
        "How long a partition remembers an idempotent producer after its last batch's timestamp.",
    ),
    BrokerProperty(
        "producer.id.expiration.check.interval.ms",
        _int(1),
        "600000",
        "How often partitions forget expired idempotent producers.",
    ),
    BrokerProperty(
        "max.decompressed.batch.bytes",
        _int(1),
        "268435456",
        "kctl: largest decompressed batch the broker will read (compaction).",
    ),
]
BROKER_PROPERTIES: dict[str, BrokerProperty] = {prop.name: prop for prop in _PROPERTIES}

#: broker property -> topic config it sets the default of (Kafka's synonyms)
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
}


class BrokerConfig:
    """Parsed broker properties. ``values`` holds every known property (defaults filled in),
    ``explicit`` the names that were set, ``ignored`` the unknown names that were given."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        given = {str(k): str(v) for k, v in (properties or {}).items()}
        self.explicit = {name for name in given if name in BROKER_PROPERTIES}
        self.ignored = sorted(name for name in given if name not in BROKER_PROPERTIES)
        self.raw: dict[str, str | None] = {name: prop.default for name, prop in BROKER_PROPERTIES.items()}
        self.raw.update({name: value for name, value in given.items() if name in BROKER_PROPERTIES})
        self.values: dict[str, Any] = {}
        for name, prop in BROKER_PROPERTIES.items():
            raw = self.raw[name]
            self.values[name] = None if raw is None or raw.strip() == "" else prop.parse(name, raw)
        self._derive()

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
        if v["log.retention.ms"] is None:
            if v["log.retention.minutes"] is not None:
                v["log.retention.ms"] = v["log.retention.minutes"] * 60_000
            else:
                v["log.retention.ms"] = (
                    v["log.retention.hours"] * HOUR_MS if v["log.retention.hours"] >= 0 else -1
                )
        if v["log.roll.ms"] is None:
            v["log.roll.ms"] = v["log.roll.hours"] * HOUR_MS
        if v["log.flush.interval.ms"] is None:
            v["log.flush.interval.ms"] = 2**63 - 1
        if v["zookeeper.connection.timeout.ms"] is None:
            v["zookeeper.connection.timeout.ms"] = v["zookeeper.session.timeout.ms"]
        try:
            self.log_config = self.default_log_config()
        except ValueError as error:
            raise BrokerConfigError(str(error)) from None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def default_log_config(self) -> LogConfig:
        """Topic-level defaults from the ``log.*`` broker properties."""
        overrides = {topic: str(self.values[broker]) for broker, topic in TOPIC_CONFIG_SYNONYMS.items()}
        return LogConfig().with_overrides(overrides)

    def topic_config_source(self, topic_key: str) -> tuple[str, str] | None:
        """(broker property, value) that sets the default of ``topic_key``, if set explicitly."""
        for broker, topic in TOPIC_CONFIG_SYNONYMS.items():
            if topic == topic_key and broker in self.explicit:
                return broker, str(self.values[broker])
        return None

    def validate_topic_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig for a topic with ``overrides``; raises ValueError for unknown or bad values."""
        parse_topic_config(overrides)
        return self.log_config.with_overrides(overrides)
