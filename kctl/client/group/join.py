"""Joining and leaving a group. A join round runs in a helper thread: JoinGroup (answering
MEMBER_ID_REQUIRED), the leader's assignment (decode the subscriptions, read the topics' partition
counts, run the assignor), then SyncGroup; retried with backoff until it works, is cancelled, or
fails for good. Leaving is one LeaveGroup.

``GroupJoiner`` is the membership's collaborator for this: built with the cluster (metadata for the
leader's assignment), the group's settings and assignors, the ``CoordinatorChannel`` and the
``Member``. It updates the member's id and generation as the coordinator hands them out and returns
the round's outcome as a ``JoinResult``; what the new assignment means for the consumer is the
caller's (``rebalance.Rebalancer``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import random
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.consumer_protocol import PROTOCOL_TYPE, Assignment, ConsumerProtocolError, Subscription
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.assignors import Assignor, GroupMember
from kctl.client.group.coordinator import COORDINATOR_ERRORS, CoordinatorChannel
from kctl.client.group.member import Member
from kctl.client.group.state import (
    FATAL_JOIN_ERRORS,
    JOIN_TIMEOUT_LAPSE,
    MEMBERSHIP_ERRORS,
    GroupMembershipError,
    JoinCancelled,
    JoinResult,
    Partitions,
    in_group,
)
from kctl.client.group_config import GroupConfig
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kctl.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kctl.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

log = logging.getLogger("kctl.client.group.membership")


@dataclass(frozen=True)
class LeaderAssignment:
    """The leader's assignment: each member's encoded ``Assignment``, and the partition count of
    every topic the group subscribes to (watched for changes)."""

    assignments: dict[str, bytes]
    partition_counts: dict[str, int]


class GroupJoiner:
    """The JoinGroup/SyncGroup rounds and the LeaveGroup of one member (see the module docstring).

    ``start`` runs a round in a helper thread, ``wait`` collects its outcome, ``cancel`` stops it;
    ``join`` is the round itself, retried until it works (blocking)."""

    def __init__(
        self,
        cluster: ClusterClient,
        config: GroupConfig,
        channel: CoordinatorChannel,
        member: Member,
        assignors: list[Assignor] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.channel = channel
        self.member = member
        self.group_id = member.group_id
        self.assignors: list[Assignor] = config.assignors if assignors is None else assignors
        self._future: concurrent.futures.Future[JoinResult] | None = None
        self._cancel = threading.Event()

    # ------------------------------------------------------------------------------ the helper thread

    @property
    def in_progress(self) -> bool:
        """Whether a round was started and its outcome not collected yet."""
        return self._future is not None

    def start(
        self,
        topics: tuple[str, ...],
        owned: Partitions,
        previous: Partitions,
        previous_generation: int,
        *,
        reason: str | None,
    ) -> None:
        """Start a round in a helper thread (``join``'s arguments); ``wait`` collects its outcome."""
        future: concurrent.futures.Future[JoinResult] = concurrent.futures.Future()
        self._future = future
        future.set_running_or_notify_cancel()
        cancel = self._cancel = threading.Event()

        def run() -> None:
            try:
                future.set_result(
                    self.join(topics, owned, previous, previous_generation, reason=reason, cancel=cancel)
                )
            except BaseException as error:  # handed to wait
                future.set_exception(error)

        thread = threading.Thread(target=run, name=f"kctl-group-join-{self.group_id}", daemon=True)
        thread.start()

    def wait(self, timeout: float) -> JoinResult | None:
        """The outcome of the round under way, waiting at most ``timeout`` seconds: its
        ``JoinResult``, or None while it goes on. A round that ended (with a result, cancelled:
        ``JoinCancelled``, or failed: its error, raised) is collected: ``in_progress`` turns false."""
        future = self._future
        if future is None:
            return None
        try:
            result = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            return None
        except BaseException:
            self._future = None
            raise
        self._future = None
        return result

    def cancel(self) -> None:
        """Stop the round under way, if any, and forget it."""
        future, self._future = self._future, None
        if future is None or future.done():
            return
        # a join under way holds a connection in a long wait: wake it up and let it go
        self._cancel.set()
        self.channel.close_purpose("join")
        with contextlib.suppress(Exception):
            future.result(timeout=self.config.request_timeout)

    # ------------------------------------------------------------------------------ the round

    def _protocols(
        self, topics: tuple[str, ...], owned: Partitions, previous: Partitions, previous_generation: int
    ) -> list[JoinGroupRequestProtocol]:
        out = []
        for assignor in self.assignors:
            subscription = Subscription(
                topics=topics,
                user_data=assignor.subscription_user_data(sorted(previous), previous_generation),
                owned_partitions=tuple(sorted(owned)),
                generation_id=previous_generation if owned else -1,
                rack_id=self.config.client_rack,
            )
            out.append(JoinGroupRequestProtocol(name=assignor.name, metadata=subscription.encode()))
        return out

    def _join_timeout(self) -> float:
        return max(self.config.request_timeout, self.config.max_poll_interval_ms / 1000 + JOIN_TIMEOUT_LAPSE)

    def _backoff(self, attempt: int, cancel: threading.Event) -> None:
        base = self.config.retry_backoff_ms / 1000
        wait = min(base * (2 ** min(attempt, 10)), self.config.retry_backoff_max_ms / 1000)
        if cancel.wait(wait * random.uniform(0.8, 1.2)):
            raise JoinCancelled()

    def join(
        self,
        topics: tuple[str, ...],
        owned: Partitions,
        previous: Partitions,
        previous_generation: int,
        *,
        reason: str | None,
        cancel: threading.Event,
    ) -> JoinResult:
        """JoinGroup + SyncGroup until it works, the join is cancelled, or a fatal error."""
        attempt = 0
        while True:
            if cancel.is_set():
                raise JoinCancelled()
            try:
                result = self._join_once(topics, owned, previous, previous_generation, reason)
            except BrokerResponseError as error:
                if error.code in FATAL_JOIN_ERRORS:
                    raise GroupMembershipError(in_group(self.group_id, error)) from error
                if error.code in COORDINATOR_ERRORS:
                    self.channel.invalidate()
                elif (
                    error.code not in MEMBERSHIP_ERRORS
                    and error.code != ErrorCode.MEMBER_ID_REQUIRED
                    and not error.retriable
                ):
                    raise GroupMembershipError(in_group(self.group_id, error)) from error
                log.info("group %s: join attempt %d: %s", self.group_id, attempt + 1, error)
            except KafkaError as error:
                if cancel.is_set():
                    raise JoinCancelled() from None
                if not error.retriable:
                    raise
                log.info("group %s: join attempt %d: %s", self.group_id, attempt + 1, error)
            else:
                return result
            if cancel.is_set():
                raise JoinCancelled()
            attempt += 1
            self._backoff(attempt, cancel)

    def _join_once(
        self,
        topics: tuple[str, ...],
        owned: Partitions,
        previous: Partitions,
        previous_generation: int,
        reason: str | None,
    ) -> JoinResult:
        config = self.config
        deadline = Deadline(config.default_api_timeout)
        protocols = self._protocols(topics, owned, previous, previous_generation)
        instance_id = config.group_instance_id
        for _handshake in range(3):
            member_id = self.member.member_id

            def join_request(version: int, member_id: str = member_id) -> JoinGroupRequest:
                return JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=config.session_timeout_ms,
                    rebalance_timeout_ms=config.max_poll_interval_ms,
                    member_id=member_id,
                    group_instance_id=instance_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=protocols,
                    reason=reason,
                )

            min_version = 5 if instance_id else None
            response = self.channel.request(
                "join",
                ApiKey.JOIN_GROUP,
                join_request,
                deadline=deadline,
                timeout=self._join_timeout(),
                min_version=min_version,
            ).body
            code = response.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                with self.member.lock:
                    self.member.member_id = response.member_id
                continue
            self.member.reset_generation(code)
            if code:
                raise BrokerResponseError(code, context=f"JoinGroup of group {self.group_id!r}")
            break
        else:
            raise BrokerResponseError(
                ErrorCode.MEMBER_ID_REQUIRED, context="JoinGroup kept asking for a member id"
            )
        with self.member.lock:
            self.member.member_id = response.member_id
            self.member.generation_id = response.generation_id
            self.member.leader_id = response.leader
        protocol = response.protocol_name or ""
        group_topics: dict[str, int] | None = None
        assignments: list[SyncGroupRequestAssignment] = []
        if response.leader == response.member_id:
            if getattr(response, "skip_assignment", False) or not response.members:
                # a static leader rejoining a stable group keeps the current assignment (KIP-814);
                # it still watches the topics it knows of for partition changes
                group_topics = partition_counts(self.cluster, self.config, topics, deadline)
            else:
                leader = self._leader_assign(protocol, response.members, deadline)
                group_topics = leader.partition_counts
                assignments = [
                    SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in leader.assignments.items()
                ]

        def sync_request(version: int) -> SyncGroupRequest:
            return SyncGroupRequest(
                group_id=self.group_id,
                generation_id=response.generation_id,
                member_id=response.member_id,
                group_instance_id=instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=protocol,
                assignments=assignments,
            )

        sync = self.channel.request(
            "join", ApiKey.SYNC_GROUP, sync_request, deadline=deadline, timeout=self._join_timeout()
        ).body
        if sync.error_code:
            self.member.reset_generation(sync.error_code)
            raise BrokerResponseError(sync.error_code, context=f"SyncGroup of group {self.group_id!r}")
        try:
            assignment = Assignment.decode(sync.assignment)
        except ConsumerProtocolError as error:
            raise GroupMembershipError(f"group {self.group_id!r}: undecodable assignment: {error}") from None
        return JoinResult(
            generation=response.generation_id,
            member_id=response.member_id,
            protocol=protocol,
            leader=response.leader,
            assignment=frozenset(assignment.partitions),
            group_topics=group_topics,
        )

    def _leader_assign(
        self, protocol: str, members: list[Any], deadline: Deadline
    ) -> LeaderAssignment:
        """The leader's work: decode the subscriptions, read the topics' metadata, run the assignor."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise GroupMembershipError(
                f"group {self.group_id!r} chose assignor {protocol!r}, which kctl lacks"
            )
        group_members = []
        for m in members:
            try:
                subscription = Subscription.decode(m.metadata)
            except ConsumerProtocolError as error:
                log.warning(
                    "group %s: member %s: bad subscription (%s); assigning it nothing",
                    self.group_id,
                    m.member_id,
                    error,
                )
                subscription = Subscription(topics=(), version=0)
            group_members.append(GroupMember(m.member_id, subscription, m.group_instance_id))
        topics = sorted({t for gm in group_members for t in gm.subscription.topics})
        counts = partition_counts(self.cluster, self.config, topics, deadline)
        result = assignor.assign(counts, group_members)
        version = max(0, min([gm.subscription.version for gm in group_members] + [3]))
        encoded = {
            member_id: Assignment(tuple(parts), None, version).encode() for member_id, parts in result.items()
        }
        log.info(
            "group %s: leader assigned %d partitions of %d topics to %d members with %s",
            self.group_id,
            sum(len(p) for p in result.values()),
            len(counts),
            len(group_members),
            protocol,
        )
        return LeaderAssignment(encoded, counts)

    # ------------------------------------------------------------------------------ leaving

    def leave(self, member_id: str, purpose: str, reason: str) -> None:
        """LeaveGroup for ``member_id`` (a static member: for its ``group.instance.id``) over the
        ``purpose`` connection; failures are logged, not raised (the session times out anyway)."""
        if not member_id and not self.config.group_instance_id:
            return
        instance_id = self.config.group_instance_id

        def build(version: int) -> LeaveGroupRequest:
            if version >= 3:
                return LeaveGroupRequest(
                    group_id=self.group_id,
                    members=[
                        MemberIdentity(member_id=member_id, group_instance_id=instance_id, reason=reason)
                    ],
                )
            return LeaveGroupRequest(group_id=self.group_id, member_id=member_id)

        try:
            response = self.channel.request(
                purpose,
                ApiKey.LEAVE_GROUP,
                build,
                deadline=Deadline(min(self.config.request_timeout, self.config.default_api_timeout)),
                min_version=3 if instance_id else None,
            ).body
            codes = [response.error_code, *(m.error_code for m in getattr(response, "members", None) or [])]
            if any(codes):
                log.info("group %s: LeaveGroup: %s", self.group_id, BrokerResponseError(max(codes)).name)
            else:
                log.info("group %s: member %s left the group", self.group_id, member_id or instance_id)
        except KafkaError as error:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, error)


def partition_counts(
    cluster: ClusterClient, config: GroupConfig, topics: Collection[str], deadline: Deadline
) -> dict[str, int]:
    """The partition count of each of ``topics`` (0 for one that does not exist, yet), from fresh
    metadata: what the leader assigns, and what it watches for changes."""
    if not topics:
        return {}
    metadata = cluster.retry(
        lambda: cluster.refresh_metadata(
            topics, allow_auto_create=config.allow_auto_create_topics, deadline=deadline
        ),
        deadline=deadline,
        description="metadata for the assignment",
    )
    counts = {}
    for name in topics:  # a topic that does not exist (yet) counts 0: its creation shows
        topic = metadata.topic(name)
        ok = topic is not None and not topic.error_code
        counts[name] = len(topic.partitions) if ok and topic is not None else 0
    return counts

