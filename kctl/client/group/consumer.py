"""``GroupConsumer``: a ``Consumer`` that subscribes through a consumer group (``GroupMembership``).

::

    consumer = GroupConsumer("127.0.0.1:9092", {"group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"], on_assign=print, on_revoke=print)   # or pattern="orders-.*"
    for record in consumer:
        handle(record)
    consumer.close()          # commits (enable.auto.commit), on_revoke, leaves the group

It plugs a ``GroupMembership`` into the consumer's membership hooks: every poll round runs the
group's work (heartbeat results, rebalances, auto commit); a rebalance replaces the consumer's
assignment (partitions that stay keep their positions and buffered records); a partition without a
position starts at the group's committed offset, else per ``auto.offset.reset``. Rebalance
callbacks run in the thread that polls: ``on_revoke`` while the consumer still holds the partitions
(commit there if you commit by hand), ``on_assign`` after they are added (seek there to start
elsewhere than the committed offset).

Configuration: one mapping of Kafka consumer properties serves both; ``group.id`` (or ``group_id=``)
is required. Commits without a subscription (``assign`` with a ``group.id``) use generation -1, as
Kafka's consumer does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kctl.client.cluster import ClusterClient
from kctl.client.config import ClientConfig
from kctl.client.consumer import Consumer, ConsumerConfig
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.client.group.membership import GroupMembership
from kctl.client.group.state import Callback, Partitions
from kctl.client.group_config import GroupConfig, coerce_group_config
from kctl.common.topic_partition import TopicPartition


def _fields(config: type[ClientConfig]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(config))


_GROUP_ONLY_FIELDS = _fields(GroupConfig) - _fields(ConsumerConfig)
#: settings of both the group and the fetches (client.rack: JoinGroup metadata, Fetch v11+)
_SHARED_FIELDS = (_fields(GroupConfig) & _fields(ConsumerConfig)) - _fields(ClientConfig)


class _Hooks:
    """The ``MembershipHooks`` a ``GroupConsumer`` attaches to itself."""

    def __init__(self, membership: GroupMembership) -> None:
        self.membership = membership

    def on_poll(self, consumer: Consumer) -> None:
        self.membership.poll(0.0)

    def committed_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        committed = self.membership.committed(partitions)
        return {tp: value.offset for tp, value in committed.items() if value is not None}

    def on_close(self, consumer: Consumer) -> None:
        self.membership.close()


class GroupConsumer(Consumer):
    """A consumer that joins group ``group.id`` to share the partitions of its subscription.

    ``config``: Kafka consumer properties (consumer and group settings in one mapping), or a
    ``ConsumerConfig``/``GroupConfig``; ``overrides``: field names of either."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | ClusterClient,
        config: ClientConfig | Mapping[str, str] | None = None,
        *,
        group_id: str | None = None,
        **overrides: Any,
    ) -> None:
        group_overrides = {k: v for k, v in overrides.items() if k in _GROUP_ONLY_FIELDS | _SHARED_FIELDS}
        consumer_overrides = {k: v for k, v in overrides.items() if k not in _GROUP_ONLY_FIELDS}
        group_config = coerce_group_config(config, **group_overrides)
        consumer_config: ClientConfig | Mapping[str, str] | None = config
        if isinstance(config, GroupConfig) and not isinstance(config, ConsumerConfig):
            shared = {f.name for f in dataclasses.fields(ClientConfig) if f.init} | _SHARED_FIELDS
            consumer_config = ConsumerConfig(**{n: getattr(config, n) for n in shared if n != "unknown"})
        group_id = group_id or group_config.group_id
        if not group_id:
            raise ValueError("a group consumer needs a group.id")
        super().__init__(bootstrap_servers, consumer_config, **consumer_overrides)
        self._user_assign: Callback | None = None
        self._user_revoke: Callback | None = None
        self._user_lost: Callback | None = None
        self.membership = GroupMembership(
            self.cluster,
            group_id,
            group_config,
            on_assign=self._assigned,
            on_revoke=self._revoked,
            on_lost=self._lost,
            positions=self.positions,
        )
        self._attach_membership(_Hooks(self.membership))
        unknown_consumer = set(getattr(self.config, "unknown", ()))
        self.unknown_properties = tuple(sorted(unknown_consumer & set(group_config.unknown)))
        """Properties given that neither the consumer nor the group knows (Kafka's clients warn)."""

    # ------------------------------------------------------------------------------ group

    @property
    def group_id(self) -> str:
        return self.membership.group_id

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation_id(self) -> int:
        return self.membership.generation_id

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | re.Pattern[str] | None = None,
        exclude: str | re.Pattern[str] | None = None,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Subscribe to topics by name, or to every topic matching ``pattern`` (whole name; topics
        created later are picked up within ``metadata.max.age.ms``) except those matching
        ``exclude``. ``on_assign(partitions added)``, ``on_revoke(partitions taken away)``,
        ``on_lost(partitions lost without a chance to commit)`` (default: ``on_revoke``)."""
        self._check_open()
        if self.assignment() and not self.membership.subscribed:
            raise ValueError("the consumer has partitions assigned by hand: unassign() before subscribe()")
        self._user_assign, self._user_revoke, self._user_lost = on_assign, on_revoke, on_lost
        self.membership.subscribe(topics, pattern=pattern, exclude=exclude)

    def unsubscribe(self) -> None:
        """Give the partitions up (``on_revoke``) and leave the group."""
        self._check_open()
        self.membership.unsubscribe()

    def subscription(self) -> frozenset[str]:
        """The topics subscribed to (for a pattern: those that matched at the last check)."""
        return self.membership.subscription

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.membership.subscribed:
            raise ValueError("the consumer is subscribed: unsubscribe() before assign()")
        super().assign(partitions)

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
        | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Commit ``offsets`` (default: the positions, i.e. everything ``poll`` returned so far).
        See ``GroupMembership.commit``."""
        self._check_open()
        if offsets is None:
            offsets = self.positions()
        return self.membership.commit(offsets, asynchronous=asynchronous, callback=callback, timeout=timeout)

    def committed(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (default: of the assignment)."""
        self._check_open()
        if partitions is None:
            partitions = self.assignment()
        return self.membership.committed(partitions, timeout=timeout)

    # ------------------------------------------------------------------------------ callbacks

    def _assigned(self, added: Partitions) -> None:
        self._set_assignment(sorted(self.membership.assignment))
        if self._user_assign is not None:
            self._user_assign(added)

    def _revoked(self, revoked: Partitions) -> None:
        try:
            if self._user_revoke is not None:
                self._user_revoke(revoked)
        finally:
            self._set_assignment(sorted(self.membership.assignment))

    def _lost(self, lost: Partitions) -> None:
        try:
            callback = self._user_lost or self._user_revoke
            if callback is not None:
                callback(lost)
        finally:
            self._set_assignment(sorted(self.membership.assignment))
