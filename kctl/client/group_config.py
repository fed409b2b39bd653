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

from kctl.client.config import ClientConfig, ClientConfigError, _int, _str
from kctl.client.group.assignors import Assignor, RebalanceProtocol, parse_assignors, rebalance_protocol


def _bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ClientConfigError(f"{key}: expected true or false, got {text!r}")


def _optional_str(key: str, text: str) -> str | None:
    return text if text.strip() else None


def _strategy(key: str, text: str) -> str:
    try:
        names = [a.name for a in parse_assignors(text)]
        rebalance_protocol(parse_assignors(text))
    except ValueError as error:
        raise ClientConfigError(f"{key}: {error}") from None
    return ",".join(names)


@dataclasses.dataclass(frozen=True)
class GroupConfig(ClientConfig):
    """Settings of a group member (``GroupMembership``)."""

    group_id: str | None = None
    group_instance_id: str | None = None
    """Static membership: a restart within the session timeout keeps the member's partitions
    without a rebalance, and ``close`` does not leave the group."""
    session_timeout_ms: int = 45_000
    """The coordinator removes a member it has not heard from for this long."""
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    """The longest time between two ``poll`` calls before the member leaves the group; also the
    rebalance timeout (how long the coordinator waits for members to rejoin)."""
    partition_assignment_strategy: str = "range"
    """Assignor names, preferred first (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``)."""
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    exclude_internal_topics: bool = True
    """Pattern subscriptions never match internal topics (``__consumer_offsets``)."""
    allow_auto_create_topics: bool = False
    """Whether the leader's metadata requests for subscribed topics may create them."""
    client_rack: str | None = None

    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = {
        **ClientConfig.PROPERTIES,
        "group.id": ("group_id", _optional_str),
        "group.instance.id": ("group_instance_id", _optional_str),
        "session.timeout.ms": ("session_timeout_ms", _int(1)),
        "heartbeat.interval.ms": ("heartbeat_interval_ms", _int(1)),
        "max.poll.interval.ms": ("max_poll_interval_ms", _int(1)),
        "partition.assignment.strategy": ("partition_assignment_strategy", _strategy),
        "enable.auto.commit": ("enable_auto_commit", _bool),
        "auto.commit.interval.ms": ("auto_commit_interval_ms", _int(0)),
        "exclude.internal.topics": ("exclude_internal_topics", _bool),
        "allow.auto.create.topics": ("allow_auto_create_topics", _bool),
        "client.rack": ("client_rack", _str),
    }

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
    if config is None:
        return GroupConfig(**overrides)
    if isinstance(config, GroupConfig):
        return dataclasses.replace(config, **overrides) if overrides else config
    if isinstance(config, ClientConfig):
        names = {f.name for f in dataclasses.fields(GroupConfig) if f.init}
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names}
        values.update(overrides)
        return GroupConfig(**values)
    return GroupConfig.from_properties(config, **overrides)  # type: ignore[return-value]
