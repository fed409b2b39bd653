"""Broker configuration: the definition table ``BROKER_CONFIGS`` (Kafka's broker property names,
types, defaults, validators, docs), the parsed :class:`BrokerConfig`, and how the ``log.*``
properties become the default topic-level :class:`LogConfig` (each topic config's first synonym).

A real Kafka ``server.properties`` loads unchanged: properties kctl does not use are reported as
ignored, never an error."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.broker.security.config import SECURITY_CONFIGS
from kctl.common.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Dynamic,
    Importance,
    OneOf,
    Range,
    Synonym,
    Validator,
    format_value,
)
from kctl.common.config_def import ConfigType as T
from kctl.log.config import TOPIC_CONFIGS, LogConfig, parse_topic_config

HOUR_MS = 60 * 60 * 1000


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


def _broker(
    name: str,
    config_type: T,
    default: Any,
    validator: Validator | None,
    doc: str,
    *synonyms: Synonym,
    importance: Importance = Importance.MEDIUM,
) -> ConfigKey:
    """A broker property; all of kctl's are read-only (static: set in server.properties)."""
    return ConfigKey(name, config_type, default, validator, doc, importance, Dynamic.READ_ONLY, synonyms)


_HIGH = Importance.HIGH
_LOW = Importance.LOW

#: Every broker property kctl uses, in the order they are documented and described.
BROKER_CONFIGS = ConfigDef(
    "broker",
    [
        _broker("broker.id", T.INT, 0, Range(0), "This broker's id in the cluster.", importance=_HIGH),
        _broker(
            "listeners",
            T.STRING,
            "PLAINTEXT://127.0.0.1:9092",
            None,
            "Addresses to listen on: NAME://HOST:PORT, comma-separated.",
            importance=_HIGH,
        ),
        _broker(
            "advertised.listeners",
            T.STRING,
            None,
            None,
            "Addresses given to clients (default: listeners).",
            importance=_HIGH,
        ),
        _broker(
            "log.dirs",
            T.STRING,
            None,
            None,
            "Comma-separated data directories (default: log.dir).",
            importance=_HIGH,
        ),
        _broker("log.dir", T.STRING, "./data", None, "The data directory when log.dirs is not set."),
        _broker(
            "num.partitions",
            T.INT,
            1,
            Range(1),
            "Partitions of auto-created topics and of topics created without a count.",
        ),
        _broker(
            "default.replication.factor", T.INT, 1, Range(1), "Replication factor of auto-created topics."
        ),
        _broker(
            "auto.create.topics.enable",
            T.BOOLEAN,
            True,
            None,
            "Create a topic on first produce or metadata request.",
            importance=_HIGH,
        ),
        _broker("delete.topic.enable", T.BOOLEAN, True, None, "Allow DeleteTopics.", importance=_HIGH),
        _broker("broker.rack", T.STRING, None, None, "This broker's rack, for rack-aware replica placement."),
        _broker(
            "unclean.leader.election.enable",
            T.BOOLEAN,
            False,
            None,
            "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
            importance=_HIGH,
        ),
        _broker(
            "auto.leader.rebalance.enable",
            T.BOOLEAN,
            True,
            None,
            "The controller moves leadership back to preferred replicas when imbalanced.",
            importance=_HIGH,
        ),
        _broker(
            "leader.imbalance.check.interval.seconds",
            T.LONG,
            300,
            Range(1),
            "How often the controller checks the leader imbalance.",
        ),
        _broker(
            "leader.imbalance.per.broker.percentage",
            T.INT,
            10,
            Range(0),
            "Leader imbalance per broker (percent) above which the controller rebalances.",
        ),
        _broker(
            "controlled.shutdown.enable",
            T.BOOLEAN,
            True,
            None,
            "On SIGTERM, ask the controller to move leadership off this broker before stopping.",
        ),
        _broker(
            "controlled.shutdown.max.retries", T.INT, 3, Range(0), "Controlled shutdown attempts to make."
        ),
        _broker(
            "controlled.shutdown.retry.backoff.ms",
            T.LONG,
            5000,
            Range(0),
            "Wait between controlled shutdown attempts.",
        ),
        _broker(
            "message.max.bytes",
            T.INT,
            1048588,
            Range(0),
            "Largest record batch accepted (topic: max.message.bytes).",
            importance=_HIGH,
        ),
        _broker("socket.request.max.bytes", T.INT, 104857600, Range(1), "Largest request frame accepted."),
        _broker(
            "zookeeper.connect",
            T.STRING,
            None,
            None,
            "ZooKeeper connection string host:port[,host:port][/chroot]; empty: embedded.",
            importance=_HIGH,
        ),
        _broker("zookeeper.session.timeout.ms", T.INT, 18000, Range(1), "ZooKeeper session timeout."),
        _broker(
            "zookeeper.connection.timeout.ms",
            T.INT,
            None,
            Range(1),
            "ZooKeeper connection timeout (default: the session timeout).",
            Synonym("zookeeper.session.timeout.ms"),
        ),
        _broker(
            "log.segment.bytes",
            T.INT,
            1073741824,
            Range(14),
            "Segment size at which a new segment is rolled.",
            importance=_HIGH,
        ),
        _broker(
            "log.roll.ms",
            T.LONG,
            None,
            Range(1),
            "Segment age at which a new segment is rolled (default: log.roll.hours).",
            Synonym("log.roll.hours", HOUR_MS),
        ),
        _broker(
            "log.roll.hours", T.INT, 168, Range(1), "Segment age in hours at which a new segment is rolled."
        ),
        _broker(
            "log.retention.ms",
            T.LONG,
            None,
            Range(-1),
            "Age after which segments are deleted; -1: forever (default: log.retention.minutes, "
            "then log.retention.hours).",
            Synonym("log.retention.minutes", 60_000),
            Synonym("log.retention.hours", HOUR_MS),
            importance=_HIGH,
        ),
        _broker("log.retention.minutes", T.INT, None, Range(-1), "log.retention.ms in minutes."),
        _broker("log.retention.hours", T.INT, 168, Range(-1), "log.retention.ms in hours.", importance=_HIGH),
        _broker(
            "log.retention.bytes",
            T.LONG,
            -1,
            Range(-1),
            "Size per partition above which the oldest segments are deleted.",
            importance=_HIGH,
        ),
        _broker("log.retention.check.interval.ms", T.LONG, 300000, Range(1), "How often retention runs."),
        _broker(
            "log.flush.interval.messages",
            T.LONG,
            LONG_MAX,
            Range(1),
            "Records appended before a partition is fsynced.",
            importance=_HIGH,
        ),
        _broker(
            "log.flush.interval.ms",
            T.LONG,
            None,
            Range(0),
            "Time after which unflushed records are fsynced (default: never).",
            importance=_HIGH,
        ),
        _broker(
            "log.flush.scheduler.interval.ms",
            T.LONG,
            1000,
            Range(1),
            "How often the flush.ms policy is checked.",
        ),
        _broker(
            "log.flush.offset.checkpoint.interval.ms",
            T.INT,
            60000,
            Range(1),
            "How often recovery points are checkpointed.",
        ),
        _broker("log.cleanup.policy", T.LIST, "delete", None, "delete, compact or compact,delete."),
        _broker("log.cleaner.enable", T.BOOLEAN, True, None, "Run compaction for compacted topics."),
        _broker("log.cleaner.backoff.ms", T.LONG, 15000, Range(0), "Pause between compaction passes."),
        _broker(
            "log.cleaner.delete.retention.ms", T.LONG, 86400000, Range(0), "How long tombstones are kept."
        ),
        _broker(
            "log.cleaner.min.cleanable.ratio",
            T.DOUBLE,
            0.5,
            Range(0, 1),
            "Dirty ratio at which a log is compacted.",
        ),
        _broker(
            "log.cleaner.min.compaction.lag.ms",
            T.LONG,
            0,
            Range(0),
            "Minimum age of records before compaction.",
        ),
        _broker("log.index.interval.bytes", T.INT, 4096, Range(0), "Bytes between offset index entries."),
        _broker("log.index.size.max.bytes", T.INT, 10485760, Range(4), "Maximum index size per segment."),
        _broker(
            "log.message.timestamp.type",
            T.STRING,
            "CreateTime",
            OneOf(("CreateTime", "LogAppendTime")),
            "CreateTime or LogAppendTime.",
        ),
        _broker(
            "log.message.timestamp.before.max.ms",
            T.LONG,
            9223372036854775807,
            Range(0),
            "How far in the past a CreateTime record timestamp may be.",
        ),
        _broker(
            "log.message.timestamp.after.max.ms",
            T.LONG,
            9223372036854775807,
            Range(0),
            "How far in the future a CreateTime record timestamp may be.",
        ),
        _broker(
            "log.segment.delete.delay.ms",
            T.LONG,
            60000,
            Range(0),
            "Delay before a deleted segment's files go.",
        ),
        _broker("log.preallocate", T.BOOLEAN, False, None, "Preallocate segment files."),
        _broker("offsets.topic.num.partitions", T.INT, 50, Range(1), "Partitions of __consumer_offsets."),
        _broker(
            "offsets.retention.minutes",
            T.INT,
            10080,
            Range(1),
            "How long committed offsets of empty groups are kept.",
            importance=_HIGH,
        ),
        _broker(
            "group.initial.rebalance.delay.ms",
            T.INT,
            3000,
            Range(0),
            "Delay of a new group's first rebalance.",
        ),
        _broker(
            "group.min.session.timeout.ms",
            T.INT,
            6000,
            Range(1),
            "Smallest session timeout a member may use.",
        ),
        _broker(
            "group.max.session.timeout.ms",
            T.INT,
            1800000,
            Range(1),
            "Largest session timeout a member may use.",
        ),
        _broker("group.max.size", T.INT, 2147483647, Range(1), "Most members a group may have."),
        _broker(
            "offset.metadata.max.bytes", T.INT, 4096, Range(0), "Largest metadata of a committed offset."
        ),
        _broker(
            "offsets.topic.replication.factor",
            T.INT,
            3,
            Range(1),
            "Replication factor of __consumer_offsets (embedded mode: 1; a cluster refuses to create "
            "it, COORDINATOR_NOT_AVAILABLE, until that many brokers are up).",
            importance=_HIGH,
        ),
        _broker(
            "offsets.retention.check.interval.ms",
            T.LONG,
            600000,
            Range(1),
            "How often expired offsets are removed.",
        ),
        _broker(
            "producer.id.expiration.ms",
            T.INT,
            86400000,
            Range(1),
            "How long a partition remembers an idempotent producer after its last batch's timestamp.",
            importance=_LOW,
        ),
        _broker(
            "producer.id.expiration.check.interval.ms",
            T.INT,
            600000,
            Range(1),
            "How often partitions forget expired idempotent producers.",
            importance=_LOW,
        ),
        _broker(
            "min.insync.replicas",
            T.INT,
            1,
            Range(1),
            "Fewest in-sync replicas for an acks=all produce (topic: min.insync.replicas).",
            importance=_HIGH,
        ),
        _broker(
            "replica.lag.time.max.ms",
            T.LONG,
            30000,
            Range(1),
            "A follower not caught up to the leader's log end for this long leaves the ISR.",
            importance=_HIGH,
        ),
        _broker("replica.fetch.wait.max.ms", T.INT, 500, Range(0), "Longest wait of a follower's fetch."),
        _broker("replica.fetch.min.bytes", T.INT, 1, Range(1), "Bytes a follower's fetch waits for."),
        _broker(
            "replica.fetch.max.bytes", T.INT, 1048576, Range(0), "Bytes a follower fetches per partition."
        ),
        _broker(
            "replica.fetch.response.max.bytes",
            T.INT,
            10485760,
            Range(0),
            "Bytes a follower's whole fetch response may hold.",
        ),
        _broker(
            "replica.fetch.backoff.ms", T.INT, 1000, Range(0), "A follower's pause after a failed fetch."
        ),
        _broker(
            "inter.broker.listener.name",
            T.STRING,
            None,
            None,
            "Listener followers fetch from (default: the first advertised listener).",
        ),
        _broker(
            "replica.high.watermark.checkpoint.interval.ms",
            T.LONG,
            5000,
            Range(1),
            "How often high watermarks are written to replication-offset-checkpoint.",
        ),
        _broker(
            "max.decompressed.batch.bytes",
            T.INT,
            268435456,
            Range(1),
            "kctl: largest decompressed batch the broker will read (compaction).",
            importance=_LOW,
        ),
        *SECURITY_CONFIGS,
    ],
    BrokerConfigError,
)


class BrokerConfig:
    """Parsed broker properties. ``values`` holds every known property (defaults filled in),
    ``explicit`` the names that were set, ``ignored`` the unknown names that were given."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        given = {str(k): str(v) for k, v in (properties or {}).items()}
        parsed = BROKER_CONFIGS.parse(given)
        self.explicit = set(parsed.given)
        # listener.name.<listener>.<property>: Kafka's per-listener overrides (kctl.broker.security)
        self.ignored = [name for name in parsed.unknown if not name.startswith("listener.name.")]
        self.properties = given
        self.raw: dict[str, str | None] = {name: key.default_text() for name, key in BROKER_CONFIGS.items()}
        self.raw.update({name: given[name] for name in parsed.given})
        self.values: dict[str, Any] = dict(parsed.values)
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
