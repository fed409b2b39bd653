"""Committed offsets of the consumer groups (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
the expiry of an empty group's offsets), kept with each group (``Group.offsets``) and written to the
group's ``__consumer_offsets`` partition through the coordinator (:class:`GroupOffsets`, one per
:class:`kctl.broker.group.coordinator.GroupCoordinator`).

**Transactional offset commits** (KIP-98, KIP-447). TxnOffsetCommit writes the offsets as a
transactional batch of the producer (its id and epoch, the log checking the epoch) and keeps them
*pending* (``Group.pending_txn_offsets``), invisible to OffsetFetch, until the producer's marker on the
partition: every marker appended there as leader is reported by the replica manager
(``ReplicaManager.on_marker``, whoever sent it) and the load replays the markers of the log the same
way. COMMIT makes each pending offset the committed one unless a commit written *after* it (a later
batch, by ``Group.offset_positions``) is already there — Kafka's rule: a plain OffsetCommit made while
the transaction is open, written later, wins; ABORT drops them. A plain OffsetCommit is accepted
meanwhile, as Kafka does. OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for a
named partition with a pending transactional commit. A group with pending transactional commits is not
expired."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
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
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.records.record import ControlRecord, Record

if TYPE_CHECKING:
    from kctl.broker.group.coordinator import GroupCoordinator

log = logging.getLogger("kctl.broker.group")

OFFSETS_TOPIC = "__consumer_offsets"


class GroupOffsets:
    """The committed offsets of the groups a coordinator holds (``coordinator.groups``)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.broker = coordinator.broker
        self.groups = coordinator.groups  # the same dict: the coordinator never rebinds it
        self.max_metadata_size = coordinator.max_metadata_size
        self.retention_ms = coordinator.retention_ms
        self.txn_groups: dict[int, set[str]] = {}
        """Producer id -> the groups holding offset commits of its open transaction."""

    def apply_record(
        self, key: OffsetKey, value: bytes | None, position: int, producer_id: int | None = None
    ) -> None:
        """Replay one offset commit record (a tombstone when ``value`` is None) of the batch at
        ``position`` at load; ``producer_id``: the batch is that producer's transactional batch."""
        group = self.groups.setdefault(key.group, Group(key.group))
        tp = (key.topic, key.partition)
        if producer_id is not None:
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            self.txn_groups.setdefault(producer_id, set()).add(key.group)
            if value is None:
                pending.pop(tp, None)
            else:
                pending[tp] = (decode_offset_value(value), position)
        elif value is None:
            group.offsets.pop(tp, None)
            group.offset_positions.pop(tp, None)
        else:
            group.offsets[tp] = decode_offset_value(value)
            group.offset_positions[tp] = position

    def apply_marker(self, partition: int, producer_id: int, records: Sequence[Record]) -> None:
        """Replay a control batch of ``producer_id`` at load: a COMMIT or ABORT marker completes the
        producer's pending offset commits in the groups of ``partition``."""
        for record in records:
            try:
                marker = ControlRecord.from_record(record)
            except ValueError:
                continue
            if marker.is_commit or marker.is_abort:
                self.complete_transaction(partition, producer_id, marker.is_commit)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool, offset: int) -> None:
        """A COMMIT or ABORT marker was appended at ``offset`` of ``tp`` (``ReplicaManager.on_marker``):
        on a loaded ``__consumer_offsets`` partition, complete the producer's pending offset commits (on
        one still loading, the load meets the marker in the log)."""
        if tp.topic != OFFSETS_TOPIC or tp.partition not in self.coordinator.loaded:
            return
        completed = self.complete_transaction(tp.partition, producer_id, commit)
        if completed:
            log.info(
                "%s of producer %d at %s@%d: %d transactional offset commits",
                "COMMIT" if commit else "ABORT",
                producer_id,
                tp,
                offset,
                completed,
            )

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> int:
        """End ``producer_id``'s pending offset commits in the groups of ``partition``: materialized
        (``commit``, each unless a later-written commit is there) or dropped; how many there were."""
        group_ids = self.txn_groups.get(producer_id)
        if not group_ids:
            return 0
        completed = 0
        for group_id in [g for g in group_ids if self.coordinator.partition_of(g) == partition]:
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            pending = group.pending_txn_offsets.pop(producer_id, None) if group is not None else None
            if group is None or not pending:
                continue
            completed += len(pending)
            if not commit:
                continue
            for tp, (value, position) in pending.items():
                if group.offset_positions.get(tp, -1) < position or tp not in group.offsets:
                    group.offsets[tp] = value
                    group.offset_positions[tp] = position
        if not group_ids:
            del self.txn_groups[producer_id]
        return completed

    def forget_groups(self, group_ids: Iterable[str]) -> None:
        """The coordinator dropped these groups (a partition it no longer leads)."""
        dropped = set(group_ids)
        for producer_id, groups in list(self.txn_groups.items()):
            groups -= dropped
            if not groups:
                del self.txn_groups[producer_id]

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation: int,
        offsets: dict[tuple[str, int], OffsetValue],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: write ``offsets`` as ``producer_id``'s transactional batch, pending until
        its marker. The group metadata (v3+) is checked as Kafka does (KIP-447): given a generation, a
        member id or an instance id, the member must be current (UNKNOWN_MEMBER_ID,
        FENCED_INSTANCE_ID) in the current generation (ILLEGAL_GENERATION); without them any group
        state is accepted. The topics are known to exist. Raises ApiError for the whole request."""
        self.coordinator.check_owner(group_id)
        group = self.groups.get(group_id)
        if group is not None and group.state == GroupState.DEAD:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation >= 0 or member_id or instance_id is not None:
            group, _member = self.coordinator.current_member(group_id, member_id, instance_id, generation)
        results: dict[tuple[str, int], int] = {}
        records = []
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.max_metadata_size:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            records.append((encode_offset_key(OffsetKey(group_id, tp[0], tp[1])), encode_offset_value(value)))
            results[tp] = ErrorCode.NONE
        position = self.coordinator.write(group_id, records, producer=(producer_id, producer_epoch))
        if records:
            if group is None:
                group = self.groups[group_id] = Group(group_id, state_timestamp=self.broker.clock.time_ms())
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            for tp, code in results.items():
                if code == ErrorCode.NONE:
                    pending[tp] = (offsets[tp], position)
            self.txn_groups.setdefault(producer_id, set()).add(group_id)
        return results

    def has_pending_txn_offsets(self, group: Group) -> bool:
        return any(group.pending_txn_offsets.values())

    def unstable_partitions(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> set[tuple[str, int]]:
        """Those of ``partitions`` with a transactional offset commit pending (OffsetFetch
        require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        group = self.groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        pending = set().union(*(p.keys() for p in group.pending_txn_offsets.values()))
        return {tp for tp in partitions if tp in pending}

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        offsets: dict[tuple[str, int], OffsetValue],
    ) -> tuple[dict[tuple[str, int], int], Callable[[], None]]:
        """Write the offsets of an OffsetCommit to the group's __consumer_offsets partition; the
        result per partition, and the function that makes them the group's committed offsets —
        to be called once the write is replicated (as Kafka's cache takes a commit only in the
        append's callback): until then OffsetFetch answers the offsets before, so a commit lost
        with its coordinator was never seen (committed offsets never go back)."""
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
        if not records:
            return results, _nothing
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "group %s commits %s (member %s, generation %d)",
                group_id,
                _offsets_text({tp: offsets[tp] for tp, code in results.items() if code == ErrorCode.NONE}),
                member_id or "-",
                generation,
            )
        position = self.coordinator.write(group_id, records)
        if group is None:
            group = self.groups[group_id] = Group(group_id, state_timestamp=self.broker.clock.time_ms())
        written = group

        def apply() -> None:
            if self.groups.get(group_id) is not written:
                return  # the group went meanwhile (unloaded: leadership lost; deleted)
            for tp, code in results.items():
                # a later commit of the partition, already applied, stays (waits may end out of order)
                if code == ErrorCode.NONE and written.offset_positions.get(tp, -1) <= position:
                    written.offsets[tp] = offsets[tp]
                    written.offset_positions[tp] = position

        return results, apply

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetValue | None]:
        self.coordinator.check_owner(group_id)
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            found: dict[tuple[str, int], OffsetValue | None] = dict(sorted(stored.items()))
        else:
            found = {tp: stored.get(tp) for tp in partitions}
        if log.isEnabledFor(logging.DEBUG):
            log.debug("group %s offsets fetched: %s", group_id, _offsets_text(found))
        return found

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
                group.offset_positions.pop(tp, None)
                for pending in group.pending_txn_offsets.values():  # as Kafka's removeOffsets
                    pending.pop(tp, None)
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
            if self.has_pending_txn_offsets(group):  # Kafka keeps a group with pending commits
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


def _nothing() -> None:
    return None


def _offsets_text(offsets: dict[tuple[str, int], OffsetValue | None]) -> str:
    """``topic-partition=offset`` pairs for a debug line (``none`` where nothing is committed)."""
    return (
        ", ".join(
            f"{topic}-{partition}={'none' if value is None else value.offset}"
            for (topic, partition), value in offsets.items()
        )
        or "(no partitions)"
    )
