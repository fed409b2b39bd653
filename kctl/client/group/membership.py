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

This module owns the member's state machine (subscription, ``poll``, giving partitions up, leaving,
``close``); the parts it is made of live beside it: ``join`` (the JoinGroup/SyncGroup round and
the leader's assignment), ``heartbeat`` (the heartbeat thread), ``committer`` (commits, auto commit,
committed offsets) and ``state`` (the states, errors and types they share).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.assignors import Assignor, RebalanceProtocol
from kctl.client.group.committer import OffsetCommitterMixin
from kctl.client.group.coordinator import CoordinatorChannel
from kctl.client.group.heartbeat import HeartbeatMixin
from kctl.client.group.join import JoinMixin
from kctl.client.group.state import (
    CLOSE_JOIN_WAIT,
    Callback,
    GroupMembershipError,
    JoinCancelled,
    JoinResult,
    MemberState,
    Partitions,
    PositionsProvider,
    show_partitions,
)
from kctl.client.group_config import GroupConfig, coerce_group_config
from kctl.protocol import ApiKey
from kctl.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity

log = logging.getLogger(__name__)


def _topic_matcher(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


class GroupMembership(JoinMixin, HeartbeatMixin, OffsetCommitterMixin):
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
                    except JoinCancelled:
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
        log.warning("group %s: lost partitions %s: %s", self.group_id, show_partitions(lost), reason)
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
            show_partitions(new),
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


