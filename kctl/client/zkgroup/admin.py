"""Admin calls for ZooKeeper-coordinated groups, and moving a group's offsets between ZooKeeper and
the broker-coordinated store.

``ZkGroupAdmin`` is a ``GroupAdmin`` whose groups live under ``/consumers`` in ZooKeeper: the same
calls (list, describe, committed offsets, alter offsets, delete) and results, so ``offsets_with_lag``
and the rewind planner (``kctl.client.group.rewind``) work on it unchanged; the log offsets still
come from the brokers. A group's members are its registered consumer ids, each member's assignment
the partitions it owns; a group with members is ``Stable``, one with only offsets ``Empty``, an
unknown one ``Dead``.

``plan_migration`` / ``execute_migration`` copy a group's committed offsets from ZooKeeper to Kafka
(``to="kafka"``) or back (``to="zookeeper"``), for a group whose consumers are stopped: the offline
alternative to seed 003's rolling migration with ``dual.commit.enabled``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from kctl.client.admin import AdminClient, Result
from kctl.client.cluster import ClusterClient
from kctl.client.group.admin import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetDeleteResult,
)
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.client.zkgroup.config import KAFKA, OFFSET_STORAGES, ZOOKEEPER
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ErrorCode, error_name
from kctl.zk.consumer_registry import ConsumerGroupStore

__all__ = [
    "PROTOCOL_TYPE",
    "MigrationEntry",
    "MigrationPlan",
    "ZkGroupAdmin",
    "execute_migration",
    "plan_migration",
]

PROTOCOL_TYPE = "zookeeper"
"""The protocol type shown for ZooKeeper-coordinated groups."""
ASSIGNOR = "range"


class ZkGroupAdmin(GroupAdmin):
    """``GroupAdmin`` over the ZooKeeper consumers' registry ``zk`` (log offsets from ``admin``)."""

    def __init__(self, admin: AdminClient | ClusterClient, zk: ConsumerGroupStore) -> None:
        super().__init__(admin)
        self.zk = zk

    def list_groups(
        self, *, states: Collection[str] | None = None, timeout: float | None = None
    ) -> list[GroupListing]:
        wanted = {s.lower() for s in states} if states else None
        out = []
        for group in self.zk.groups():
            state = "Stable" if self.zk.consumers(group) else "Empty"
            if wanted is None or state.lower() in wanted:
                out.append(GroupListing(group, state, PROTOCOL_TYPE, -1))
        return out

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> list[GroupDescription]:
        out = []
        for group in dict.fromkeys(group_ids):
            if not self.zk.group_exists(group):
                out.append(GroupDescription(group, state="Dead"))
                continue
            owned: dict[str, list[TopicPartition]] = {}
            for (topic, partition), owner in self.zk.owners(group).items():
                owned.setdefault(owner, []).append(TopicPartition(topic, partition))
            members = tuple(
                MemberDescription(
                    member_id=consumer_id,
                    group_instance_id=None,
                    client_id=consumer_id,
                    host=consumer_id.rpartition(":")[0] or consumer_id,
                    assignment=tuple(sorted(owned.get(consumer_id, []))),
                    topics=tuple(registration.subscription),
                )
                for consumer_id, registration in self.zk.consumers(group).items()
            )
            out.append(
                GroupDescription(
                    group,
                    state="Stable" if members else "Empty",
                    protocol_type=PROTOCOL_TYPE,
                    protocol=ASSIGNOR if members else "",
                    members=members,
                )
            )
        return out

    def committed_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if partitions is None:
            return {
                TopicPartition(t, p): OffsetAndMetadata(o)
                for (t, p), o in self.zk.committed_offsets(group_id).items()
            }
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in sorted(set(TopicPartition(*tp) for tp in partitions)):
            offset = self.zk.committed_offset(group_id, tp.topic, tp.partition)
            out[tp] = OffsetAndMetadata(offset) if offset is not None else None
        return out

    def alter_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """Write the offsets znodes; REBALANCE_IN_PROGRESS for a partition a consumer owns."""
        owners = self.zk.owners(group_id)
        codes: dict[TopicPartition, int] = {}
        for tp, value in offsets.items():
            tp = TopicPartition(*tp)
            if (tp.topic, tp.partition) in owners:
                codes[tp] = ErrorCode.REBALANCE_IN_PROGRESS
                continue
            offset = value.offset if isinstance(value, OffsetAndMetadata) else int(value)
            self.zk.commit_offset(group_id, tp.topic, tp.partition, offset)
            codes[tp] = ErrorCode.NONE
        return codes

    def delete_groups(self, group_ids: Iterable[str], *, timeout: float | None = None) -> list[Result]:
        results = []
        for group in dict.fromkeys(group_ids):
            if not self.zk.group_exists(group):
                results.append(Result(group, ErrorCode.GROUP_ID_NOT_FOUND))
            elif self.zk.consumers(group):
                results.append(Result(group, ErrorCode.NON_EMPTY_GROUP))
            else:
                try:
                    self.zk.delete_group(group)
                    results.append(Result(group, ErrorCode.NONE))
                except ValueError:
                    results.append(Result(group, ErrorCode.NON_EMPTY_GROUP))
        return results

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> OffsetDeleteResult:
        if not self.zk.group_exists(group_id):
            return OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND, {})
        subscribed = {t for r in self.zk.consumers(group_id).values() for t in r.subscription}
        codes: dict[TopicPartition, int] = {}
        for tp in sorted(set(TopicPartition(*tp) for tp in partitions)):
            if tp.topic in subscribed:
                codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                self.zk.delete_offset(group_id, tp.topic, tp.partition)
                codes[tp] = ErrorCode.NONE
        return OffsetDeleteResult(ErrorCode.NONE, codes)


# ----------------------------------------------------------------------------------------- migration


@dataclasses.dataclass(frozen=True)
class MigrationEntry:
    """One partition: its committed offset in ZooKeeper and in Kafka, and the one the destination
    gets (None: left as it is)."""

    topic_partition: TopicPartition
    zookeeper: int | None
    kafka: int | None
    target: int | None
    note: str | None = None

    def row(self, codes: Mapping[TopicPartition, int]) -> dict[str, object]:
        """The entry as a table row, its status after an execution that returned ``codes``."""
        tp = self.topic_partition
        if self.target is None:
            status = "unchanged"
        elif tp in codes:
            status = "copied" if not codes[tp] else error_name(codes[tp])
        else:
            status = "planned"
        return {
            "topic": tp.topic,
            "partition": tp.partition,
            "zookeeper_offset": self.zookeeper,
            "kafka_offset": self.kafka,
            "new_offset": self.target,
            "status": status,
            "note": self.note,
        }


@dataclasses.dataclass(frozen=True)
class MigrationPlan:
    """Copying ``group_id``'s offsets to ``to`` (zookeeper or kafka). ``blockers`` say why it must
    not run now (consumers registered in ZooKeeper, members in the broker-coordinated group)."""

    group_id: str
    to: str
    offsets: list[MigrationEntry]
    blockers: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return ZOOKEEPER if self.to == KAFKA else KAFKA

    @property
    def changes(self) -> dict[TopicPartition, int]:
        return {e.topic_partition: e.target for e in self.offsets if e.target is not None}

    @property
    def executable(self) -> bool:
        return not self.blockers and bool(self.changes)


def plan_migration(
    zk_admin: ZkGroupAdmin, group_id: str, to: str, *, timeout: float | None = None
) -> MigrationPlan:
    """Work out copying the group's committed offsets from the other store into ``to``."""
    if to not in OFFSET_STORAGES:
        raise ValueError(f"migrate to zookeeper or kafka, not {to!r}")
    kafka = GroupAdmin(zk_admin.admin)
    in_zk = {tp: v.offset for tp, v in zk_admin.committed_offsets(group_id).items() if v is not None}
    [broker_group] = kafka.describe_groups([group_id], timeout=timeout)
    in_kafka = (
        {
            tp: v.offset
            for tp, v in kafka.committed_offsets(group_id, timeout=timeout).items()
            if v is not None
        }
        if broker_group.exists
        else {}
    )
    blockers = []
    registered = zk_admin.zk.consumers(group_id)
    if registered:
        blockers.append(f"consumers are registered in ZooKeeper: {', '.join(registered)}")
    if broker_group.ok and broker_group.active:
        who = ", ".join(m.member_id for m in broker_group.members)
        blockers.append(
            f"the broker-coordinated group has members: {who}" if who else "the broker group is active"
        )
    source = in_zk if to == KAFKA else in_kafka
    entries = []
    for tp in sorted(set(in_zk) | set(in_kafka)):
        src = source.get(tp)
        dest = (in_kafka if to == KAFKA else in_zk).get(tp)
        if src is None:
            entries.append(
                MigrationEntry(
                    tp, in_zk.get(tp), in_kafka.get(tp), None, f"not in {ZOOKEEPER if to == KAFKA else KAFKA}"
                )
            )
        elif src == dest:
            entries.append(MigrationEntry(tp, in_zk.get(tp), in_kafka.get(tp), None, "already equal"))
        else:
            entries.append(MigrationEntry(tp, in_zk.get(tp), in_kafka.get(tp), src))
    return MigrationPlan(group_id, to, entries, tuple(blockers))


def execute_migration(
    zk_admin: ZkGroupAdmin, plan: MigrationPlan, *, timeout: float | None = None
) -> dict[TopicPartition, int]:
    """Write the plan's offsets into its destination; the error code of each partition."""
    if plan.blockers:
        raise ValueError(f"the migration of group {plan.group_id!r} is blocked: {'; '.join(plan.blockers)}")
    changes = plan.changes
    if not changes:
        return {}
    if plan.to == KAFKA:
        return GroupAdmin(zk_admin.admin).alter_offsets(plan.group_id, changes, timeout=timeout)
    return zk_admin.alter_offsets(plan.group_id, changes, timeout=timeout)
