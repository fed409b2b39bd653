"""The GroupCoordinator: the classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, static membership) and DeleteGroups, for the groups whose ``__consumer_offsets`` partition
this broker leads; their committed offsets are its collaborator ``offsets``
(:class:`kctl.broker.group.offsets.GroupOffsets`).

Every committed offset and every group generation is written to ``__consumer_offsets`` and
acknowledged only once written (offset commits: once replicated to the ISR, ``wait_replicated``);
at start-up (or when it takes over a partition) the coordinator rebuilds its state by reading the
partition, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile; it drops the groups of a partition it
no longer leads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from kctl.broker.errors import ApiError
from kctl.broker.group.membership import Group, GroupState, JoinResult, Member, SyncResult
from kctl.broker.group.offsets import OFFSETS_TOPIC, GroupOffsets
from kctl.broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    decode_group_value,
    decode_key,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    partition_for_group,
)
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import BatchHeader
from kctl.records.reader import iter_batches

if TYPE_CHECKING:
    from kctl.broker.config import BrokerConfig
    from kctl.broker.metadata_cache import MetadataCache
    from kctl.broker.replica_manager import ReplicaManager
    from kctl.broker.topics import TopicAdmin
    from kctl.log.clock import Clock
    from kctl.protocol.messages.heartbeat import HeartbeatRequest
    from kctl.protocol.messages.join_group import JoinGroupRequest
    from kctl.protocol.messages.sync_group import SyncGroupRequest

log = logging.getLogger("kctl.broker.group")

SKIP_ASSIGNMENT_VERSION = 9
READ_CHUNK = 4 * 1024 * 1024
OFFSET_COMMIT_TIMEOUT = 5.0  # Kafka's offsets.commit.timeout.ms


class CoordinatorBroker(Protocol):
    """What the group coordinator uses of its broker (``kctl.broker.broker.Broker`` is one)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def topics(self) -> TopicAdmin: ...


class GroupCoordinator:
    def __init__(self, broker: CoordinatorBroker) -> None:
        self.broker = broker
        config = broker.config
        self.partitions: int = config["offsets.topic.num.partitions"]
        self.min_session_timeout_ms: int = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms: int = config["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms: int = config["group.initial.rebalance.delay.ms"]
        self.max_metadata_size: int = config["offset.metadata.max.bytes"]
        self.max_group_size: int = config["group.max.size"]
        self.retention_ms: int = config["offsets.retention.minutes"] * 60_000
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()  # __consumer_offsets partitions loaded and owned
        self.loading: set[int] = set()
        self.offsets = GroupOffsets(self)
        """The groups' committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, expiry)."""

    # -- ownership and loading -----------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for_group(group_id, self.partitions)

    def coordinator_for(self, group_id: str) -> int:
        """The broker id leading ``group_id``'s __consumer_offsets partition (creating the topic on
        first use, from whichever broker is asked, as Kafka's brokers do); raises
        ApiError(COORDINATOR_NOT_AVAILABLE) while it cannot be known."""
        broker = self.broker
        config = broker.config
        if broker.metadata.topic(OFFSETS_TOPIC) is None:
            # Kafka's rule (KIP-115): wait (COORDINATOR_NOT_AVAILABLE) until
            # offsets.topic.replication.factor brokers are up; a cluster of one (embedded mode) uses 1.
            factor = config["offsets.topic.replication.factor"] if config.zookeeper_connect else 1
            try:
                broker.topics.ensure_internal_topic(
                    OFFSETS_TOPIC,
                    config["offsets.topic.num.partitions"],
                    max(factor, 1),
                    {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
                )
            except ApiError as error:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, error.message) from None
        state = broker.metadata.partition_state(OFFSETS_TOPIC, self.partition_of(group_id))
        if state is None or state.leader < 0:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group's partition has no leader")
        return state.leader

    def check_owner(self, group_id: str) -> int:
        """Raise unless this broker coordinates ``group_id`` and has loaded its state."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        partition = self.partition_of(group_id)
        if self.broker.replicas.fenced:  # a zombie (session lost, or it stood still): its state may be old
            raise ApiError(ErrorCode.NOT_COORDINATOR, f"broker {self.broker.broker_id} is fenced")
        if partition in self.loading:
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if partition not in self.loaded:
            raise ApiError(
                ErrorCode.NOT_COORDINATOR, f"broker {self.broker.broker_id} does not coordinate {group_id}"
            )
        return partition

    def on_partitions_changed(self) -> None:
        """Start loading newly led __consumer_offsets partitions; drop state of lost ones."""
        led = {
            tp.partition
            for tp, partition in self.broker.replicas.partitions.items()
            if tp.topic == OFFSETS_TOPIC and partition.leader_id == self.broker.broker_id
        }
        for partition in sorted(led - self.loaded - self.loading):
            self.loading.add(partition)
            asyncio.get_running_loop().create_task(self._load(partition))
        for partition in (self.loaded | self.loading) - led:
            self.loaded.discard(partition)
            self.loading.discard(partition)
            dropped = [g for g in self.groups if self.partition_of(g) == partition]
            for group_id in dropped:
                self._unload(self.groups.pop(group_id))
            self.offsets.forget_groups(dropped)

    async def _load(self, partition: int) -> None:
        try:
            await asyncio.sleep(0)  # let the caller finish first
            tp = TopicPartition(OFFSETS_TOPIC, partition)
            plog = self.broker.replicas.partitions[tp].log
            offset = plog.log_start_offset
            count = 0
            while offset < plog.log_end_offset:
                data = plog.read_bytes(offset, READ_CHUNK)
                last = offset
                for batch in iter_batches(data, verify_crc=False):
                    header = batch.header
                    if header.is_control:  # a marker completes its producer's offset commits
                        self.offsets.apply_marker(partition, header.producer_id, batch.records)
                    else:
                        for record in batch.records:
                            self._apply(record.key, record.value, header)
                            count += 1
                    last = header.next_offset
                if last == offset:
                    break
                offset = last
                await asyncio.sleep(0)
            for group in self.groups.values():
                if self.partition_of(group.group_id) == partition:
                    for member in group.members.values():
                        self._schedule_expiry(group, member)
            self.loaded.add(partition)
            log.info("loaded %d records of %s", count, tp)
        except Exception:
            log.exception("loading __consumer_offsets partition %d failed", partition)
        finally:
            self.loading.discard(partition)

    def _apply(self, key: bytes | None, value: bytes | None, header: BatchHeader) -> None:
        if key is None:
            return
        try:
            parsed = decode_key(key)
            if isinstance(parsed, OffsetKey):
                producer_id = header.producer_id if header.is_transactional else None
                self.offsets.apply_record(parsed, value, header.base_offset, producer_id)
                return
            if value is None:
                self.groups.pop(parsed.group, None)
                return
            stored = decode_group_value(value)
            group = self.groups.setdefault(parsed.group, Group(parsed.group))
            group.protocol_type = stored.protocol_type
            group.generation_id = stored.generation
            group.protocol_name = stored.protocol
            group.leader_id = stored.leader
            group.state_timestamp = stored.current_state_timestamp
            group.members = {}
            group.static_members = {}
            for m in stored.members:
                protocols = [(stored.protocol or "", m.subscription)]
                member = Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout,
                    m.rebalance_timeout,
                    stored.protocol_type,
                    protocols,
                    m.assignment,
                )
                group.members[m.member_id] = member
                if m.group_instance_id:
                    group.static_members[m.group_instance_id] = m.member_id
            group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        except ValueError as error:
            log.warning("skipping a malformed __consumer_offsets record: %s", error)

    def _unload(self, group: Group) -> None:
        for member in group.members.values():
            member.cancel_expiry()
            self._fail_pending(member, ErrorCode.NOT_COORDINATOR)
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()

    # -- persistence ---------------------------------------------------------------------------
    async def wait_replicated(self, group_id: str, timeout: float = OFFSET_COMMIT_TIMEOUT) -> int:
        """Wait until everything written to ``group_id``'s __consumer_offsets partition so far is
        replicated (its high watermark reached the log end offset: acks=all semantics); the error code
        to answer an OffsetCommit with — NONE, NOT_COORDINATOR (leadership lost) or
        COORDINATOR_NOT_AVAILABLE (not enough replicas, timed out)."""
        replicas = self.broker.replicas
        if not replicas.replicated:
            return ErrorCode.NONE
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        partition = replicas.partitions.get(tp)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        code = await replicas.wait_for_replication(tp, partition.log_end_offset, timeout)
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if code != ErrorCode.NONE else ErrorCode.NONE

    def write(
        self,
        group_id: str,
        records: Iterable[tuple[bytes, bytes | None]],
        *,
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Append records to the group's __consumer_offsets partition; the offset of the batch, -1
        when there was nothing to write. ``producer`` (id, epoch): a transactional batch of that
        producer (TxnOffsetCommit), its epoch checked by the log. Raises ApiError:
        INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, else COORDINATOR_NOT_AVAILABLE."""
        if producer is None:
            builder = RecordBatchBuilder()
        else:
            builder = RecordBatchBuilder(
                producer_id=producer[0], producer_epoch=producer[1], base_sequence=0, is_transactional=True
            )
        now = self.broker.clock.time_ms()
        for key, value in records:
            builder.append(now, key, value)
        if not len(builder):
            return -1
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        try:
            info = self.broker.replicas.append(tp, builder.build(), from_coordinator=producer is not None)
        except ApiError as error:
            if error.code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_TXN_STATE):
                raise
            log.error("cannot write to %s: %s", tp, error.message)
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, error.message) from None
        return info.first_offset

    def _group_record(self, group: Group) -> tuple[bytes, bytes | None]:
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(group.protocol_name or ""),
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )
        return encode_group_key(GroupKey(group.group_id)), encode_group_value(value)

    # -- timers --------------------------------------------------------------------------------
    @staticmethod
    def _loop_time() -> float:
        return asyncio.get_running_loop().time()

    def _schedule_expiry(self, group: Group, member: Member) -> None:
        member.cancel_expiry()
        member.expiry = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._expire_member, group.group_id, member.member_id
        )

    def _expire_member(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        member = group.members[member_id]
        waiting = (member.join_future is not None and not member.join_future.done()) or (
            member.sync_future is not None and not member.sync_future.done()
        )
        if waiting:  # a member waiting for a rebalance to complete is alive (Kafka's awaiting join/sync)
            self._schedule_expiry(group, member)
            return
        log.info("member %s of group %s missed its session timeout; removing it", member_id, group_id)
        self._remove_member(group, group.members[member_id])
        self._after_membership_change(group)

    # -- membership ----------------------------------------------------------------------------
    def _fail_pending(self, member: Member, code: int) -> None:
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(code, member_id=member.member_id))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(code))
        member.join_future = member.sync_future = None

    def _remove_member(self, group: Group, member: Member) -> None:
        member.cancel_expiry()
        self._fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.members.pop(member.member_id, None)
        if (
            member.group_instance_id
            and group.static_members.get(member.group_instance_id) == member.member_id
        ):
            del group.static_members[member.group_instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _after_membership_change(self, group: Group) -> None:
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        elif group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, "membership changed")

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                if member.sync_future is not None and not member.sync_future.done():
                    member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_future = None
        loop = asyncio.get_running_loop()
        was_empty = group.state == GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        group.state_timestamp = self.broker.clock.time_ms()
        delay = group.rebalance_timeout_ms() / 1000
        if was_empty and self.initial_rebalance_delay_ms > 0:
            # a new group waits a little for more members before its first generation
            delay = self.initial_rebalance_delay_ms / 1000
            group.join_not_before = loop.time() + delay
        else:
            group.join_not_before = 0.0
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        group.rebalance_timer = loop.call_later(max(delay, 0.001), self._rebalance_deadline, group.group_id)
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation_id, reason)
        self._try_complete_join(group)

    def _rebalance_deadline(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state != GroupState.PREPARING_REBALANCE:
            return
        group.rebalance_timer = None
        if self._loop_time() < group.join_not_before:
            group.rebalance_timer = asyncio.get_running_loop().call_later(
                group.join_not_before - self._loop_time(), self._rebalance_deadline, group_id
            )
            return
        for member in [m for m in group.members.values() if m.join_future is None]:
            log.info("member %s of group %s did not rejoin in time; removing it", member.member_id, group_id)
            self._remove_member(group, member)
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if self._loop_time() < group.join_not_before:
            return
        if group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.state_timestamp = self.broker.clock.time_ms()
        if not group.members:
            group.generation_id += 1
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            with contextlib.suppress(ApiError):
                self.write(group.group_id, [self._group_record(group)])
            return
        group.generation_id += 1
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        everyone = [
            (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
            for m in group.members.values()
        ]
        for member in group.members.values():
            result = JoinResult(
                ErrorCode.NONE,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                group.leader_id or "",
                member.member_id,
                everyone if member.member_id == group.leader_id else [],
            )
            if member.join_future is not None and not member.join_future.done():
                member.join_future.set_result(result)
            member.join_future = None
            self._schedule_expiry(group, member)
        log.info(
            "group %s generation %d: %d member(s), protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )

    def _current_join_result(self, group: Group, member: Member) -> JoinResult:
        everyone = (
            [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name or ""))
                for m in group.members.values()
            ]
            if member.member_id == group.leader_id
            else []
        )
        return JoinResult(
            ErrorCode.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            member.member_id,
            everyone,
        )

    async def join_group(
        self, request: JoinGroupRequest, version: int, client_id: str, client_host: str
    ) -> JoinResult:
        group_id = request.group_id
        self.check_owner(group_id)
        log.debug(
            "JoinGroup of group %s from member %r (client %s at %s)",
            group_id,
            request.member_id,
            client_id,
            client_host,
        )
        session = request.session_timeout_ms
        if not self.min_session_timeout_ms <= session <= self.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=request.member_id)
        rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else session
        protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        group = self.groups.get(group_id)
        member_id = request.member_id
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, state_timestamp=self.broker.clock.time_ms())
        if group.state == GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports(request.protocol_type, [name for name, _ in protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        instance_id = request.group_instance_id if version >= 5 else None
        loop = asyncio.get_running_loop()

        if not member_id:
            if len(group.members) >= self.max_group_size:
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
            new_id = f"{instance_id or client_id or 'member'}-{uuid.uuid4()}"
            if instance_id and instance_id in group.static_members:
                return await self._replace_static_member(
                    group, instance_id, new_id, protocols, session, rebalance_timeout, version
                )
            if version >= 4 and not instance_id:
                group.pending_members.add(new_id)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
            group.pending_members.add(member_id)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            joining = Member(
                member_id,
                instance_id,
                client_id,
                client_host,
                session,
                rebalance_timeout,
                request.protocol_type,
                protocols,
            )
            if not group.members:
                group.protocol_type = request.protocol_type
            group.members[member_id] = joining
            if instance_id:
                group.static_members[instance_id] = member_id
            future = joining.join_future = loop.create_future()
            self._schedule_expiry(group, joining)
            if group.state == GroupState.PREPARING_REBALANCE:
                self._try_complete_join(group)
            else:
                self._prepare_rebalance(group, f"new member {member_id} joined")
            return await future
        member = group.members.get(member_id)
        if member is None:
            code = (
                ErrorCode.FENCED_INSTANCE_ID
                if instance_id in group.static_members
                else ErrorCode.UNKNOWN_MEMBER_ID
            )
            return JoinResult(code, member_id=member_id)
        if instance_id and group.static_members.get(instance_id) != member_id:
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms, member.rebalance_timeout_ms = session, rebalance_timeout
        member.client_id, member.client_host = client_id, client_host
        self._schedule_expiry(group, member)
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member_id))
        future = member.join_future = loop.create_future()
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        elif not changed and (
            group.state == GroupState.COMPLETING_REBALANCE
            or (group.state == GroupState.STABLE and member_id != group.leader_id)
        ):
            member.join_future = None
            return self._current_join_result(group, member)
        else:
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await future

    async def _replace_static_member(
        self,
        group: Group,
        instance_id: str,
        new_id: str,
        protocols: list[tuple[str, bytes]],
        session: int,
        rebalance_timeout: int,
        version: int,
    ) -> JoinResult:
        old = group.members[group.static_members[instance_id]]
        previous_id = old.member_id
        self._fail_pending(old, ErrorCode.FENCED_INSTANCE_ID)
        old.cancel_expiry()
        del group.members[old.member_id]
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        was_leader = group.leader_id == previous_id
        if group.leader_id not in group.members:
            group.leader_id = new_id
        changed = old.protocols != protocols
        old.protocols, old.session_timeout_ms, old.rebalance_timeout_ms = (
            protocols,
            session,
            rebalance_timeout,
        )
        self._schedule_expiry(group, old)
        if group.state == GroupState.STABLE and not changed:
            try:
                self.write(group.group_id, [self._group_record(group)])
            except ApiError as error:
                return JoinResult(error.code, member_id=new_id)
            result = self._current_join_result(group, old)
            # a replaced static leader keeps the current assignment: from JoinGroup v9 it gets the
            # members with skip_assignment (KIP-814), before that an empty member list
            result.skip_assignment = bool(result.members) and version >= SKIP_ASSIGNMENT_VERSION
            if not result.skip_assignment:
                result.members = []
                if was_leader:  # before v9 Kafka names the old incarnation, so the member acts as a follower
                    result.leader = previous_id
            return result
        future = old.join_future = asyncio.get_running_loop().create_future()
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined")
        return await future

    def current_member(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> tuple[Group, Member]:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        member = group.members.get(member_id)
        if member is None:
            if instance_id and instance_id in group.static_members:
                raise ApiError(ErrorCode.FENCED_INSTANCE_ID)
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        if instance_id and group.static_members.get(instance_id) != member_id:
            raise ApiError(ErrorCode.FENCED_INSTANCE_ID)
        if generation != group.generation_id:
            raise ApiError(ErrorCode.ILLEGAL_GENERATION)
        return group, member

    async def sync_group(self, request: SyncGroupRequest, version: int) -> SyncResult:
        self.check_owner(request.group_id)
        instance_id = request.group_instance_id if version >= 3 else None
        group, member = self.current_member(
            request.group_id, request.member_id, instance_id, request.generation_id
        )
        if version >= 5 and (
            (request.protocol_type is not None and request.protocol_type != group.protocol_type)
            or (request.protocol_name is not None and request.protocol_name != group.protocol_name)
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == GroupState.STABLE:
            self._schedule_expiry(group, member)
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        future = member.sync_future = asyncio.get_running_loop().create_future()
        self._schedule_expiry(group, member)
        if member.member_id == group.leader_id:
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            try:
                self.write(group.group_id, [self._group_record(group)])
            except ApiError as error:
                for each in group.members.values():
                    each.assignment = b""
                self._prepare_rebalance(group, "could not store the assignment")
                return SyncResult(error.code)
            group.state = GroupState.STABLE
            group.state_timestamp = self.broker.clock.time_ms()
            for each in group.members.values():
                if each.sync_future is not None and not each.sync_future.done():
                    each.sync_future.set_result(
                        SyncResult(ErrorCode.NONE, each.assignment, group.protocol_type, group.protocol_name)
                    )
                each.sync_future = None
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        return await future

    def heartbeat(self, request: HeartbeatRequest, version: int) -> int:
        self.check_owner(request.group_id)
        instance_id = request.group_instance_id if version >= 3 else None
        group = self.groups.get(request.group_id)
        if group is not None and group.state == GroupState.EMPTY:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        group, member = self.current_member(
            request.group_id, request.member_id, instance_id, request.generation_id
        )
        self._schedule_expiry(group, member)
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> list[int]:
        """Remove (member id, instance id) pairs; returns an error code per pair."""
        self.check_owner(group_id)
        group = self.groups.get(group_id)
        codes: list[int] = []
        for member_id, instance_id in members:
            if group is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if instance_id:
                known = group.static_members.get(instance_id)
                if known is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            member = group.members.get(member_id)
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s left group %s", member_id, group_id)
            self._remove_member(group, member)
            codes.append(ErrorCode.NONE)
        if group is not None and any(code == ErrorCode.NONE for code in codes):
            self._after_membership_change(group)
        return codes

    # -- groups --------------------------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None) -> list[Group]:
        return [
            g
            for g_id, g in sorted(self.groups.items())
            if self.partition_of(g_id) in self.loaded and (not states or g.state.value in states)
        ]

    def describe_group(self, group_id: str) -> Group | None:
        self.check_owner(group_id)
        return self.groups.get(group_id)

    def delete_group(self, group_id: str) -> int:
        self.check_owner(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members or group.state not in (GroupState.EMPTY,):
            return ErrorCode.NON_EMPTY_GROUP
        records = [(encode_offset_key(OffsetKey(group_id, t, p)), None) for (t, p) in group.offsets]
        records.append((encode_group_key(GroupKey(group_id)), None))
        self.write(group_id, records)
        group.state = GroupState.DEAD
        del self.groups[group_id]
        return ErrorCode.NONE
