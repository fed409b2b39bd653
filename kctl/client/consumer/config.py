"""The consumer's configuration: ``CONSUMER_CONFIGS`` (the consumer's own keys, on top of every
``ClientConfig`` property, as a ``ConfigDef``) and ``ConsumerConfig``, the settings object made from it
(``ConsumerConfig.coerce`` makes one from what callers pass)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from kctl.client.config import CLIENT_CONFIGS, ClientConfig
from kctl.client.consumer.fetcher import READ_COMMITTED, READ_UNCOMMITTED
from kctl.common.config_def import ConfigDef, ConfigKey, Custom, Importance, OneOf, Range
from kctl.common.config_def import ConfigType as T

__all__ = ["CONSUMER_CONFIGS", "ISOLATION_LEVELS", "ConsumerConfig"]

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
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
"""``isolation.level`` -> the number a Fetch or ListOffsets request carries."""


def _offset_reset(value: str) -> str:
    reset = _RESET_ALIASES.get(str(value).strip().lower())
    if reset is None:
        raise ValueError(f"expected earliest, latest or none, got {value!r}")
    return reset


CONSUMER_CONFIGS = CLIENT_CONFIGS.extend(
    "consumer",
    [
        ConfigKey(
            "fetch.min.bytes",
            T.INT,
            1,
            Range(0),
            "The broker answers a fetch once this much data is there (or fetch.max.wait.ms passed).",
            Importance.HIGH,
        ),
        ConfigKey(
            "fetch.max.wait.ms",
            T.INT,
            500,
            Range(0),
            "The longest a broker holds a fetch waiting for fetch.min.bytes.",
            Importance.LOW,
        ),
        ConfigKey(
            "fetch.max.bytes",
            T.INT,
            52_428_800,
            Range(1),
            "The most data one fetch response may carry (a larger first batch still comes back whole).",
        ),
        ConfigKey(
            "max.partition.fetch.bytes",
            T.INT,
            1_048_576,
            Range(1),
            "The most data per partition in one fetch response.",
            Importance.HIGH,
        ),
        ConfigKey("max.poll.records", T.INT, 500, Range(1), "The most records one poll returns."),
        ConfigKey(
            "auto.offset.reset",
            T.STRING,
            "latest",
            Custom(_offset_reset, "earliest (smallest, beginning), latest (largest, end), none (error)"),
            "Where a partition without a valid position starts: earliest, latest, or none (an error).",
        ),
        ConfigKey(
            "check.crcs", T.BOOLEAN, True, None, "Verify each fetched batch's CRC-32C.", Importance.LOW
        ),
        ConfigKey(
            "isolation.level",
            T.STRING,
            "read_uncommitted",
            OneOf(tuple(ISOLATION_LEVELS), case_insensitive=True),
            "read_committed: read up to the last stable offset and never return the records of "
            "aborted transactions; read_uncommitted: every record up to the high watermark.",
        ),
        ConfigKey(
            "client.rack",
            T.STRING,
            None,
            None,
            "The rack of this client: sent with each fetch (Fetch v11+), so that a leader with a replica "
            "selector can name the replica in this rack to fetch from instead (KIP-392).",
            Importance.LOW,
        ),
    ],
)
_default = CONSUMER_CONFIGS.default_of


@dataclasses.dataclass(frozen=True)
class ConsumerConfig(ClientConfig):
    """Consumer settings under Kafka's consumer property names, documented in ``CONSUMER_CONFIGS``;
    defaults are Kafka's."""

    fetch_min_bytes: int = _default("fetch.min.bytes")
    fetch_max_wait_ms: int = _default("fetch.max.wait.ms")
    fetch_max_bytes: int = _default("fetch.max.bytes")
    max_partition_fetch_bytes: int = _default("max.partition.fetch.bytes")
    max_poll_records: int = _default("max.poll.records")
    auto_offset_reset: str = _default("auto.offset.reset")
    check_crcs: bool = _default("check.crcs")
    isolation_level: str = _default("isolation.level")
    client_rack: str | None = _default("client.rack")

    CONFIG_DEF: ClassVar[ConfigDef] = CONSUMER_CONFIGS
    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = (
        CONSUMER_CONFIGS.attribute_parsers()
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        # the Python names take Kafka's spellings too: auto_offset_reset="smallest"
        for name in ("auto.offset.reset", "isolation.level"):
            attribute = CONSUMER_CONFIGS[name].attribute
            object.__setattr__(self, attribute, CONSUMER_CONFIGS.parse_value(name, getattr(self, attribute)))

    @property
    def fetch_max_wait(self) -> float:
        """``fetch.max.wait.ms`` in seconds."""
        return self.fetch_max_wait_ms / 1000.0
