"""The consumer's configuration: ``ConsumerConfig`` (Kafka's consumer property names, on top of every
``ClientConfig`` property) and ``coerce_consumer_config``, which makes one from what callers pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kctl.client.config import ClientConfig, ClientConfigError
from kctl.client.consumer.fetcher import READ_COMMITTED, READ_UNCOMMITTED

__all__ = ["ConsumerConfig", "coerce_consumer_config"]

_RESET_ALIASES = {
    "earliest": "earliest",
    "smallest": "earliest",
    "beginning": "earliest",
    "latest": "latest",
    "largest": "latest",
    "end": "latest",
    "none": "none",
    "error": "none",
}
_ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def _parse_int(minimum: int) -> Callable[[str, str], int]:
    def parse(key: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ClientConfigError(f"{key}: expected an integer, got {text!r}") from None
        if value < minimum:
            raise ClientConfigError(f"{key}: must be at least {minimum}, got {value}")
        return value

    return parse


def _parse_bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ClientConfigError(f"{key}: expected true or false, got {text!r}")


def _parse_reset(key: str, text: str) -> str:
    value = _RESET_ALIASES.get(text.strip().lower())
    if value is None:
        raise ClientConfigError(f"{key}: expected earliest, latest or none, got {text!r}")
    return value


def _parse_isolation(key: str, text: str) -> str:
    value = text.strip().lower()
    if value not in _ISOLATION:
        raise ClientConfigError(f"{key}: expected read_uncommitted or read_committed, got {text!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ConsumerConfig(ClientConfig):
    """Consumer settings under Kafka's consumer property names; defaults are Kafka's."""

    fetch_min_bytes: int = 1
    """The broker answers a fetch once this much data is there (or ``fetch_max_wait_ms`` passed)."""
    fetch_max_wait_ms: int = 500
    """The longest a broker holds a fetch waiting for ``fetch_min_bytes``."""
    fetch_max_bytes: int = 52_428_800
    """The most data one fetch response may carry (a larger first batch still comes back whole)."""
    max_partition_fetch_bytes: int = 1_048_576
    """The most data per partition in one fetch response."""
    max_poll_records: int = 500
    """The most records one ``poll`` returns."""
    auto_offset_reset: str = "latest"
    """Where a partition without a valid position starts: earliest, latest, or none (an error)."""
    check_crcs: bool = True
    """Verify each fetched batch's CRC-32C."""
    isolation_level: str = "read_uncommitted"
    """Sent with each fetch; the kctl broker has no transactions, so both levels read the same."""

    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = {
        **ClientConfig.PROPERTIES,
        "fetch.min.bytes": ("fetch_min_bytes", _parse_int(0)),
        "fetch.max.wait.ms": ("fetch_max_wait_ms", _parse_int(0)),
        "fetch.max.bytes": ("fetch_max_bytes", _parse_int(1)),
        "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _parse_int(1)),
        "max.poll.records": ("max_poll_records", _parse_int(1)),
        "auto.offset.reset": ("auto_offset_reset", _parse_reset),
        "check.crcs": ("check_crcs", _parse_bool),
        "isolation.level": ("isolation_level", _parse_isolation),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        reset = _RESET_ALIASES.get(str(self.auto_offset_reset).lower())
        if reset is None:
            raise ClientConfigError(f"auto.offset.reset: expected earliest, latest or none, got {reset!r}")
        object.__setattr__(self, "auto_offset_reset", reset)
        if self.isolation_level not in _ISOLATION:
            raise ClientConfigError(
                f"isolation.level: expected read_uncommitted or read_committed, got {self.isolation_level!r}"
            )

    @property
    def fetch_max_wait(self) -> float:
        """``fetch.max.wait.ms`` in seconds."""
        return self.fetch_max_wait_ms / 1000.0


def coerce_consumer_config(
    config: ClientConfig | Mapping[str, str] | None, **overrides: Any
) -> ConsumerConfig:
    """A ``ConsumerConfig`` from a config object, Kafka properties, or None; ``overrides`` are Python
    field names and win. A plain ``ClientConfig`` keeps its shared settings."""
    if config is None:
        return ConsumerConfig(**overrides)
    if isinstance(config, ConsumerConfig):
        return dataclasses.replace(config, **overrides) if overrides else config
    if isinstance(config, ClientConfig):
        shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(ClientConfig)}
        return ConsumerConfig(**{**shared, **overrides})
    return ConsumerConfig.from_properties(config, **overrides)  # type: ignore[return-value]
