"""Leader selection strategies of the controller (Kafka's PartitionLeaderElectionAlgorithms), as
pure functions from (assignment, current state, live brokers) to the new leader and ISR.

Every function returns None when it has no new state to propose; otherwise (leader, isr), leader -1
meaning "offline". The caller bumps the leader epoch and writes the state (fenced)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kctl.zk.model import PartitionState

NO_LEADER = -1

Decision = tuple[int, tuple[int, ...]]


def offline_partition_election(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], *, unclean: bool
) -> Decision:
    """The leader is gone (or -1): the first replica in assignment order that is alive and in the
    ISR; else the first live eligible leader replica (KIP-966; ISR := [it]); else, with unclean
    election enabled, the first live replica (ISR := [it]); else leader -1 with the ISR kept (never
    emptied: when its last member died it stays [that member])."""
    live_isr = tuple(r for r in state.isr if r in live)
    for replica in replicas:
        if replica in live and replica in state.isr:
            return replica, live_isr
    for replica in replicas:
        if replica in live and replica in state.elr:
            return replica, (replica,)
    if unclean:
        for replica in replicas:
            if replica in live:
                return replica, (replica,)
    return NO_LEADER, live_isr or state.isr


def unreachable_leader_election(
    replicas: Sequence[int], state: PartitionState, reporters: Collection[int]
) -> Decision | None:
    """The leader is alive (its session holds) but a majority of the partition's replicas report
    that they have had no answer from it (``reporters``: live replicas, the leader not among them):
    the first reporter in assignment order that is in the ISR leads, with the ISR less the old
    leader; failing that, the first reporter among the eligible leader replicas (KIP-966: they
    left the ISR while it was below min.insync.replicas, so they hold every record below the frozen
    high watermark), with the ISR [it]. None without a majority or such a reporter.

    As safe as a preferred election: the old leader acknowledges a write only once every member of
    its ISR has fetched it, and the new leader stops fetching from it on taking over; the old
    leader's ISR writes then fail on the bumped partition epoch, and it follows."""
    if len(reporters) * 2 <= len(replicas):
        return None
    for replica in replicas:
        if replica in reporters and replica in state.isr and replica != state.leader:
            return replica, tuple(r for r in state.isr if r != state.leader)
    for replica in replicas:
        if replica in reporters and replica in state.elr:
            return replica, (replica,)
    return None


def remove_from_isr(state: PartitionState, removed: Collection[int]) -> Decision | None:
    """Take ``removed`` out of the ISR of a partition whose leader stays (Kafka's
    removeReplicasFromIsr): None when none of them is in it; the ISR never becomes empty."""
    if not any(r in removed for r in state.isr):
        return None
    isr = tuple(r for r in state.isr if r not in removed)
    return state.leader, isr or state.isr


def controlled_shutdown_election(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], shutting_down: Collection[int]
) -> Decision | None:
    """Broker(s) ``shutting_down`` are leaving: a partition one of them leads gets the first live ISR
    member (in assignment order) that is not leaving, and loses them from its ISR; None when no
    such member exists (the leader stays until it dies)."""
    isr = tuple(r for r in state.isr if r not in shutting_down)
    for replica in replicas:
        if replica in isr and replica in live:
            return replica, isr
    return None


def preferred_replica_election(
    replicas: Sequence[int], state: PartitionState, live: Collection[int]
) -> Decision | None:
    """Leadership to the preferred (first) replica when it is alive, in the ISR and not leader yet."""
    if not replicas:
        return None
    preferred = replicas[0]
    if state.leader == preferred or preferred not in live or preferred not in state.isr:
        return None
    return preferred, state.isr


def reassignment_election(
    target: Sequence[int], state: PartitionState, live: Collection[int]
) -> Decision | None:
    """End of a reassignment: the ISR shrinks to the target replicas; the leader stays if it is one
    of them and alive, else the first target replica alive and in the ISR. None while no target
    replica can lead."""
    isr = tuple(r for r in state.isr if r in target)
    if state.leader in target and state.leader in live:
        return state.leader, isr
    for replica in target:
        if replica in isr and replica in live:
            return replica, isr
    return None
