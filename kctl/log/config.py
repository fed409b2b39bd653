"""Per-log (topic-level) configuration, under Kafka's topic config names, with defaults and parsing.

The broker maps its ``log.*`` properties onto these as defaults; topics override them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

UNLIMITED = -1
LONG_MAX = 2**63 - 1

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


class InvalidConfigError(ValueError):
    """A configuration value that cannot be parsed or is out of range."""


def _parse_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError as error:
        raise InvalidConfigError(f"{name}: {raw!r} is not an integer") from error
    if value < minimum:
        raise InvalidConfigError(f"{name}: {value} is below the minimum {minimum}")
    return value


def _parse_ratio(name: str, raw: str) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError as error:
        raise InvalidConfigError(f"{name}: {raw!r} is not a number") from error
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(f"{name}: {value} is not between 0 and 1")
    return value


def _parse_cleanup_policy(name: str, raw: str) -> frozenset[str]:
    policies = frozenset(part.strip() for part in str(raw).split(",") if part.strip())
    unknown = policies - {CLEANUP_DELETE, CLEANUP_COMPACT}
    if not policies or unknown:
        raise InvalidConfigError(f"{name}: {raw!r} must be 'delete', 'compact' or 'compact,delete'")
    return policies


def _parse_timestamp_type(name: str, raw: str) -> str:
    value = str(raw).strip()
    if value not in (CREATE_TIME, LOG_APPEND_TIME):
        raise InvalidConfigError(f"{name}: {value!r} must be {CREATE_TIME} or {LOG_APPEND_TIME}")
    return value


def _parse_bool(name: str, raw: str) -> bool:
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise InvalidConfigError(f"{name}: {raw!r} must be true or false")
    return value == "true"


@dataclass(frozen=True)
class LogConfig:
    """Topic-level log settings. ``UNLIMITED`` (-1) disables a size/time limit."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = UNLIMITED
    cleanup_policy: frozenset[str] = field(default_factory=lambda: frozenset({CLEANUP_DELETE}))
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = CREATE_TIME
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False

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
        result = {}
        for name, (attribute, _parser) in TOPIC_CONFIGS.items():
            value = getattr(self, attribute)
            if isinstance(value, frozenset):
                value = ",".join(sorted(value))
            elif isinstance(value, bool):
                value = "true" if value else "false"
            result[name] = str(value)
        return result


_Parser = Callable[[str, str], Any]

#: Kafka topic config name -> (LogConfig attribute, parser)
TOPIC_CONFIGS: dict[str, tuple[str, _Parser]] = {
    "segment.bytes": ("segment_bytes", lambda n, v: _parse_int(n, v, 14)),
    "segment.ms": ("segment_ms", lambda n, v: _parse_int(n, v, 1)),
    "segment.index.bytes": ("segment_index_bytes", lambda n, v: _parse_int(n, v, 4)),
    "index.interval.bytes": ("index_interval_bytes", lambda n, v: _parse_int(n, v, 0)),
    "flush.messages": ("flush_messages", lambda n, v: _parse_int(n, v, 1)),
    "flush.ms": ("flush_ms", lambda n, v: _parse_int(n, v, 0)),
    "retention.ms": ("retention_ms", lambda n, v: _parse_int(n, v, UNLIMITED)),
    "retention.bytes": ("retention_bytes", lambda n, v: _parse_int(n, v, UNLIMITED)),
    "cleanup.policy": ("cleanup_policy", _parse_cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", lambda n, v: _parse_int(n, v, 0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", lambda n, v: _parse_int(n, v, 0)),
    "max.message.bytes": ("max_message_bytes", lambda n, v: _parse_int(n, v, 0)),
    "message.timestamp.type": ("message_timestamp_type", _parse_timestamp_type),
    "file.delete.delay.ms": ("file_delete_delay_ms", lambda n, v: _parse_int(n, v, 0)),
    "preallocate": ("preallocate", _parse_bool),
}

assert {attribute for attribute, _ in TOPIC_CONFIGS.values()} == {f.name for f in fields(LogConfig)}


def parse_topic_config(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Parse Kafka-named topic configs into LogConfig attribute values; unknown names are an error."""
    result: dict[str, Any] = {}
    for name, raw in properties.items():
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        attribute, parser = TOPIC_CONFIGS[name]
        text = ",".join(sorted(raw)) if isinstance(raw, set | frozenset) else str(raw)
        result[attribute] = parser(name, text)
    return result
