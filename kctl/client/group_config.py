"""``GroupConfig``: the consumer-group settings, under Kafka's consumer property names.

::

    GroupConfig.from_properties({"group.id": "billing", "session.timeout.ms": "10000"})
    GroupConfig(group_id="billing", partition_assignment_strategy="cooperative-sticky")

It extends ``ClientConfig`` (connection, timeouts, retries). Defaults are the Java consumer's,
except ``partition.assignment.strategy``, which is ``range`` alone (the Java client also offers
``cooperative-sticky``). Keys that are consumer settings but not group settings (``fetch.min.bytes``,
``auto.offset.reset``, ...) end up in ``unknown``: a consumer passes all its properties and keeps
what it knows itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kctl.client.config import CLIENT_CONFIGS, ClientConfig, ClientConfigError
from kctl.client.group.assignors import Assignor, RebalanceProtocol, parse_assignors, rebalance_protocol
from kctl.common.config_def import ConfigDef, ConfigKey, Custom, Importance, Range
from kctl.common.config_def import ConfigType as T


def _strategy(key: str, text: str) -> str:
    try:
        names = [a.name for a in parse_assignors(text)]
        rebalance_protocol(parse_assignors(text))
    except ValueError as error:
        raise ClientConfigError(f"{key}: {error}") from None
    return ",".join(names)


GROUP_CONFIGS = CLIENT_CONFIGS.extend(
    "group",
    [
        ConfigKey(
            "group.id",
            T.STRING,
            None,
            None,
            "The consumer group this member belongs to.",
            Importance.HIGH,
        ),
        ConfigKey(
            "group.instance.id",
            T.STRING,
            None,
            None,
            "Static membership: a restart within the session timeout keeps the member's partitions "
            "without a rebalance, and close does not leave the group.",
        ),
        ConfigKey(
            "session.timeout.ms",
            T.INT,
            45_000,
            Range(1),
            "The coordinator removes a member it has not heard from for this long.",
            Importance.HIGH,
        ),
        ConfigKey(
            "heartbeat.interval.ms",
            T.INT,
            3_000,
            Range(1),
            "How often the member heartbeats (below session.timeout.ms).",
            Importance.HIGH,
        ),
        ConfigKey(
            "max.poll.interval.ms",
            T.INT,
            300_000,
            Range(1),
            "The longest time between two poll calls before the member leaves the group; also the "
            "rebalance timeout (how long the coordinator waits for members to rejoin).",
        ),
        ConfigKey(
            "partition.assignment.strategy",
            T.LIST,
            "range",
            Custom(
                lambda names: _strategy("partition.assignment.strategy", ",".join(names)),
                "range, roundrobin, sticky, cooperative-sticky",
            ),
            "Assignor names, preferred first.",
        ),
        ConfigKey("enable.auto.commit", T.BOOLEAN, True, None, "Commit consumed offsets in the background."),
        ConfigKey(
            "auto.commit.interval.ms",
            T.INT,
            5_000,
            Range(0),
            "How often offsets are committed when enable.auto.commit is true.",
            Importance.LOW,
        ),
        ConfigKey(
            "exclude.internal.topics",
            T.BOOLEAN,
            True,
            None,
            "Pattern subscriptions never match internal topics (__consumer_offsets).",
        ),
        ConfigKey(
            "allow.auto.create.topics",
            T.BOOLEAN,
            False,
            None,
            "Whether the leader's metadata requests for subscribed topics may create them.",
        ),
        ConfigKey("client.rack", T.STRING, None, None, "The rack of this client.", Importance.LOW),
    ],
)
_default = GROUP_CONFIGS.default_of


@dataclasses.dataclass(frozen=True)
class GroupConfig(ClientConfig):
    """Settings of a group member (``GroupMembership``), documented in ``GROUP_CONFIGS``."""

    group_id: str | None = _default("group.id")
    group_instance_id: str | None = _default("group.instance.id")
    session_timeout_ms: int = _default("session.timeout.ms")
    heartbeat_interval_ms: int = _default("heartbeat.interval.ms")
    max_poll_interval_ms: int = _default("max.poll.interval.ms")
    partition_assignment_strategy: str = _default("partition.assignment.strategy")
    enable_auto_commit: bool = _default("enable.auto.commit")
    auto_commit_interval_ms: int = _default("auto.commit.interval.ms")
    exclude_internal_topics: bool = _default("exclude.internal.topics")
    allow_auto_create_topics: bool = _default("allow.auto.create.topics")
    client_rack: str | None = _default("client.rack")

    CONFIG_DEF: ClassVar[ConfigDef] = GROUP_CONFIGS
    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = GROUP_CONFIGS.attribute_parsers()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ClientConfigError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session.timeout.ms ({self.session_timeout_ms})"
            )
        _strategy("partition.assignment.strategy", self.partition_assignment_strategy)

    @property
    def assignors(self) -> list[Assignor]:
        """The configured assignors, preferred first."""
        return parse_assignors(self.partition_assignment_strategy)

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return rebalance_protocol(self.assignors)


def coerce_group_config(config: ClientConfig | Mapping[str, str] | None, **overrides: Any) -> GroupConfig:
    """A ``GroupConfig`` from a ``GroupConfig``, another ``ClientConfig`` (its shared settings are
    kept), Kafka properties or None; ``overrides`` are field names and win."""
    return GroupConfig.coerce(config, **overrides)
