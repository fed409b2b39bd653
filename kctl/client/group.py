"""Consumer-group membership: the client side of Kafka's classic group protocol for consumers.

``GroupMembership`` joins a group, takes part in its rebalances, heartbeats, commits and fetches
committed offsets. The consumer drives it from its own ``poll``::

    membership = GroupMembership(cluster, "billing", {"session.timeout.ms": "10000"},
                                 on_assign=..., on_revoke=..., on_lost=...,
                                 positions=consumer_positions)
    membership.subscribe(["orders"])                  # or pattern="orders-.*", exclude="orders-test"
    while running:
        changed = membership.poll(timeout)           # None, or the new assignment (a frozenset)
        ...fetch from membership.assignment...
    membership.commit()                              # the positions, or commit({tp: offset})
    membership.close()                               # auto-commit, on_revoke, LeaveGroup

What ``poll`` does, in the caller's thread (callbacks run there too):

* finds the coordinator (FindCoordinator) and joins: JoinGroup (answering MEMBER_ID_REQUIRED by
  joining again with the id the coordinator gave), then SyncGroup. The leader runs the assignor
  the group agreed on over the members' subscriptions, with fresh metadata for their topics. The
  network part runs in a helper thread, so ``poll(timeout)`` waits at most ``timeout`` and several
  members can be polled from one thread;
* on the eager protocol (``range``, ``roundrobin``, ``sticky``) it first commits the positions (with
  auto commit), calls ``on_revoke(all partitions)`` and gives them all up; on the cooperative one
  (``cooperative-sticky``) members keep their partitions, ``on_revoke`` gets only those that move,
  and a member that gave some up rejoins at once so the next rebalance can place them;
* after a rebalance it calls ``on_assign(partitions added)`` and returns the new assignment;
* when the member was thrown out (session timeout, ``max.poll.interval.ms`` passed without a poll,
  UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION) it calls ``on_lost(partitions)`` (default: ``on_revoke``)
  — no commit is possible then — and joins again;
* with a pattern, it re-reads the topic list every ``metadata.max.age.ms`` and rejoins when the
  matching topics change (topics created later are picked up); the leader rejoins when the partition
  count of a topic of the group changes;
* auto commit (``enable.auto.commit``) commits ``positions()`` every ``auto.commit.interval.ms``,
  before every eager revocation and on close.

A heartbeat thread sends Heartbeat every ``heartbeat.interval.ms`` (also while a rebalance is under
way, which keeps the member's session alive) and notices rebalances and expulsions; it leaves the
group when ``poll`` has not been called for ``max.poll.interval.ms``.

Static membership: with ``group.instance.id`` a member that restarts within ``session.timeout.ms``
gets its partitions back without a rebalance; ``close`` then does not leave the group (as Kafka's
consumer), unless told to.

Group requests use connections of their own to the coordinator (``CoordinatorChannel``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import functools
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.client.assignors import Assignor, GroupMember, RebalanceProtocol
from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig
from kctl.client.consumer_protocol import PROTOCOL_TYPE, Assignment, ConsumerProtocolError, Subscription
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group_config import GroupConfig, coerce_group_config
from kctl.client.group_coordinator import (
    COORDINATOR_ERRORS,
    CoordinatorChannel,
    OffsetAndMetadata,
    as_offset,
    offset_commit_request,
    offset_commit_results,
    offset_fetch_request,
    offset_fetch_results,
)
from kctl.client.types import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.heartbeat import HeartbeatRequest
from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kctl.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kctl.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

log = logging.getLogger(__name__)

CLOSE_JOIN_WAIT = 5.0
"""Seconds ``close`` waits for a rebalance under way before leaving (unless given a timeout)."""
JOIN_TIMEOUT_LAPSE = 5.0
"""Seconds a JoinGroup/SyncGroup may take beyond the rebalance timeout (Kafka's lapse)."""
FATAL_JOIN_ERRORS = frozenset(
    {
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
"""JoinGroup/SyncGroup/Heartbeat errors that end the membership: ``poll`` raises them."""
MEMBERSHIP_ERRORS = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS}
)

Partitions = frozenset[TopicPartition]
Callback = Callable[[Partitions], Any]
PositionsProvider = Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]]


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    """Not a member: never joined, left, or thrown out."""
    JOINING = "joining"
    """A JoinGroup/SyncGroup round is under way."""
    STABLE = "stable"
    """Member of the current generation, with an assignment."""


class GroupMembershipError(KafkaError):
    """The membership cannot go on (e.g. FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL)."""


class CommitFailedError(KafkaError):
    """A commit failed. ``errors``: partition -> BrokerResponseError for each failed partition."""

    def __init__(
        self, message: str, errors: Mapping[TopicPartition, BrokerResponseError] | None = None
    ) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})
        self.retriable = bool(self.errors) and all(e.retriable for e in self.errors.values())


@dataclass(frozen=True)
class JoinResult:
    """The outcome of one JoinGroup + SyncGroup round."""

    generation: int
    member_id: str
    protocol: str
    leader: str
    assignment: Partitions
    group_topics: dict[str, int] | None
    """For the leader: the partition count of every topic the group subscribes to."""


class _Closed(Exception):
    """The membership was closed while a join was under way."""


def _topic_matcher(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


class GroupMembership:
    """One consumer's membership in a group; see the module docstring.

    ``cluster``: the consumer's ``ClusterClient`` (metadata, FindCoordinator); ``config``: a
    ``GroupConfig``, Kafka consumer properties or another ``ClientConfig`` (``group.id`` there is
    ignored: ``group_id`` says it). ``positions()``: the consumer's positions to commit (the offset
    of the next record the application will get, per assigned partition) for auto commit and for
    ``commit()`` without offsets."""

    def __init__(
        self,
        cluster: ClusterClient,
        group_id: str,
        config: ClientConfig | Mapping[str, str] | None = None,
        *,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
        positions: PositionsProvider | None = None,
        **overrides: Any,
    ) -> None:
        if not group_id:
            raise ValueError("a group id is required")
        self.cluster = cluster
        self.group_id = group_id
        self.config: GroupConfig = coerce_group_config(config, group_id=group_id, **overrides)
        self.assignors: list[Assignor] = self.config.assignors
        self.protocol = self.config.rebalance_protocol
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.on_lost = on_lost
        self.positions = positions
        self.channel = CoordinatorChannel(cluster, group_id)

        self._lock = threading.RLock()
        self._state = MemberState.UNJOINED
        self._member_id = ""
        self._generation = -1
        self._protocol_name: str | None = None
        self._leader_id = ""
        self._assignment: Partitions = frozenset()
        self._previous: tuple[Partitions, int] = (frozenset(), -1)  # sticky user data (eager)
        self._rejoin_reason: str | None = None
        self._lost_reason: str | None = None
        self._fatal: KafkaError | None = None
        self._closed = False
        self._closing = threading.Event()

        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._exclude: re.Pattern[str] | None = None
        self._subscribed: frozenset[str] = frozenset()
        self._subscribed_flag = False
        self._group_topics: dict[str, int] | None = None
        self._next_metadata_check = 0.0

        self._join_future: concurrent.futures.Future[JoinResult] | None = None
        self._last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._commit_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._completed_commits: list[tuple[Callable[..., Any], Any, BaseException | None]] = []
        self._pending_commits: set[concurrent.futures.Future[Any]] = set()
        self._callback_error: BaseException | None = None
        self._join_reason: str | None = None
        self._join_cancel = threading.Event()

        self._heartbeat_wakeup = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------ properties

    def __repr__(self) -> str:
        return (
            f"<GroupMembership {self.group_id!r} {self._state.value} member {self._member_id or '-'} "
            f"generation {self._generation}, {len(self._assignment)} partitions>"
        )

    @property
    def member_id(self) -> str:
        return self._member_id

    @property
    def generation_id(self) -> int:
        return self._generation

    @property
    def group_instance_id(self) -> str | None:
        return self.config.group_instance_id

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def assignment(self) -> Partitions:
        """The partitions this member holds now."""
        return self._assignment

    @property
    def assignor(self) -> str | None:
        """The assignor (protocol name) of the current generation."""
        return self._protocol_name

    @property
    def is_leader(self) -> bool:
        return bool(self._member_id) and self._member_id == self._leader_id

    @property
    def subscription(self) -> frozenset[str]:
        """The topics subscribed to now (for a pattern: those matching at the last check)."""
        return self._subscribed

    @property
    def subscribed(self) -> bool:
        return self._subscribed_flag

    @property
    def rebalance_in_progress(self) -> bool:
        return self._state is MemberState.JOINING or self._rejoin_reason is not None

    # ------------------------------------------------------------------------------ subscription

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | re.Pattern[str] | None = None,
        exclude: str | re.Pattern[str] | None = None,
    ) -> None:
        """Subscribe to topics by name, or to every topic whose whole name matches ``pattern`` (and
        not ``exclude``); replaces an earlier subscription. Takes effect at the next ``poll``."""
        names = tuple(dict.fromkeys(t for t in topics if t))
        if pattern is not None and names:
            raise ValueError("subscribe to topic names or to a pattern, not both")
        if pattern is None and exclude is not None:
            raise ValueError("exclude goes with a pattern")
        if pattern is None and not names:
            raise ValueError("no topic to subscribe to")
        with self._lock:
            self._check_open()
            self._topics = names
            self._pattern = _topic_matcher(pattern)
            self._exclude = _topic_matcher(exclude)
            self._subscribed_flag = True
            self._next_metadata_check = 0.0
            if self._pattern is None:
                self._set_subscribed(frozenset(names), "subscription changed")
            else:
                self._request_rejoin("subscription changed")

    def unsubscribe(self) -> None:
        """Give up the partitions (``on_revoke``) and leave the group."""
        with self._lock:
            self._check_open()
        self._give_up_all(leave=True)
        with self._lock:
            self._subscribed_flag = False
            self._topics = ()
            self._pattern = self._exclude = None
            self._subscribed = frozenset()
            self._rejoin_reason = None

    def _set_subscribed(self, topics: frozenset[str], reason: str) -> None:
        if topics != self._subscribed or self._state is MemberState.UNJOINED:
            self._subscribed = topics
            self._request_rejoin(reason)

    def request_rejoin(self, reason: str = "requested") -> None:
        """Rejoin the group at the next ``poll`` (a new rebalance)."""
        with self._lock:
            self._request_rejoin(reason)

    def _request_rejoin(self, reason: str) -> None:
        if self._rejoin_reason is None:
            self._rejoin_reason = reason

    def _check_open(self) -> None:
        if self._closed:
            raise GroupMembershipError(f"the membership in group {self.group_id!r} is closed")

    # ------------------------------------------------------------------------------ poll

    def poll(self, timeout: float = 0.0) -> Partitions | None:
        """Do the group work due now (see the module docstring), waiting at most ``timeout``
        seconds for a rebalance under way to finish. Returns the new assignment when it changed
        during this call, else None. Raises ``GroupMembershipError`` when the membership cannot go
        on, and the first exception a callback raised."""
        self._check_open()
        if self._fatal is not None:
            raise self._fatal
        self._last_poll = time.monotonic()
        deadline = time.monotonic() + max(timeout, 0.0)
        changed = False
        self._run_commit_callbacks()
        if self._subscribed_flag:
            self._ensure_heartbeat_thread()
            self._check_metadata()
            while True:
                future = self._join_future
                if future is not None:
                    try:
                        result = future.result(timeout=max(deadline - time.monotonic(), 0.0))
                    except concurrent.futures.TimeoutError:
                        break
                    except _Closed:
                        self._join_future = None
                        break
                    except Exception as error:
                        self._join_future = None
                        with self._lock:
                            self._state = MemberState.UNJOINED
                            if isinstance(error, KafkaError):
                                self._fatal = error
                        raise
                    self._join_future = None
                    changed |= self._complete_join(result)
                    continue
                if self._lost_reason is not None:
                    changed |= self._lose_partitions()
                if self._rejoin_reason is not None or self._state is MemberState.UNJOINED:
                    changed |= self._prepare_join()
                    self._start_join()
                    continue
                break
        self._maybe_auto_commit()
        self._raise_callback_error()
        return self._assignment if changed else None

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error

    def _invoke(self, callback: Callback | None, partitions: Partitions, what: str) -> None:
        if callback is None:
            return
        try:
            callback(partitions)
        except Exception as error:  # a user callback: report it from poll, after the state is right
            log.error("group %s: %s callback raised %r", self.group_id, what, error)
            if self._callback_error is None:
                self._callback_error = error

    def _prepare_join(self) -> bool:
        """Before joining: eager members commit and give up everything; cooperative members give up
        only partitions of topics they no longer subscribe to. Returns whether the assignment
        changed."""
        with self._lock:
            reason = self._rejoin_reason or "joining"
            self._rejoin_reason = None
        log.info("group %s: (re)joining: %s", self.group_id, reason)
        self._join_reason = reason
        if not self._assignment:
            return False
        if self.protocol is RebalanceProtocol.EAGER:
            self._commit_before_revoke()
            revoked = self._assignment
            with self._lock:
                self._previous = (revoked, self._generation)
                self._assignment = frozenset()
            self._invoke(self.on_revoke, revoked, "on_revoke")
            return True
        gone = frozenset(tp for tp in self._assignment if tp.topic not in self._subscribed)
        if not gone:
            return False
        self._commit_before_revoke(gone)
        with self._lock:
            self._assignment = self._assignment - gone
        self._invoke(self.on_revoke, gone, "on_revoke")
        return True

    def _lose_partitions(self) -> bool:
        with self._lock:
            reason, self._lost_reason = self._lost_reason, None
            lost = self._assignment
            self._assignment = frozenset()
            self._previous = (frozenset(), -1)
            self._state = MemberState.UNJOINED
            self._request_rejoin(f"lost the membership: {reason}")
        if not lost:
            return False
        log.warning("group %s: lost partitions %s: %s", self.group_id, _show(lost), reason)
        self._invoke(self.on_lost or self.on_revoke, lost, "on_lost")
        return True

    def _start_join(self) -> None:
        with self._lock:
            self._state = MemberState.JOINING
            owned = self._assignment
            previous, previous_generation = self._previous
            if self.protocol is RebalanceProtocol.COOPERATIVE:
                previous, previous_generation = owned, self._generation
            snapshot = (tuple(sorted(self._subscribed)), owned, previous, previous_generation)
        future: concurrent.futures.Future[JoinResult] = concurrent.futures.Future()
        self._join_future = future
        future.set_running_or_notify_cancel()
        reason = self._join_reason
        cancel = self._join_cancel = threading.Event()

        def run() -> None:
            try:
                future.set_result(self._join(*snapshot, reason=reason, cancel=cancel))
            except BaseException as error:  # handed to poll
                future.set_exception(error)

        thread = threading.Thread(target=run, name=f"kctl-group-join-{self.group_id}", daemon=True)
        thread.start()
        self._heartbeat_wakeup.set()

    def _complete_join(self, result: JoinResult) -> bool:
        new = result.assignment
        with self._lock:
            old = self._assignment
            self._state = MemberState.STABLE
            self._generation = result.generation
            self._member_id = result.member_id
            self._protocol_name = result.protocol
            self._leader_id = result.leader
            self._group_topics = result.group_topics
            self._previous = (new, result.generation)
        log.info(
            "group %s: generation %d, member %s%s, assigned %s",
            self.group_id,
            result.generation,
            result.member_id,
            " (leader)" if result.member_id == result.leader else "",
            _show(new),
        )
        revoked = old - new
        added = new - old
        if revoked:  # cooperative: what moves elsewhere is given up now, and we rejoin for the rest
            self._commit_before_revoke(revoked)
            with self._lock:
                self._assignment = old - revoked
            self._invoke(self.on_revoke, revoked, "on_revoke")
            with self._lock:
                self._request_rejoin("partitions were revoked in a cooperative rebalance")
        with self._lock:
            self._assignment = new
        self._invoke(self.on_assign, added, "on_assign")
        return bool(revoked or added)

    # ------------------------------------------------------------------------------ joining (helper thread)

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
            raise _Closed()

    def _join(
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
                raise _Closed()
            try:
                result = self._join_once(topics, owned, previous, previous_generation, reason)
            except BrokerResponseError as error:
                if error.code in FATAL_JOIN_ERRORS:
                    raise GroupMembershipError(f"group {self.group_id!r}: {error}") from error
                if error.code in COORDINATOR_ERRORS:
                    self.channel.invalidate()
                elif (
                    error.code not in MEMBERSHIP_ERRORS
                    and error.code != ErrorCode.MEMBER_ID_REQUIRED
                    and not error.retriable
                ):
                    raise GroupMembershipError(f"group {self.group_id!r}: {error}") from error
                log.info("group %s: join attempt %d: %s", self.group_id, attempt + 1, error)
            except KafkaError as error:
                if cancel.is_set():
                    raise _Closed() from None
                if not error.retriable:
                    raise
                log.info("group %s: join attempt %d: %s", self.group_id, attempt + 1, error)
            else:
                return result
            if cancel.is_set():
                raise _Closed()
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
            member_id = self._member_id

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
            _, response = self.channel.request(
                "join",
                ApiKey.JOIN_GROUP,
                join_request,
                deadline=deadline,
                timeout=self._join_timeout(),
                min_version=min_version,
            )
            code = response.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                with self._lock:
                    self._member_id = response.member_id
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                with self._lock:
                    self._member_id, self._generation = "", -1
            elif code == ErrorCode.ILLEGAL_GENERATION:
                with self._lock:
                    self._generation = -1
            if code:
                raise BrokerResponseError(code, context=f"JoinGroup of group {self.group_id!r}")
            break
        else:
            raise BrokerResponseError(
                ErrorCode.MEMBER_ID_REQUIRED, context="JoinGroup kept asking for a member id"
            )
        with self._lock:
            self._member_id = response.member_id
            self._generation = response.generation_id
            self._leader_id = response.leader
        protocol = response.protocol_name or ""
        group_topics: dict[str, int] | None = None
        assignments: list[SyncGroupRequestAssignment] = []
        if response.leader == response.member_id:
            if getattr(response, "skip_assignment", False) or not response.members:
                # a static leader rejoining a stable group keeps the current assignment (KIP-814);
                # it still watches the topics it knows of for partition changes
                group_topics = self._partition_counts(topics, deadline)
            else:
                encoded, group_topics = self._leader_assign(protocol, response.members, deadline)
                assignments = [
                    SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in encoded.items()
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

        _, sync = self.channel.request(
            "join", ApiKey.SYNC_GROUP, sync_request, deadline=deadline, timeout=self._join_timeout()
        )
        if sync.error_code:
            if sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                with self._lock:
                    self._member_id, self._generation = "", -1
            elif sync.error_code == ErrorCode.ILLEGAL_GENERATION:
                with self._lock:
                    self._generation = -1
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
    ) -> tuple[dict[str, bytes], dict[str, int]]:
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
        counts = self._partition_counts(topics, deadline)
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
        return encoded, counts

    def _partition_counts(self, topics: Collection[str], deadline: Deadline) -> dict[str, int]:
        if not topics:
            return {}
        metadata = self.cluster.retry(
            lambda: self.cluster.refresh_metadata(
                topics, allow_auto_create=self.config.allow_auto_create_topics, deadline=deadline
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

    # ------------------------------------------------------------------------------ metadata checks

    def _check_metadata(self) -> None:
        """Every ``metadata.max.age.ms`` (at once after ``subscribe``): match the pattern against the
        topic list; the leader also checks the group's topics' partition counts."""
        now = time.monotonic()
        if now < self._next_metadata_check:
            return
        self._next_metadata_check = now + self.config.metadata_max_age_ms / 1000
        deadline = Deadline(min(self.config.default_api_timeout, self.config.request_timeout))
        try:
            if self._pattern is not None:
                metadata = self.cluster.refresh_metadata(None, deadline=deadline)
                matched = frozenset(
                    name
                    for name, topic in metadata.topics.items()
                    if not (topic.is_internal and self.config.exclude_internal_topics)
                    and not topic.error_code
                    and self._pattern.fullmatch(name)
                    and not (self._exclude is not None and self._exclude.fullmatch(name))
                )
                with self._lock:
                    self._set_subscribed(matched, f"the topics matching {self._pattern.pattern!r} changed")
            if self.is_leader and self._state is MemberState.STABLE and self._group_topics is not None:
                current = self._partition_counts(sorted(self._group_topics), deadline)
                if current != self._group_topics:
                    with self._lock:
                        self._request_rejoin("the partitions of the group's topics changed")
        except KafkaError as error:
            log.info("group %s: metadata check failed: %s", self.group_id, error)
            self._next_metadata_check = now + self.config.retry_backoff_max_ms / 1000

    # ------------------------------------------------------------------------------ heartbeat thread

    def _ensure_heartbeat_thread(self) -> None:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(
                target=self._heartbeat_loop, name=f"kctl-group-heartbeat-{self.group_id}", daemon=True
            )
            self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._closing.is_set():
            self._heartbeat_wakeup.wait(interval)
            self._heartbeat_wakeup.clear()
            if self._closing.is_set():
                return
            try:
                wait = self._heartbeat_once()
            except Exception:  # never let the thread die silently
                log.exception("group %s: heartbeat failed", self.group_id)
                wait = interval
            if wait is not None and wait < interval:
                if self._closing.wait(wait):
                    return
                self._heartbeat_wakeup.set()

    def _heartbeat_once(self) -> float | None:
        """One heartbeat; returns a shorter wait before the next when it should come sooner."""
        with self._lock:
            state, member_id, generation = self._state, self._member_id, self._generation
        if state is MemberState.UNJOINED or not member_id or generation < 0:
            return None
        max_poll = self.config.max_poll_interval_ms / 1000
        if state is MemberState.STABLE and time.monotonic() - self._last_poll > max_poll:
            self._poll_timeout_expired(max_poll)
            return None
        instance_id = self.config.group_instance_id
        deadline = Deadline(self.config.session_timeout_ms / 1000)
        try:
            _, response = self.channel.request(
                "heartbeat",
                ApiKey.HEARTBEAT,
                lambda version: HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=instance_id,
                ),
                deadline=deadline,
                timeout=min(self.config.request_timeout, self.config.session_timeout_ms / 1000),
            )
        except KafkaError as error:
            log.info("group %s: heartbeat: %s", self.group_id, error)
            if not error.retriable:
                self._fail(error)
            return self.config.retry_backoff_ms / 1000
        code = response.error_code
        if not code:
            return None
        with self._lock:
            if (self._member_id, self._generation) != (member_id, generation):
                return None  # a join changed the membership while the heartbeat was out
            if code in COORDINATOR_ERRORS:
                self.channel.invalidate()
                return self.config.retry_backoff_ms / 1000
            if self._state is not MemberState.STABLE:
                return None  # heartbeats during a join only keep the session alive
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._request_rejoin("the group is rebalancing")
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self._member_id = ""
                self._generation = -1
                self._lost_reason = f"heartbeat answered {BrokerResponseError(code).name}"
            else:
                self._fail(BrokerResponseError(code, context=f"Heartbeat of group {self.group_id!r}"))
        return None

    def _fail(self, error: KafkaError) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = (
                    error
                    if isinstance(error, GroupMembershipError)
                    else GroupMembershipError(f"group {self.group_id!r}: {error}")
                )

    def _poll_timeout_expired(self, max_poll: float) -> None:
        log.warning(
            "group %s: no poll for more than max.poll.interval.ms (%gs); leaving the group",
            self.group_id,
            max_poll,
        )
        with self._lock:
            member_id = self._member_id
            self._lost_reason = "max.poll.interval.ms passed without a poll"
            self._generation = -1
            if not self.config.group_instance_id:
                self._member_id = ""
        if not self.config.group_instance_id:
            self._leave(member_id, "heartbeat", "consumer poll timeout has expired")

    # ------------------------------------------------------------------------------ commits

    def _commit_before_revoke(self, partitions: Collection[TopicPartition] | None = None) -> None:
        if not self.config.enable_auto_commit or self.positions is None:
            return
        try:
            offsets = self._positions(partitions)
            if offsets:
                self.commit(offsets)
        except KafkaError as error:
            log.warning("group %s: commit before revoking failed: %s", self.group_id, error)

    def _positions(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if self.positions is None:
            return {}
        # subscribed: the partitions the group gave us; assigned by hand: every position given
        wanted = (
            frozenset(partitions)
            if partitions is not None
            else (self._assignment if self._subscribed_flag else None)
        )
        return {
            TopicPartition(*tp): as_offset(value)
            for tp, value in self.positions().items()
            if (wanted is None or TopicPartition(*tp) in wanted) and as_offset(value).offset >= 0
        }

    def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or self.positions is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
        if self._subscribed_flag and (
            self._state is not MemberState.STABLE or self._rejoin_reason is not None
        ):
            return
        offsets = self._positions()
        if offsets:
            self.commit(offsets, asynchronous=True, callback=self._auto_commit_done)

    def _auto_commit_done(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], error: BaseException | None
    ) -> None:
        if error is not None:
            log.warning("group %s: auto commit failed: %s", self.group_id, error)

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
        | None = None,
        timeout: float | None = None,
    ) -> (
        concurrent.futures.Future[dict[TopicPartition, OffsetAndMetadata]]
        | dict[TopicPartition, OffsetAndMetadata]
    ):
        """Commit offsets (OffsetCommit, with this member's generation; generation -1 when it is not
        a member). ``offsets``: partition -> the offset of the next record to read (or an
        ``OffsetAndMetadata``); None commits ``positions()`` of the assigned partitions.

        Synchronous: returns the offsets committed, or raises ``CommitFailedError`` (after a
        rebalance took the partitions away, the commit fails and the member rejoins). Asynchronous:
        returns a Future; ``callback(offsets, error)`` runs in the thread that calls ``poll`` or
        ``close``."""
        self._check_open()
        values = (
            self._positions()
            if offsets is None
            else {TopicPartition(*tp): as_offset(v) for tp, v in offsets.items()}
        )
        if not asynchronous:
            return self._commit_sync(values, timeout)
        if self._commit_pool is None:
            self._commit_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"kctl-group-commit-{self.group_id}"
            )
        future = self._commit_pool.submit(self._commit_sync, values, timeout)
        self._pending_commits.add(future)

        def done(f: concurrent.futures.Future[Any]) -> None:
            self._pending_commits.discard(f)
            if callback is not None:
                error = f.exception()
                with self._lock:
                    self._completed_commits.append((callback, values, error))

        future.add_done_callback(done)
        return future

    def _run_commit_callbacks(self) -> None:
        with self._lock:
            completed, self._completed_commits = self._completed_commits, []
        for callback, values, error in completed:
            try:
                callback(values, error)
            except Exception as exc:
                log.error("group %s: commit callback raised %r", self.group_id, exc)
                if self._callback_error is None:
                    self._callback_error = exc

    def _commit_sync(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout: float | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if not offsets:
            return {}
        deadline = self.cluster.deadline(timeout)
        attempt = 0
        while True:
            with self._lock:
                if self._subscribed_flag and (
                    self._state is not MemberState.STABLE or self._generation < 0 or self._lost_reason
                ):
                    # as Kafka's consumer: a subscribed member commits only as a member of a generation
                    what = (
                        "a rebalance is under way"
                        if self._state is MemberState.JOINING and not self._lost_reason
                        else "the consumer is not a member of the group now (it was removed or left)"
                    )
                    raise CommitFailedError(f"group {self.group_id!r}: cannot commit: {what}")
                joined = self._state is not MemberState.UNJOINED and self._generation >= 0
                generation = self._generation if joined else -1
                member_id = self._member_id if joined else ""
            instance_id = self.config.group_instance_id if joined else None
            build = functools.partial(
                offset_commit_request,
                group_id=self.group_id,
                offsets=offsets,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
            )
            try:
                _, response = self.channel.request(
                    "offsets",
                    ApiKey.OFFSET_COMMIT,
                    build,
                    deadline=deadline,
                    timeout=deadline.timeout(self.config.request_timeout),
                )
            except KafkaError as error:
                if not error.retriable or deadline.expired:
                    raise CommitFailedError(f"group {self.group_id!r}: commit failed: {error}") from error
                errors: dict[TopicPartition, BrokerResponseError] = {}
            else:
                codes = offset_commit_results(response)
                errors = {
                    tp: BrokerResponseError(code, context=str(tp)) for tp, code in codes.items() if code
                }
                missing = [tp for tp in offsets if tp not in codes]
                for tp in missing:
                    errors[tp] = BrokerResponseError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, "not in the response", context=str(tp)
                    )
                if not errors:
                    return offsets
                codes_seen = {e.code for e in errors.values()}
                if codes_seen & COORDINATOR_ERRORS:
                    self.channel.invalidate()
                if codes_seen & MEMBERSHIP_ERRORS or ErrorCode.FENCED_INSTANCE_ID in codes_seen:
                    with self._lock:
                        expelled = bool(
                            codes_seen & {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION}
                        )
                        if (
                            expelled
                            and joined
                            and (self._member_id, self._generation) == (member_id, generation)
                        ):
                            self._lost_reason = f"commit answered {next(iter(errors.values())).name}"
                        self._request_rejoin("a commit found the group rebalancing")
                    first = next(iter(errors.values()))
                    raise CommitFailedError(
                        f"group {self.group_id!r}: commit failed: {first.name}: the group rebalanced and "
                        "the partitions may be someone else's now",
                        errors,
                    )
                if not all(e.retriable for e in errors.values()) or deadline.expired:
                    first = next(iter(errors.values()))
                    raise CommitFailedError(f"group {self.group_id!r}: commit failed: {first}", errors)
                offsets = {tp: offsets[tp] for tp in errors}  # retry only what failed
            attempt += 1
            wait = min(
                self.config.retry_backoff_ms / 1000 * 2**attempt, self.config.retry_backoff_max_ms / 1000
            )
            if deadline.remaining() <= wait:
                raise CommitFailedError(f"group {self.group_id!r}: commit failed: out of time", errors)
            time.sleep(wait)

    def committed(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (default: the assignment); None where
        nothing is committed. ``partitions=None`` with no assignment: every committed offset."""
        self._check_open()
        wanted = (
            list(dict.fromkeys(TopicPartition(*tp) for tp in partitions)) if partitions is not None else None
        )
        if wanted is None and self._assignment:
            wanted = sorted(self._assignment)
        if wanted == []:
            return {}
        deadline = self.cluster.deadline(timeout)

        def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            version, response = self.channel.request(
                "offsets",
                ApiKey.OFFSET_FETCH,
                lambda version: offset_fetch_request(version, self.group_id, wanted),
                deadline=deadline,
                timeout=deadline.timeout(self.config.request_timeout),
                min_version=None if wanted is not None else 2,
            )
            group_error, found = offset_fetch_results(version, response, self.group_id)
            if group_error:
                if group_error in COORDINATOR_ERRORS:
                    self.channel.invalidate()
                raise BrokerResponseError(group_error, context=f"OffsetFetch of group {self.group_id!r}")
            for tp, (code, _) in found.items():
                if code:
                    if code in COORDINATOR_ERRORS:
                        self.channel.invalidate()
                    raise BrokerResponseError(code, context=f"OffsetFetch of {tp}")
            if wanted is None:
                return {tp: value for tp, (_, value) in sorted(found.items())}
            return {tp: found.get(tp, (0, None))[1] for tp in wanted}

        return self.cluster.retry(attempt, deadline=deadline, description="OffsetFetch")

    # ------------------------------------------------------------------------------ leaving

    def _leave(self, member_id: str, purpose: str, reason: str) -> None:
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
            _, response = self.channel.request(
                purpose,
                ApiKey.LEAVE_GROUP,
                build,
                deadline=Deadline(min(self.config.request_timeout, self.config.default_api_timeout)),
                min_version=3 if instance_id else None,
            )
            codes = [response.error_code, *(m.error_code for m in getattr(response, "members", None) or [])]
            if any(codes):
                log.info("group %s: LeaveGroup: %s", self.group_id, BrokerResponseError(max(codes)).name)
            else:
                log.info("group %s: member %s left the group", self.group_id, member_id or instance_id)
        except KafkaError as error:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, error)

    def _give_up_all(self, *, leave: bool) -> None:
        if self._lost_reason is not None:
            self._lose_partitions()
        elif self._assignment:
            self._commit_before_revoke()
            revoked = self._assignment
            with self._lock:
                self._assignment = frozenset()
            self._invoke(self.on_revoke, revoked, "on_revoke")
        with self._lock:
            member_id = self._member_id
            self._state = MemberState.UNJOINED
            self._generation = -1
            self._previous = (frozenset(), -1)
            if leave:
                self._member_id = ""
        self._cancel_join()
        if leave:
            self._leave(member_id, "offsets", "the consumer is leaving the group")

    def _cancel_join(self) -> None:
        future, self._join_future = self._join_future, None
        if future is None or future.done():
            return
        # a join under way holds a connection in a long wait: wake it up and let it go
        self._join_cancel.set()
        self.channel.close_purpose("join")
        with contextlib.suppress(Exception):
            future.result(timeout=self.config.request_timeout)

    def _finish_pending_join(self, timeout: float) -> None:
        """Give a rebalance under way a moment to finish, so that the final commit is made in the
        new generation (during the rebalance the coordinator refuses it)."""
        future = self._join_future
        if future is None or self._fatal is not None:
            return
        try:
            result = future.result(timeout=timeout)
        except Exception:  # not finished in time, cancelled or failed: leave with what we have
            return
        self._join_future = None
        self._complete_join(result)

    def close(self, *, leave: bool | None = None, timeout: float | None = None) -> None:
        """Leave the group: wait for asynchronous commits (and, at most ``timeout`` seconds, for a
        rebalance under way), auto-commit the positions, call ``on_revoke`` (or ``on_lost``), send
        LeaveGroup (by default only for a dynamic member: a static member keeps its place until its
        session times out), stop the threads. Callbacks run in the calling thread."""
        if self._closed:
            return
        leave = leave if leave is not None else not self.config.group_instance_id
        try:
            for future in list(self._pending_commits):
                with contextlib.suppress(Exception):
                    future.result(timeout=timeout if timeout is not None else self.config.request_timeout)
            self._run_commit_callbacks()
            self._finish_pending_join(CLOSE_JOIN_WAIT if timeout is None else timeout)
            if self._subscribed_flag or self._assignment:
                self._give_up_all(leave=leave)
        finally:
            self._closed = True
            self._closing.set()
            self._heartbeat_wakeup.set()
            self.channel.close()
            if self._commit_pool is not None:
                self._commit_pool.shutdown(wait=False, cancel_futures=True)
            thread = self._heartbeat_thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=self.config.request_timeout)
        self._raise_callback_error()

    def __enter__(self) -> GroupMembership:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _show(partitions: Collection[TopicPartition]) -> str:
    if not partitions:
        return "nothing"
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items())
