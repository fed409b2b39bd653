"""The member's own state in its group, which every part of a membership reads and changes: its
identity (``group_id``, ``group_instance_id``), its generation (``member_id``, ``generation_id``,
the assignor the group chose, the leader), its assignment, and the rebalance state (unjoined,
joining or stable; a rejoin or a loss to handle at the next ``poll``; a fatal error ``poll`` raises).

``Member`` holds data and the small transitions the parts share; it does no I/O. The façade
(``membership.GroupMembership``) and its collaborators (``join.GroupJoiner``, ``heartbeat.Heartbeat``,
``committer.OffsetCommitter``, ``subscription.TopicSubscription``, ``rebalance.Rebalancer``) hold the
same ``Member`` and change it under its ``lock``: the join and heartbeat threads update it while the
consumer's thread polls. Where the coordinator is (and the connections to it) is the
``coordinator.CoordinatorChannel``'s to know, not the member's.
"""

from __future__ import annotations

import threading

from kctl.client.errors import KafkaError
from kctl.client.group.state import JoinResult, MemberState, Partitions
from kctl.protocol import ErrorCode


class Member:
    """One consumer as a member of group ``group_id``; see the module docstring. Every
    read-modify-write of several fields goes under ``lock`` (reentrant)."""

    def __init__(self, group_id: str, group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        """Static membership (``group.instance.id``), or None for a dynamic member."""
        self.lock = threading.RLock()
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        """The assignor the group chose for the current generation."""
        self.leader_id = ""
        self.assignment: Partitions = frozenset()
        """The partitions this member holds now."""
        self.previous: tuple[Partitions, int] = (frozenset(), -1)
        """The assignment and generation last held: the sticky assignors' user data (eager protocol)."""
        self.subscribed = False
        """Whether the member takes its partitions from the group (``subscribe``), not by hand."""
        self.rejoin_reason: str | None = None
        """Why the member must join again at the next ``poll`` (None: it need not)."""
        self.lost_reason: str | None = None
        """Why the member lost its membership (None: it did not); ``poll`` then calls ``on_lost``."""
        self.fatal: KafkaError | None = None
        """The error that ended the membership; ``poll`` raises it."""

    def __repr__(self) -> str:
        return (
            f"<Member of {self.group_id!r} {self.state.value} member {self.member_id or '-'} "
            f"generation {self.generation_id}, {len(self.assignment)} partitions>"
        )

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def rebalance_in_progress(self) -> bool:
        return self.state is MemberState.JOINING or self.rejoin_reason is not None

    def generation(self) -> tuple[MemberState, str, int]:
        """The state, member id and generation id, read together."""
        with self.lock:
            return self.state, self.member_id, self.generation_id

    def is_generation(self, member_id: str, generation_id: int) -> bool:
        """Whether the member is still ``member_id`` in generation ``generation_id`` (a request sent
        with them is answered for the membership of now)."""
        return (self.member_id, self.generation_id) == (member_id, generation_id)

    def request_rejoin(self, reason: str) -> None:
        """Join again at the next ``poll``; the first reason given is kept."""
        with self.lock:
            if self.rejoin_reason is None:
                self.rejoin_reason = reason

    def reset_generation(self, error_code: int) -> None:
        """After a JoinGroup/SyncGroup answer of UNKNOWN_MEMBER_ID (the member id is forgotten too)
        or ILLEGAL_GENERATION; other codes change nothing."""
        with self.lock:
            if error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id, self.generation_id = "", -1
            elif error_code == ErrorCode.ILLEGAL_GENERATION:
                self.generation_id = -1

    def enter_generation(self, result: JoinResult) -> Partitions:
        """A join round succeeded: the member is stable in ``result``'s generation. The assignment
        is left to the caller (it gives up what moves first); returns the assignment held until now."""
        with self.lock:
            self.state = MemberState.STABLE
            self.generation_id = result.generation
            self.member_id = result.member_id
            self.protocol_name = result.protocol
            self.leader_id = result.leader
            self.previous = (result.assignment, result.generation)
            return self.assignment

    def leave_generation(self, *, forget_member_id: bool) -> str:
        """The member is out of its generation (it gave its partitions up); with
        ``forget_member_id`` (it leaves the group) the member id goes too. Returns the member id
        it had."""
        with self.lock:
            member_id = self.member_id
            self.state = MemberState.UNJOINED
            self.generation_id = -1
            self.previous = (frozenset(), -1)
            if forget_member_id:
                self.member_id = ""
            return member_id
