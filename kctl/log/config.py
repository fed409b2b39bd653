"""Per-log (topic-level) configuration, under Kafka's topic config names: the definition table
``TOPIC_CONFIGS`` (types, defaults, validators, docs, and the broker properties that set each
default) and the parsed :class:`LogConfig`.

The broker maps its ``log.*`` properties onto these as defaults; topics override them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from kctl.common.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Custom,
    Dynamic,
    Importance,
    OneOf,
    Range,
    Synonym,
    format_value,
)
from kctl.common.config_def import (
    ConfigType as T,
)

UNLIMITED = -1

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
DAY_MS = 24 * 60 * 60 * 1000


class InvalidConfigError(ConfigError):
    """A topic configuration value that cannot be parsed or is out of range."""


def _cleanup_policy(value: list[str]) -> frozenset[str]:
    policies = frozenset(value)
    if not policies or policies - {CLEANUP_DELETE, CLEANUP_COMPACT}:
        raise ValueError(f"{','.join(value)!r} must be 'delete', 'compact' or 'compact,delete'")
    return policies


def _topic(
    name: str,
    config_type: T,
    default: Any,
    validator: Any,
    doc: str,
    *synonyms: Synonym,
    importance: Importance = Importance.MEDIUM,
    attribute: str = "",
    applied: bool = True,
) -> ConfigKey:
    if not applied:
        doc = f"{doc} {NO_EFFECT}"
    return ConfigKey(
        name,
        config_type,
        default,
        validator,
        doc,
        importance,
        Dynamic.PER_TOPIC,
        synonyms,
        attribute,
        applied=applied,
    )


#: The note ending the documentation of a topic config kctl accepts, stores and describes but does
#: not act on (``ConfigKey.applied`` false).
NO_EFFECT = "(Accepted, stored and described for compatibility; no effect in kctl.)"

#: ``compression.type``: the producer's codec, or one the broker re-compresses batches with.
COMPRESSION_PRODUCER = "producer"
COMPRESSION_TYPES = (COMPRESSION_PRODUCER, "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _gzip_level(value: int) -> int:
    if value != -1 and not 1 <= value <= 9:
        raise ValueError(f"must be -1 (the codec's default) or in [1,...,9], got {value}")
    return value


_THROTTLED_ENTRY = re.compile(r"^\d+:\d+$")


def _throttled_replicas(value: list[str]) -> tuple[str, ...]:
    """Kafka's ``ThrottledReplicaListValidator``: ``*``, or ``partition:broker`` entries."""
    if value == ["*"]:
        return tuple(value)
    for item in value:
        if not _THROTTLED_ENTRY.match(item):
            raise ValueError(
                "must be '*' or a comma-separated list of partition:broker_id entries "
                f"(e.g. 0:101,0:102), got {item!r}"
            )
    return tuple(value)


#: Kafka's MetadataVersion.fromVersionString reads only the first three segments of a 0.x version
#: and the first two of a later one, so release numbers such as 0.10.0.0 or 2.8.1 are valid
_MESSAGE_FORMAT = re.compile(r"^\d+\.\d+(\.\d+)*(-IV\d+)?$")


def _message_format_version(value: str) -> str:
    if not _MESSAGE_FORMAT.match(value):
        raise ValueError(f"expected a Kafka version such as 3.0-IV1 or 2.8, got {value!r}")
    return value


#: Kafka's topic configs; each key's first synonym is the broker property that sets its default.
TOPIC_CONFIGS = ConfigDef(
    "topic",
    [
        _topic(
            "segment.bytes",
            T.INT,
            1024 * 1024 * 1024,
            Range(14),
            "Segment size at which a new segment is rolled.",
            Synonym("log.segment.bytes"),
        ),
        _topic(
            "segment.ms",
            T.LONG,
            7 * DAY_MS,
            Range(1),
            "Segment age at which a new segment is rolled.",
            Synonym("log.roll.ms"),
            Synonym("log.roll.hours", 3_600_000),
        ),
        _topic(
            "segment.index.bytes",
            T.INT,
            10 * 1024 * 1024,
            Range(4),
            "Maximum offset index size per segment.",
            Synonym("log.index.size.max.bytes"),
        ),
        _topic(
            "index.interval.bytes",
            T.INT,
            4096,
            Range(0),
            "Bytes between offset index entries.",
            Synonym("log.index.interval.bytes"),
        ),
        _topic(
            "flush.messages",
            T.LONG,
            LONG_MAX,
            Range(1),
            "Records appended before a partition is fsynced.",
            Synonym("log.flush.interval.messages"),
        ),
        _topic(
            "flush.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Time after which unflushed records are fsynced.",
            Synonym("log.flush.interval.ms"),
        ),
        _topic(
            "retention.ms",
            T.LONG,
            7 * DAY_MS,
            Range(UNLIMITED),
            "Age after which whole segments are deleted (-1: forever).",
            Synonym("log.retention.ms"),
            Synonym("log.retention.minutes", 60_000),
            Synonym("log.retention.hours", 3_600_000),
            importance=Importance.HIGH,
        ),
        _topic(
            "retention.bytes",
            T.LONG,
            UNLIMITED,
            Range(UNLIMITED),
            "Partition size above which the oldest segments are deleted (-1: no limit).",
            Synonym("log.retention.bytes"),
        ),
        _topic(
            "cleanup.policy",
            T.LIST,
            CLEANUP_DELETE,
            Custom(_cleanup_policy, "delete, compact, or both"),
            "delete, compact, or both.",
            Synonym("log.cleanup.policy"),
            importance=Importance.HIGH,
        ),
        _topic(
            "delete.retention.ms",
            T.LONG,
            DAY_MS,
            Range(0),
            "How long tombstones are kept in compacted topics.",
            Synonym("log.cleaner.delete.retention.ms"),
        ),
        _topic(
            "min.cleanable.dirty.ratio",
            T.DOUBLE,
            0.5,
            Range(0, 1),
            "Dirty ratio at which a log is compacted.",
            Synonym("log.cleaner.min.cleanable.ratio"),
        ),
        _topic(
            "min.compaction.lag.ms",
            T.LONG,
            0,
            Range(0),
            "Minimum age of records before compaction.",
            Synonym("log.cleaner.min.compaction.lag.ms"),
        ),
        _topic(
            "max.message.bytes",
            T.INT,
            1024 * 1024 + 12,
            Range(0),
            "Largest record batch accepted.",
            Synonym("message.max.bytes"),
        ),
        _topic(
            "message.timestamp.type",
            T.STRING,
            CREATE_TIME,
            OneOf((CREATE_TIME, LOG_APPEND_TIME)),
            "CreateTime or LogAppendTime.",
            Synonym("log.message.timestamp.type"),
        ),
        _topic(
            "message.timestamp.before.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "How far in the past a CreateTime record timestamp may be (INVALID_TIMESTAMP beyond).",
            Synonym("log.message.timestamp.before.max.ms"),
        ),
        _topic(
            "message.timestamp.after.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "How far in the future a CreateTime record timestamp may be (INVALID_TIMESTAMP beyond).",
            Synonym("log.message.timestamp.after.max.ms"),
        ),
        _topic(
            "file.delete.delay.ms",
            T.LONG,
            60_000,
            Range(0),
            "Delay before a deleted segment's files are removed.",
            Synonym("log.segment.delete.delay.ms"),
        ),
        _topic(
            "min.insync.replicas",
            T.INT,
            1,
            Range(1),
            "Fewest in-sync replicas for an acks=all produce.",
            Synonym("min.insync.replicas"),
        ),
        _topic(
            "preallocate",
            T.BOOLEAN,
            False,
            None,
            "Preallocate segment files.",
            Synonym("log.preallocate"),
        ),
        _topic(
            "compression.type",
            T.STRING,
            COMPRESSION_PRODUCER,
            OneOf(COMPRESSION_TYPES),
            "The codec of the topic's batches: 'producer' keeps the producer's codec; 'uncompressed', "
            "'gzip', 'snappy', 'lz4' or 'zstd' make the broker re-compress batches written with another.",
            Synonym("compression.type"),
            importance=Importance.HIGH,
        ),
        _topic(
            "compression.gzip.level",
            T.INT,
            -1,
            Custom(_gzip_level, "[1,...,9] or -1"),
            "Compression level of batches the broker re-compresses with gzip (-1: the codec's default).",
            Synonym("compression.gzip.level"),
        ),
        _topic(
            "compression.lz4.level",
            T.INT,
            9,
            Range(1, 17),
            "Compression level of batches the broker re-compresses with lz4.",
            Synonym("compression.lz4.level"),
        ),
        _topic(
            "compression.zstd.level",
            T.INT,
            3,
            Range(-131072, 22),
            "Compression level of batches the broker re-compresses with zstd.",
            Synonym("compression.zstd.level"),
        ),
        _topic(
            "unclean.leader.election.enable",
            T.BOOLEAN,
            False,
            None,
            "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
            Synonym("unclean.leader.election.enable"),
        ),
        _topic(
            "leader.replication.throttled.replicas",
            T.LIST,
            "",
            Custom(_throttled_replicas, "[partition]:[broker],... or *"),
            "Replicas whose replication the leader throttles (leader.replication.throttled.rate): "
            "partition:broker_id entries, or * for all.",
        ),
        _topic(
            "follower.replication.throttled.replicas",
            T.LIST,
            "",
            Custom(_throttled_replicas, "[partition]:[broker],... or *"),
            "Replicas whose fetching from the leader is throttled (follower.replication.throttled.rate): "
            "partition:broker_id entries, or * for all.",
        ),
        _topic(
            "max.compaction.lag.ms",
            T.LONG,
            LONG_MAX,
            Range(1),
            "Longest time a record stays ineligible for compaction.",
            Synonym("log.cleaner.max.compaction.lag.ms"),
            applied=False,
        ),
        _topic(
            "message.timestamp.difference.max.ms",
            T.LONG,
            LONG_MAX,
            Range(0),
            "Deprecated (message.timestamp.before.max.ms / after.max.ms).",
            Synonym("log.message.timestamp.difference.max.ms"),
            applied=False,
        ),
        _topic(
            "segment.jitter.ms",
            T.LONG,
            0,
            Range(0),
            "Largest random jitter subtracted from segment.ms.",
            Synonym("log.roll.jitter.ms"),
            Synonym("log.roll.jitter.hours", 3_600_000),
            applied=False,
        ),
        _topic(
            "message.downconversion.enable",
            T.BOOLEAN,
            True,
            None,
            "Down-convert batches for Fetch v0-3 (consumers older than Kafka 0.11: magic 0/1 message "
            "sets); false answers them UNSUPPORTED_VERSION.",
            Synonym("log.message.downconversion.enable"),
        ),
        _topic(
            "message.format.version",
            T.STRING,
            "3.0-IV1",
            Custom(_message_format_version, "a Kafka version, e.g. 3.0-IV1"),
            "Deprecated: the message format version (kctl writes magic 2).",
            Synonym("log.message.format.version"),
            applied=False,
        ),
        _topic(
            "local.retention.ms",
            T.LONG,
            -2,
            Range(-2),
            "Tiered storage: local retention (-2: retention.ms).",
            Synonym("log.local.retention.ms"),
            applied=False,
        ),
        _topic(
            "local.retention.bytes",
            T.LONG,
            -2,
            Range(-2),
            "Tiered storage: local retention size (-2: retention.bytes).",
            Synonym("log.local.retention.bytes"),
            applied=False,
        ),
        _topic(
            "remote.storage.enable",
            T.BOOLEAN,
            False,
            None,
            "Tiered storage for this topic.",
            applied=False,
        ),
        _topic(
            "remote.log.copy.disable",
            T.BOOLEAN,
            False,
            None,
            "Tiered storage: stop copying segments to remote storage.",
            applied=False,
        ),
        _topic(
            "remote.log.delete.on.disable",
            T.BOOLEAN,
            False,
            None,
            "Tiered storage: delete remote data when tiered storage is disabled.",
            applied=False,
        ),
    ],
    InvalidConfigError,
)

_default = TOPIC_CONFIGS.default_of


@dataclass(frozen=True)
class LogConfig:
    """Topic-level log settings. ``UNLIMITED`` (-1) disables a size/time limit. Defaults come from
    ``TOPIC_CONFIGS``; each field is a topic config (``segment_bytes`` is ``segment.bytes``)."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    cleanup_policy: frozenset[str] = _default("cleanup.policy")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    min_insync_replicas: int = _default("min.insync.replicas")
    preallocate: bool = _default("preallocate")
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    leader_replication_throttled_replicas: tuple[str, ...] = _default(
        "leader.replication.throttled.replicas"
    )
    follower_replication_throttled_replicas: tuple[str, ...] = _default(
        "follower.replication.throttled.replicas"
    )
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    message_format_version: str = _default("message.format.version")
    local_retention_ms: int = _default("local.retention.ms")
    local_retention_bytes: int = _default("local.retention.bytes")
    remote_storage_enable: bool = _default("remote.storage.enable")
    remote_log_copy_disable: bool = _default("remote.log.copy.disable")
    remote_log_delete_on_disable: bool = _default("remote.log.delete.on.disable")

    @property
    def compact(self) -> bool:
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """A copy with Kafka-named overrides (e.g. ``{"retention.ms": "1000"}``) applied."""
        return replace(self, **parse_topic_config(overrides))

    def to_properties(self) -> dict[str, str]:
        """All settings under their Kafka topic config names, as strings."""
        return {name: format_value(getattr(self, key.attribute)) or "" for name, key in TOPIC_CONFIGS.items()}


assert {key.attribute for key in TOPIC_CONFIGS.values()} == {f.name for f in fields(LogConfig)}


def parse_topic_config(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Parse Kafka-named topic configs into LogConfig attribute values; unknown names are an error."""
    result: dict[str, Any] = {}
    for name, raw in properties.items():
        value = TOPIC_CONFIGS.parse_value(name, raw)  # an unknown name raises first
        result[TOPIC_CONFIGS[name].attribute] = value
    return result
