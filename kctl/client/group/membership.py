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

``GroupMembership`` is a façade: this module owns the order of the work in ``poll`` and ``close``
and the public API; the work is done by collaborators it builds and composes, each with one job and
usable alone, all sharing one ``Member`` (``member``: identity, generation, assignment, rebalance
state):

* ``channel`` — ``coordinator.CoordinatorChannel``: finding the coordinator, connections to it;
* ``joiner`` — ``join.GroupJoiner``: the JoinGroup/SyncGroup round with the assignors, LeaveGroup;
* ``heartbeat`` — ``heartbeat.Heartbeat``: the heartbeat thread;
* ``committer`` — ``committer.OffsetCommitter``: commits, auto commit, committed offsets;
* ``topic_subscription`` — ``subscription.TopicSubscription``: topics or a pattern, metadata checks;
* ``rebalancer`` — ``rebalance.Rebalancer``: giving up and taking partitions, the callbacks.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient
from kctl.client.config import ClientConfig
from kctl.client.errors import KafkaError
from kctl.client.group.assignors import Assignor, RebalanceProtocol
from kctl.client.group.committer import CommitCallback, OffsetCommitter
from kctl.client.group.coordinator import CoordinatorChannel, OffsetAndMetadata
from kctl.client.group.heartbeat import Heartbeat
from kctl.client.group.join import GroupJoiner
from kctl.client.group.member import Member
from kctl.client.group.rebalance import Rebalancer
from kctl.client.group.state import (
    CLOSE_JOIN_WAIT,
    Callback,
    GroupMembershipError,
    JoinCancelled,
    MemberState,
    Partitions,
    PositionsProvider,
)
from kctl.client.group.subscription import TopicSubscription
from kctl.client.group_config import GroupConfig, coerce_group_config
from kctl.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)


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
        self.member = Member(group_id, self.config.group_instance_id)
        self.channel = CoordinatorChannel(cluster, group_id)
        self.joiner = GroupJoiner(cluster, self.config, self.channel, self.member, self.assignors)
        self.heartbeat = Heartbeat(self.config, self.channel, self.member, leave=self.joiner.leave)
        self.committer = OffsetCommitter(
            cluster, self.config, self.channel, self.member, positions, report=self._report
        )
        self.topic_subscription = TopicSubscription(cluster, self.config, self.member)
        self.rebalancer = Rebalancer(
            self.member,
            self.committer,
            self.topic_subscription,
            self.protocol,
            on_assign=on_assign,
            on_revoke=on_revoke,
            on_lost=on_lost,
            report=self._report,
        )
        self._closed = False
        self._callback_error: BaseException | None = None

    # ------------------------------------------------------------------------------ properties

    def __repr__(self) -> str:
        member = self.member
        return (
            f"<GroupMembership {self.group_id!r} {member.state.value} member {member.member_id or '-'} "
            f"generation {member.generation_id}, {len(member.assignment)} partitions>"
        )

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def generation_id(self) -> int:
        return self.member.generation_id

    @property
    def group_instance_id(self) -> str | None:
        return self.member.group_instance_id

    @property
    def state(self) -> MemberState:
        return self.member.state

    @property
    def assignment(self) -> Partitions:
        """The partitions this member holds now."""
        return self.member.assignment

    @property
    def assignor(self) -> str | None:
        """The assignor (protocol name) of the current generation."""
        return self.member.protocol_name

    @property
    def is_leader(self) -> bool:
        return self.member.is_leader

    @property
    def subscription(self) -> frozenset[str]:
        """The topics subscribed to now (for a pattern: those matching at the last check)."""
        return self.topic_subscription.topics

    @property
    def subscribed(self) -> bool:
        return self.member.subscribed

    @property
    def rebalance_in_progress(self) -> bool:
        return self.member.rebalance_in_progress

    @property
    def positions(self) -> PositionsProvider | None:
        """The consumer's positions, for auto commit and ``commit()`` without offsets."""
        return self.committer.positions

    @positions.setter
    def positions(self, positions: PositionsProvider | None) -> None:
        self.committer.positions = positions

    @property
    def on_assign(self) -> Callback | None:
        return self.rebalancer.on_assign

    @on_assign.setter
    def on_assign(self, callback: Callback | None) -> None:
        self.rebalancer.on_assign = callback

    @property
    def on_revoke(self) -> Callback | None:
        return self.rebalancer.on_revoke

    @on_revoke.setter
    def on_revoke(self, callback: Callback | None) -> None:
        self.rebalancer.on_revoke = callback

    @property
    def on_lost(self) -> Callback | None:
        return self.rebalancer.on_lost

    @on_lost.setter
    def on_lost(self, callback: Callback | None) -> None:
        self.rebalancer.on_lost = callback

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
        with self.member.lock:
            self._check_open()
            self.member.subscribed = True
            self.topic_subscription.replace(names, pattern, exclude)

    def unsubscribe(self) -> None:
        """Give up the partitions (``on_revoke``) and leave the group."""
        with self.member.lock:
            self._check_open()
        self._give_up_all(leave=True)
        with self.member.lock:
            self.member.subscribed = False
            self.topic_subscription.clear()
            self.member.rejoin_reason = None

    def request_rejoin(self, reason: str = "requested") -> None:
        """Rejoin the group at the next ``poll`` (a new rebalance)."""
        self.member.request_rejoin(reason)

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
        member = self.member
        if member.fatal is not None:
            raise member.fatal
        self.heartbeat.polled()
        deadline = time.monotonic() + max(timeout, 0.0)
        changed = False
        self.committer.run_callbacks()
        if member.subscribed:
            self.heartbeat.start()
            self.topic_subscription.check_metadata()
            while True:
                if self.joiner.in_progress:
                    try:
                        result = self.joiner.wait(max(deadline - time.monotonic(), 0.0))
                    except JoinCancelled:
                        break
                    except Exception as error:
                        with member.lock:
                            member.state = MemberState.UNJOINED
                            if isinstance(error, KafkaError):
                                member.fatal = error
                        raise
                    if result is None:
                        break
                    self.topic_subscription.group_topics = result.group_topics
                    changed |= self.rebalancer.complete_join(result)
                    continue
                if member.lost_reason is not None:
                    changed |= self.rebalancer.lose_partitions()
                if member.rejoin_reason is not None or member.state is MemberState.UNJOINED:
                    changed |= self._join()
                    continue
                break
        self.committer.maybe_auto_commit()
        self._raise_callback_error()
        return member.assignment if changed else None

    def _report(self, error: BaseException) -> None:
        """A user callback raised ``error``: ``poll`` (or ``close``) raises the first one."""
        if self._callback_error is None:
            self._callback_error = error

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error

    def _join(self) -> bool:
        """Give up what the protocol says before a join, then start a join round (in the joiner's
        thread). Returns whether the assignment changed."""
        member = self.member
        with member.lock:
            reason = member.rejoin_reason or "joining"
            member.rejoin_reason = None
        log.info("group %s: (re)joining: %s", self.group_id, reason)
        changed = self.rebalancer.prepare_join()
        with member.lock:
            member.state = MemberState.JOINING
            owned = member.assignment
            previous, previous_generation = member.previous
            if self.protocol is RebalanceProtocol.COOPERATIVE:
                previous, previous_generation = owned, member.generation_id
            topics = tuple(sorted(self.topic_subscription.topics))
        self.joiner.start(topics, owned, previous, previous_generation, reason=reason)
        self.heartbeat.wake()
        return changed

    # ------------------------------------------------------------------------------ leaving

    def _give_up_all(self, *, leave: bool) -> None:
        self.rebalancer.give_up_all()
        member_id = self.member.leave_generation(forget_member_id=leave)
        self.joiner.cancel()
        if leave:
            self.joiner.leave(member_id, "offsets", "the consumer is leaving the group")

    def _finish_pending_join(self, timeout: float) -> None:
        """Give a rebalance under way a moment to finish, so that the final commit is made in the
        new generation (during the rebalance the coordinator refuses it)."""
        if not self.joiner.in_progress or self.member.fatal is not None:
            return
        try:
            result = self.joiner.wait(timeout)
        except Exception:  # cancelled or failed: leave with what we have
            return
        if result is None:  # not finished in time
            return
        self.topic_subscription.group_topics = result.group_topics
        self.rebalancer.complete_join(result)

    def close(self, *, leave: bool | None = None, timeout: float | None = None) -> None:
        """Leave the group: wait for asynchronous commits (and, at most ``timeout`` seconds, for a
        rebalance under way), auto-commit the positions, call ``on_revoke`` (or ``on_lost``), send
        LeaveGroup (by default only for a dynamic member: a static member keeps its place until its
        session times out), stop the threads. Callbacks run in the calling thread."""
        if self._closed:
            return
        leave = leave if leave is not None else not self.config.group_instance_id
        try:
            self.committer.wait_pending(timeout if timeout is not None else self.config.request_timeout)
            self.committer.run_callbacks()
            self._finish_pending_join(CLOSE_JOIN_WAIT if timeout is None else timeout)
            if self.member.subscribed or self.member.assignment:
                self._give_up_all(leave=leave)
        finally:
            self._closed = True
            self.heartbeat.stop()
            self.channel.close()
            self.committer.close()
            self.heartbeat.join(timeout=self.config.request_timeout)
        self._raise_callback_error()

    def __enter__(self) -> GroupMembership:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ offsets

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
        timeout: float | None = None,
    ) -> (
        concurrent.futures.Future[dict[TopicPartition, OffsetAndMetadata]]
        | dict[TopicPartition, OffsetAndMetadata]
    ):
        """Commit offsets: ``OffsetCommitter.commit`` (its docstring says what each argument does),
        once the member is checked to be open."""
        self._check_open()
        return self.committer.commit(offsets, asynchronous=asynchronous, callback=callback, timeout=timeout)

    def committed(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (default: the assignment); None where
        nothing is committed. ``partitions=None`` with no assignment: every committed offset."""
        self._check_open()
        return self.committer.committed(partitions, timeout=timeout)
