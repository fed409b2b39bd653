"""Partition assignors of the ``consumer`` group protocol: who reads which partitions.

The group's leader runs the assignor the group agreed on over every member's ``Subscription``; the
names are Kafka's, so a group may mix kctl with other clients that offer the same one:

* ``range`` (the default, Kafka's RangeAssignor) — per topic: the topic's partitions in order, cut
  into contiguous ranges over the members subscribed to it (sorted), the first
  ``partitions % members`` members getting one more. Balanced per topic, not across topics.
* ``roundrobin`` (RoundRobinAssignor) — every subscribed partition (topics sorted) dealt in turn to
  the sorted members, skipping members not subscribed to its topic. Balanced when all members
  subscribe to the same topics.
* ``sticky`` (StickyAssignor) — as balanced as the subscriptions allow (partition counts of members
  differ by at most one where each could take the other's partitions), moving as few partitions as
  possible from where they were: members report what they own (``owned_partitions`` and the
  generation, or Kafka's StickyAssignorUserData in ``user_data``).
* ``cooperative-sticky`` (CooperativeStickyAssignor) — the sticky assignment, minus partitions that
  move between members: those are first revoked by their owner only (the others keep consuming),
  whose rejoin starts a second rebalance that hands them to their new member (KIP-429).

Members sort as Kafka sorts them: static members (``group.instance.id``) first by instance id, then
the others by member id — so every leader computes the same assignment from the same input.
"""

from __future__ import annotations

import enum
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kctl.client.consumer_protocol import (
    ConsumerProtocolError,
    StickyUserData,
    Subscription,
    decode_generation,
    encode_generation,
)
from kctl.common.topic_partition import TopicPartition


class RebalanceProtocol(enum.Enum):
    """EAGER: every member gives up all its partitions before each rebalance. COOPERATIVE: members
    keep what they keep, and give up only what moves (KIP-429)."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"


@dataclass(frozen=True)
class GroupMember:
    """One member as the leader sees it: its ids and decoded subscription."""

    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None

    @property
    def sort_key(self) -> tuple[int, str]:
        # Kafka's MemberInfo order: static members by instance id first, then dynamic by member id
        if self.group_instance_id:
            return (0, self.group_instance_id)
        return (1, self.member_id)


Assignments = dict[str, list[TopicPartition]]
"""member id -> assigned partitions (sorted)."""


def _members(members: Iterable[GroupMember] | Mapping[str, Subscription]) -> list[GroupMember]:
    items = [GroupMember(m, s) for m, s in members.items()] if isinstance(members, Mapping) else list(members)
    return sorted(items, key=lambda m: m.sort_key)


def _all_partitions(topic: str, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(partitions_per_topic.get(topic, 0))]


class Assignor(ABC):
    """A partition assignor. ``assign`` is pure: the same input gives the same output."""

    name: str = ""
    protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)
    """The rebalance protocols the assignor supports, preferred last (Kafka's order)."""

    def subscription_user_data(self, owned: Sequence[TopicPartition], generation: int) -> bytes | None:
        """What a member puts in its subscription's ``user_data`` for this assignor."""
        return None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Iterable[GroupMember] | Mapping[str, Subscription],
    ) -> Assignments:
        """Assign the partitions of the subscribed topics (``partitions_per_topic``: topic ->
        partition count; topics absent from it are skipped) to the members; every member gets an
        entry, possibly empty."""
        ordered = _members(members)
        result = self._assign(partitions_per_topic, ordered)
        return {m.member_id: sorted(result.get(m.member_id, [])) for m in ordered}

    @abstractmethod
    def _assign(self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]) -> Assignments: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class RangeAssignor(Assignor):
    """Kafka's RangeAssignor: contiguous ranges per topic."""

    name = "range"

    def _assign(self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]) -> Assignments:
        out: Assignments = {m.member_id: [] for m in members}
        topics = sorted({t for m in members for t in m.subscription.topics})
        for topic in topics:
            consumers = [m for m in members if topic in m.subscription.topics]
            partitions = _all_partitions(topic, partitions_per_topic)
            if not consumers or not partitions:
                continue
            per_consumer, extra = divmod(len(partitions), len(consumers))
            for i, member in enumerate(consumers):
                start = per_consumer * i + min(i, extra)
                length = per_consumer + (1 if i < extra else 0)
                out[member.member_id].extend(partitions[start : start + length])
        return out


class RoundRobinAssignor(Assignor):
    """Kafka's RoundRobinAssignor: partitions dealt in turn to the members subscribed to them."""

    name = "roundrobin"

    def _assign(self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]) -> Assignments:
        out: Assignments = {m.member_id: [] for m in members}
        if not members:
            return out
        topics = sorted({t for m in members for t in m.subscription.topics})
        ring = itertools.cycle(members)
        for topic in topics:
            for tp in _all_partitions(topic, partitions_per_topic):
                for _ in range(len(members)):
                    member = next(ring)
                    if topic in member.subscription.topics:
                        out[member.member_id].append(tp)
                        break
        return out


# ----------------------------------------------------------------------------------------- sticky


@dataclass(frozen=True)
class _MemberData:
    owned: tuple[TopicPartition, ...]
    generation: int


class StickyAssignor(Assignor):
    """Kafka's StickyAssignor: balance first, then keep partitions where they were."""

    name = "sticky"
    protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, owned: Sequence[TopicPartition], generation: int) -> bytes | None:
        # Kafka's StickyAssignorUserData v1, for members that read the previous assignment there
        return StickyUserData(tuple(sorted(owned)), generation).encode()

    def member_data(self, subscription: Subscription) -> _MemberData:
        """What a member had and since which generation. Eager members give everything up before
        joining, so (as Kafka's StickyAssignor) this comes from the user data; without any, from
        the owned partitions."""
        if subscription.user_data:
            try:
                data = StickyUserData.decode(subscription.user_data)
            except ConsumerProtocolError:
                pass
            else:
                return _MemberData(data.partitions, data.generation)
        return _MemberData(subscription.owned_partitions, subscription.generation_id)

    def previous_owners(
        self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]
    ) -> dict[TopicPartition, str]:
        """Who validly owns each partition: the claimant of the highest generation; a partition
        claimed twice in the same generation is nobody's. Claims on partitions that no longer
        exist, or of topics the member no longer subscribes to, are dropped."""
        best: dict[TopicPartition, tuple[int, str | None]] = {}
        for member in members:
            data = self.member_data(member.subscription)
            topics = set(member.subscription.topics)
            for tp in dict.fromkeys(data.owned):
                if tp.topic not in topics or not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                    continue
                current = best.get(tp)
                if current is None or data.generation > current[0]:
                    best[tp] = (data.generation, member.member_id)
                elif data.generation == current[0]:
                    best[tp] = (data.generation, None)  # conflicting claims: invalidate both
        return {tp: owner for tp, (_, owner) in best.items() if owner is not None}

    def _assign(self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]) -> Assignments:
        owners = self.previous_owners(partitions_per_topic, members)
        topic_sets = {frozenset(m.subscription.topics) for m in members}
        if len(topic_sets) == 1:
            return self._constrained(partitions_per_topic, members, owners)
        return self._general(partitions_per_topic, members, owners)

    @staticmethod
    def _constrained(
        partitions_per_topic: Mapping[str, int], members: list[GroupMember], owners: dict[TopicPartition, str]
    ) -> Assignments:
        """Every member subscribes to the same topics: quotas of floor/ceil(partitions / members),
        each member keeps what it owns up to its quota, the rest is dealt round-robin."""
        out: Assignments = {m.member_id: [] for m in members}
        if not members:
            return out
        topics = sorted(members[0].subscription.topics)
        partitions = [tp for t in topics for tp in _all_partitions(t, partitions_per_topic)]
        min_quota, extra = divmod(len(partitions), len(members))
        max_quota = min_quota + (1 if extra else 0)
        owned_by: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        for tp in partitions:
            owner = owners.get(tp)
            if owner is not None:
                owned_by[owner].append(tp)
        # members owning the most keep the extra slots first (fewest moves)
        order = sorted(members, key=lambda m: (-len(owned_by[m.member_id]), m.sort_key))
        taken: set[TopicPartition] = set()
        for member in order:
            owned = owned_by[member.member_id]
            quota = max_quota if extra and len(owned) >= max_quota else min_quota
            if quota == max_quota and extra:
                extra -= 1
            kept = owned[:quota]
            out[member.member_id].extend(kept)
            taken.update(kept)
        unassigned = [tp for tp in partitions if tp not in taken]
        # fill members below the minimum quota first, then hand the remaining extra slots out
        unfilled = [m.member_id for m in members if len(out[m.member_id]) < min_quota]
        position = 0
        while unassigned and unfilled:
            position %= len(unfilled)
            member_id = unfilled[position]
            out[member_id].append(unassigned.pop(0))
            if len(out[member_id]) >= min_quota:
                unfilled.pop(position)
            else:
                position += 1
        for member in members:
            if not unassigned or extra <= 0:
                break
            if len(out[member.member_id]) == min_quota:
                out[member.member_id].append(unassigned.pop(0))
                extra -= 1
        if unassigned:  # cannot happen with consistent quotas; never leave a partition out
            for tp in unassigned:
                target = min(members, key=lambda m: (len(out[m.member_id]), m.sort_key))
                out[target.member_id].append(tp)
        return out

    @staticmethod
    def _general(
        partitions_per_topic: Mapping[str, int], members: list[GroupMember], owners: dict[TopicPartition, str]
    ) -> Assignments:
        """Members subscribe to different topics: keep valid ownership, place the rest on the least
        loaded eligible member (partitions with the fewest candidates first), then move partitions
        one at a time from a member to an eligible one holding at least two fewer, until none can."""
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        order = {m.member_id: m.sort_key for m in members}
        eligible: dict[TopicPartition, list[str]] = {}
        for topic in sorted({t for m in members for t in m.subscription.topics}):
            candidates = [m.member_id for m in members if topic in m.subscription.topics]
            for tp in _all_partitions(topic, partitions_per_topic):
                eligible[tp] = candidates
        if not eligible:
            return out
        for tp, owner in owners.items():
            if tp in eligible and owner in out:
                out[owner].append(tp)
        assigned = {tp for parts in out.values() for tp in parts}
        pending = sorted(
            (tp for tp in eligible if tp not in assigned), key=lambda tp: (len(eligible[tp]), tp)
        )
        for tp in pending:
            target = min(eligible[tp], key=lambda m: (len(out[m]), order[m]))
            out[target].append(tp)
        # balance: repeatedly move one partition from the most loaded member that can give one away
        # to the least loaded eligible member; every move lowers the sum of squared loads, so it ends
        while True:
            moved = False
            for donor in sorted(out, key=lambda m: (-len(out[m]), order[m])):
                best: tuple[int, tuple[int, str], TopicPartition, str] | None = None
                # prefer giving away what was not owned before (least disturbance), newest last
                for tp in sorted(out[donor], key=lambda tp: (owners.get(tp) == donor, tp)):
                    for receiver in eligible[tp]:
                        if receiver == donor or len(out[receiver]) + 1 >= len(out[donor]):
                            continue
                        key = (len(out[receiver]), order[receiver], tp, receiver)
                        if best is None or key[:2] < best[:2]:
                            best = key
                    if best is not None:
                        break
                if best is not None:
                    _, _, tp, receiver = best
                    out[donor].remove(tp)
                    out[receiver].append(tp)
                    moved = True
                    break
            if not moved:
                return out


class CooperativeStickyAssignor(StickyAssignor):
    """Kafka's CooperativeStickyAssignor: the sticky assignment without the partitions changing
    owner this round (their owner revokes them, rejoins, and the next rebalance places them)."""

    name = "cooperative-sticky"
    protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def subscription_user_data(self, owned: Sequence[TopicPartition], generation: int) -> bytes | None:
        return encode_generation(generation)

    def member_data(self, subscription: Subscription) -> _MemberData:
        if subscription.version >= 2 and subscription.generation_id >= 0:
            return _MemberData(subscription.owned_partitions, subscription.generation_id)
        return _MemberData(subscription.owned_partitions, decode_generation(subscription.user_data))

    def _assign(self, partitions_per_topic: Mapping[str, int], members: list[GroupMember]) -> Assignments:
        sticky = super()._assign(partitions_per_topic, members)
        # a partition another member owns now is withheld: its owner must revoke it first
        owners = self.previous_owners(partitions_per_topic, members)
        return {
            member_id: [tp for tp in parts if owners.get(tp, member_id) == member_id]
            for member_id, parts in sticky.items()
        }


ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}
"""The assignors by their protocol name."""

_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def get_assignor(name: str) -> Assignor:
    """An assignor by name (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``; Java
    class names of Kafka's assignors work too). Raises ``ValueError`` for another name."""
    key = name.strip()
    key = _JAVA_NAMES.get(key, key).lower()
    cls = ASSIGNORS.get(key)
    if cls is None:
        raise ValueError(f"unknown partition assignor {name!r} (known: {', '.join(ASSIGNORS)})")
    return cls()


def parse_assignors(value: str | Iterable[str]) -> list[Assignor]:
    """``partition.assignment.strategy``: a comma-separated list (or a list) of assignor names,
    preferred first."""
    names = [n for n in (value.split(",") if isinstance(value, str) else value) if n.strip()]
    if not names:
        raise ValueError("no partition assignor given")
    assignors: dict[str, Assignor] = {}
    for name in names:
        assignor = get_assignor(name)
        assignors.setdefault(assignor.name, assignor)
    return list(assignors.values())


def rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The protocol a member with these assignors follows: COOPERATIVE when every one of them
    supports it, else EAGER (Kafka's rule)."""
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.protocols)
    if not common:
        raise ValueError("the assignors share no rebalance protocol")
    return (
        RebalanceProtocol.COOPERATIVE if RebalanceProtocol.COOPERATIVE in common else RebalanceProtocol.EAGER
    )
