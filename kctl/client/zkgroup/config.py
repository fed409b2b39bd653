"""``ZkGroupConfig``: the settings of a ZooKeeper-coordinated group member, under the property names
of Kafka's old high-level consumer (seeds 000/003): ``zookeeper.connect``, ``offsets.storage``,
``dual.commit.enabled``, ``rebalance.max.retries``, ``rebalance.backoff.ms``, ``auto.commit.enable``,
``auto.commit.interval.ms``. The fetch settings (``auto.offset.reset`` with its old values
``smallest``/``largest``, ``fetch.min.bytes``, ...) are the ``ConsumerConfig``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kctl.client.config import CLIENT_CONFIGS, ClientConfig, ClientConfigError
from kctl.common.config_def import ConfigDef, ConfigKey, Importance, OneOf, Range
from kctl.common.config_def import ConfigType as T

__all__ = ["KAFKA", "OFFSET_STORAGES", "ZK_GROUP_CONFIGS", "ZOOKEEPER", "ZkGroupConfig"]

ZOOKEEPER = "zookeeper"
KAFKA = "kafka"
OFFSET_STORAGES = (ZOOKEEPER, KAFKA)

ZK_GROUP_CONFIGS = CLIENT_CONFIGS.extend(
    "ZooKeeper group",
    [
        ConfigKey(
            "group.id", T.STRING, None, None, "The consumer group this member belongs to.", Importance.HIGH
        ),
        ConfigKey(
            "zookeeper.connect",
            T.STRING,
            None,
            None,
            "ZooKeeper connect string, host:port[,...][/chroot]: where the group is coordinated.",
            Importance.HIGH,
        ),
        ConfigKey(
            "zookeeper.session.timeout.ms",
            T.INT,
            6_000,
            Range(1),
            "The ZooKeeper session timeout: a consumer that dies loses its registration and its "
            "partitions this long after.",
        ),
        ConfigKey(
            "zookeeper.connection.timeout.ms",
            T.INT,
            6_000,
            Range(1),
            "The longest wait to connect to ZooKeeper.",
            Importance.LOW,
        ),
        ConfigKey(
            "consumer.id",
            T.STRING,
            None,
            None,
            "The consumer id registered under /consumers/<group>/ids (default: <host>:<uuid>).",
            Importance.LOW,
        ),
        ConfigKey(
            "offsets.storage",
            T.STRING,
            ZOOKEEPER,
            OneOf(OFFSET_STORAGES, case_insensitive=True),
            "Where offsets are committed and read: zookeeper (/consumers/<group>/offsets) or kafka "
            "(the group coordinator's __consumer_offsets).",
            Importance.HIGH,
        ),
        ConfigKey(
            "dual.commit.enabled",
            T.BOOLEAN,
            False,
            None,
            "Commit to both ZooKeeper and Kafka, and start each partition at the larger of the two "
            "committed offsets: the step of a migration between the two stores.",
        ),
        ConfigKey(
            "rebalance.max.retries",
            T.INT,
            4,
            Range(0),
            "How many more times a rebalance is tried while a partition's previous owner has not "
            "released it.",
        ),
        ConfigKey(
            "rebalance.backoff.ms",
            T.INT,
            2_000,
            Range(0),
            "The wait between two rebalance attempts.",
        ),
        ConfigKey("auto.commit.enable", T.BOOLEAN, True, None, "Commit consumed offsets periodically."),
        ConfigKey(
            "auto.commit.interval.ms",
            T.INT,
            60_000,
            Range(0),
            "How often offsets are committed when auto.commit.enable is true.",
        ),
        ConfigKey(
            "exclude.internal.topics",
            T.BOOLEAN,
            True,
            None,
            "Topic filters never match internal topics (__consumer_offsets).",
            Importance.LOW,
        ),
    ],
)
_default = ZK_GROUP_CONFIGS.default_of


@dataclasses.dataclass(frozen=True)
class ZkGroupConfig(ClientConfig):
    """Settings of a ZooKeeper-mode group member, documented in ``ZK_GROUP_CONFIGS``."""

    group_id: str | None = _default("group.id")
    zookeeper_connect: str | None = _default("zookeeper.connect")
    zookeeper_session_timeout_ms: int = _default("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int = _default("zookeeper.connection.timeout.ms")
    consumer_id: str | None = _default("consumer.id")
    offsets_storage: str = _default("offsets.storage")
    dual_commit_enabled: bool = _default("dual.commit.enabled")
    rebalance_max_retries: int = _default("rebalance.max.retries")
    rebalance_backoff_ms: int = _default("rebalance.backoff.ms")
    auto_commit_enable: bool = _default("auto.commit.enable")
    auto_commit_interval_ms: int = _default("auto.commit.interval.ms")
    exclude_internal_topics: bool = _default("exclude.internal.topics")

    CONFIG_DEF: ClassVar[ConfigDef] = ZK_GROUP_CONFIGS
    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = (
        ZK_GROUP_CONFIGS.attribute_parsers()
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "offsets_storage", str(self.offsets_storage).lower())
        if self.offsets_storage not in OFFSET_STORAGES:
            raise ClientConfigError(
                f"offsets.storage: expected zookeeper or kafka, got {self.offsets_storage!r}"
            )

    @property
    def stores(self) -> tuple[str, ...]:
        """The offset stores commits go to (and the start position is the largest of)."""
        if self.dual_commit_enabled:
            return (ZOOKEEPER, KAFKA)
        return (self.offsets_storage,)


def coerce_zk_group_config(
    config: ClientConfig | Mapping[str, str] | None, **overrides: Any
) -> ZkGroupConfig:
    """A ``ZkGroupConfig`` from one, another ``ClientConfig``, Kafka properties or None."""
    return ZkGroupConfig.coerce(config, **overrides)
