"""Committed offsets of the consumer groups (OffsetCommit, OffsetFetch, OffsetDelete, the expiry of
an empty group's offsets), kept with each group (``Group.offsets``) and written to the group's
``__consumer_offsets`` partition through the coordinator (:class:`GroupOffsets`, one per
:class:`kctl.broker.group.coordinator.GroupCoordinator`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.errors import ApiError
from kctl.broker.group.membership import Group, GroupState
from kctl.broker.group.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from kctl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kctl.broker.group.coordinator import GroupCoordinator

log = logging.getLogger("kctl.broker.group")


class GroupOffsets:
    """The committed offsets of the groups a coordinator holds (``coordinator.groups``)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.broker = coordinator.broker
        self.groups = coordinator.groups  # the same dict: the coordinator never rebinds it
        self.max_metadata_size = coordinator.max_metadata_size
        self.retention_ms = coordinator.retention_ms

    def apply_record(self, key: OffsetKey, value: bytes | None) -> None:
        """Replay one offset commit record (a tombstone when ``value`` is None) at load."""
        group = self.groups.setdefault(key.group, Group(key.group))
        tp = (key.topic, key.partition)
        if value is None:
            group.offsets.pop(tp, None)
        else:
            group.offsets[tp] = decode_offset_value(value)

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        offsets: dict[tuple[str, int], OffsetValue],
    ) -> dict[tuple[str, int], int]:
        self.coordinator.check_owner(group_id)
        group = self.groups.get(group_id)
        if generation < 0 and not member_id:
            if group is not None and group.members:
                raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "the group has active members")
        else:
            group, _member = self.coordinator.current_member(group_id, member_id, instance_id, generation)
            if group.state == GroupState.COMPLETING_REBALANCE:
                raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS)
        results: dict[tuple[str, int], int] = {}
        records = []
        for tp, value in offsets.items():
            record = self.broker.metadata.topic(tp[0])
            if record is None or tp[1] not in record.assignment:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(value.metadata.encode()) > self.max_metadata_size:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                records.append(
                    (encode_offset_key(OffsetKey(group_id, tp[0], tp[1])), encode_offset_value(value))
                )
                results[tp] = ErrorCode.NONE
        if records:
            self.coordinator.write(group_id, records)
            if group is None:
                group = self.groups[group_id] = Group(group_id, state_timestamp=self.broker.clock.time_ms())
            for tp, code in results.items():
                if code == ErrorCode.NONE:
                    group.offsets[tp] = offsets[tp]
        return results

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetValue | None]:
        self.coordinator.check_owner(group_id)
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(sorted(stored.items()))
        return {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.coordinator.check_owner(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)
        subscribed = self._subscribed_topics(group)
        results: dict[tuple[str, int], int] = {}
        records = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in group.offsets:
                records.append((encode_offset_key(OffsetKey(group_id, tp[0], tp[1])), None))
        self.coordinator.write(group_id, records)
        for tp, code in results.items():
            if code == ErrorCode.NONE:
                group.offsets.pop(tp, None)
        return results

    @staticmethod
    def _subscribed_topics(group: Group) -> set[str]:
        """Topics the members' consumer-protocol subscriptions name (best effort)."""
        from kctl.broker.group.consumer_protocol import subscription_topics

        topics: set[str] = set()
        if group.protocol_type == "consumer" and group.state != GroupState.EMPTY:
            for member in group.members.values():
                topics |= subscription_topics(member.metadata_for(group.protocol_name or ""))
        return topics

    def expire_offsets(self) -> int:
        """Drop the offsets of groups that have been empty longer than offsets.retention.minutes."""
        now = self.broker.clock.time_ms()
        expired = 0
        for group_id, group in list(self.groups.items()):
            if self.coordinator.partition_of(group_id) not in self.coordinator.loaded or group.members:
                continue
            last = max([group.state_timestamp, *(v.commit_timestamp for v in group.offsets.values())])
            if now - last < self.retention_ms:
                continue
            records = [(encode_offset_key(OffsetKey(group_id, t, p)), None) for (t, p) in group.offsets]
            records.append((encode_group_key(GroupKey(group_id)), None))
            try:
                self.coordinator.write(group_id, records)
            except ApiError:
                continue
            expired += len(group.offsets)
            del self.groups[group_id]
            log.info("expired the offsets of empty group %s", group_id)
        return expired
