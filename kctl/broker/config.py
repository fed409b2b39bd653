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

from kctl.broker.config_transactions import TRANSACTION_CONFIGS
from kctl.broker.metrics.listener import MetricsListener
from kctl.broker.security.config import (
    DYNAMIC_SECURITY_CONFIGS,
    SECURITY_CONFIGS,
    is_dynamic_listener_config,
)
from kctl.common.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Dynamic,
    Importance,
    OneOf,
    ParsedConfig,
    Range,
    Synonym,
    Validator,
    format_value,
)
from kctl.common.config_def import ConfigType as T
from kctl.log.config import COMPRESSION_TYPES, TOPIC_CONFIGS, LogConfig, parse_topic_config

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
    """A broker property; its dynamic update mode is Kafka's (``PER_BROKER_CONFIGS``,
    ``CLUSTER_WIDE_CONFIGS``; read-only otherwise)."""
    if name in PER_BROKER_CONFIGS:
        dynamic = Dynamic.PER_BROKER
    elif name in CLUSTER_WIDE_CONFIGS:
        dynamic = Dynamic.CLUSTER_WIDE
    else:
        dynamic = Dynamic.READ_ONLY
    return ConfigKey(name, config_type, default, validator, doc, importance, dynamic, synonyms)


#: Broker configs Kafka lets AlterConfigs change for one broker only (resource name = its id).
PER_BROKER_CONFIGS = frozenset({"listeners", "advertised.listeners"}) | DYNAMIC_SECURITY_CONFIGS

#: Broker configs Kafka lets AlterConfigs change cluster-wide (resource name "") or per broker: the
#: log defaults (the topic configs' broker synonyms), the cleaner's, the replication throttle rates.
CLUSTER_WIDE_CONFIGS = frozenset(
    {
        "message.max.bytes",
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.roll.jitter.ms",
        "log.roll.jitter.hours",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.downconversion.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "producer.id.expiration.ms",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


_HIGH = Importance.HIGH
_LOW = Importance.LOW

#: The network's resource limits (kctl.broker.connection_limits; Kafka's names and defaults, except
#: queued.max.request.bytes: Kafka's -1 is unbounded, kctl's default bounds it)
NETWORK_LIMIT_CONFIGS = [
    _broker(
        "queued.max.request.bytes",
        T.LONG,
        536870912,
        None,
        "Bytes of requests received but not yet handled, all connections together; reading pauses "
        "above it (-1: no bound). kctl's default is 512 MiB (Kafka's: -1).",
    ),
    _broker(
        "connections.max.idle.ms",
        T.LONG,
        600000,
        None,
        "Close a connection that sent and received nothing for this long (-1: never).",
    ),
    _broker("max.connections", T.INT, 2147483647, Range(0), "Connections accepted, all listeners together."),
    _broker("max.connections.per.ip", T.INT, 2147483647, Range(0), "Connections accepted from one address."),
    _broker(
        "fetch.wait.max.ms",
        T.INT,
        60000,
        Range(0),
        "kctl: the longest a Fetch is parked waiting for min_bytes (a longer max_wait_ms is capped).",
    ),
]

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
            "metrics.listener",
            T.STRING,
            "",
            MetricsListener(),
            "kctl: serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one); empty: off.",
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
        *NETWORK_LIMIT_CONFIGS,
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
        _broker(
            "log.cleaner.threads",
            T.INT,
            1,
            Range(0),
            "Threads compacting logs (kctl compacts with one task whatever the value).",
        ),
        _broker(
            "log.cleaner.max.compaction.lag.ms",
            T.LONG,
            LONG_MAX,
            Range(1),
            "Longest time a record stays ineligible for compaction (kctl: no effect).",
        ),
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
            "log.segment.delete.delay.ms",
            T.LONG,
            60000,
            Range(0),
            "Delay before a deleted segment's files go.",
        ),
        _broker("log.preallocate", T.BOOLEAN, False, None, "Preallocate segment files."),
        _broker(
            "log.roll.jitter.ms",
            T.LONG,
            None,
            Range(0),
            "Largest random jitter subtracted from the roll time (kctl: no effect).",
            Synonym("log.roll.jitter.hours", HOUR_MS),
        ),
        _broker("log.roll.jitter.hours", T.INT, 0, Range(0), "log.roll.jitter.ms in hours."),
        _broker(
            "compression.type",
            T.STRING,
            "producer",
            OneOf(COMPRESSION_TYPES),
            "Default codec of topics' batches ('producer': the producer's; else the broker re-compresses).",
            importance=_HIGH,
        ),
        _broker("compression.gzip.level", T.INT, -1, Range(-1, 9), "gzip level of re-compressed batches."),
        _broker("compression.lz4.level", T.INT, 9, Range(1, 17), "lz4 level of re-compressed batches."),
        _broker(
            "compression.zstd.level", T.INT, 3, Range(-131072, 22), "zstd level of re-compressed batches."
        ),
        _broker(
            "log.message.timestamp.before.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Default of message.timestamp.before.max.ms.",
        ),
        _broker(
            "log.message.timestamp.after.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Default of message.timestamp.after.max.ms.",
        ),
        _broker(
            "log.message.timestamp.difference.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Deprecated default of message.timestamp.difference.max.ms.",
        ),
        _broker(
            "log.message.downconversion.enable",
            T.BOOLEAN,
            True,
            None,
            "Default of message.downconversion.enable (kctl: no effect).",
        ),
        _broker(
            "log.message.format.version",
            T.STRING,
            "3.0-IV1",
            None,
            "Deprecated default of message.format.version (kctl: no effect).",
        ),
        _broker(
            "log.local.retention.ms",
            T.LONG,
            -2,
            Range(-2),
            "Tiered storage local retention (kctl: no effect).",
        ),
        _broker(
            "log.local.retention.bytes",
            T.LONG,
            -2,
            Range(-2),
            "Tiered storage local retention size (kctl: no effect).",
        ),
        _broker(
            "leader.replication.throttled.rate",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Bytes/s this broker sends to followers of the replicas listed in their topics' "
            "leader.replication.throttled.replicas.",
        ),
        _broker(
            "follower.replication.throttled.rate",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Bytes/s this broker fetches, as a follower, for the replicas listed in their topics' "
            "follower.replication.throttled.replicas.",
        ),
        _broker(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Bytes/s a move between this broker's log dirs may copy (AlterReplicaLogDirs). kctl: accepted, "
            "stored and described (Kafka's tools set and clear it around a reassignment); moves are not "
            "throttled.",
        ),
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
        _broker(
            "quota.window.num",
            T.INT,
            11,
            Range(1),
            "The number of samples client quotas measure byte rates over.",
            importance=_LOW,
        ),
        _broker(
            "quota.window.size.seconds",
            T.INT,
            1,
            Range(1),
            "The time span of each sample of the client quotas' byte rates.",
            importance=_LOW,
        ),
        *SECURITY_CONFIGS,
        *TRANSACTION_CONFIGS,
    ],
    BrokerConfigError,
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


class BrokerConfig:
    """Parsed broker properties. ``values`` holds every known property (defaults filled in),
    ``explicit`` the names that were set, ``ignored`` the unknown names that were given."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        given = {str(k): str(v) for k, v in (properties or {}).items()}
        parsed = self._load(given)
        self.explicit = set(parsed.given)
        # listener.name.<listener>.<property>: Kafka's per-listener overrides (kctl.broker.security)
        self.ignored = [name for name in parsed.unknown if not name.startswith("listener.name.")]
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
