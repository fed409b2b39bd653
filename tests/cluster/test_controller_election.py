"""The controller's leader selection rules (decision 3), as pure functions, and one controller event
run against the embedded registry (fenced writes, leader epoch bumps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.broker.controller import election
from kctl.broker.controller.controller import Controller
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import (
    BrokerRegistration,
    ControllerFence,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
)


def state(leader: int, isr: tuple[int, ...], epoch: int = 5) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, 3)


def test_offline_election_takes_first_live_isr_member_in_assignment_order() -> None:
    decision = election.offline_partition_election((1, 2, 3), state(1, (3, 2, 1)), {2, 3}, unclean=False)
    assert decision == (2, (3, 2))


def test_offline_election_without_live_isr_member_stays_offline_keeping_the_isr() -> None:
    decision = election.offline_partition_election((1, 2, 3), state(1, (1,)), {2, 3}, unclean=False)
    assert decision == (-1, (1,))


def test_unclean_election_takes_first_live_replica() -> None:
    decision = election.offline_partition_election((1, 2, 3), state(1, (1,)), {3, 2}, unclean=True)
    assert decision == (2, (2,))


def test_remove_from_isr_never_empties() -> None:
    assert election.remove_from_isr(state(1, (1, 2)), {2}) == (1, (1,))
    assert election.remove_from_isr(state(1, (1, 2)), {3}) is None
    assert election.remove_from_isr(state(1, (1,)), {1}) == (1, (1,))


def test_controlled_shutdown_moves_leadership_to_another_isr_member() -> None:
    assert election.controlled_shutdown_election((1, 2, 3), state(1, (1, 2, 3)), {2, 3}, {1}) == (2, (2, 3))
    assert election.controlled_shutdown_election((1, 2), state(1, (1,)), {2}, {1}) is None


def test_preferred_election_needs_preferred_alive_and_in_isr() -> None:
    assert election.preferred_replica_election((1, 2), state(2, (1, 2)), {1, 2}) == (1, (1, 2))
    assert election.preferred_replica_election((1, 2), state(2, (2,)), {1, 2}) is None
    assert election.preferred_replica_election((1, 2), state(2, (1, 2)), {2}) is None
    assert election.preferred_replica_election((1, 2), state(1, (1, 2)), {1, 2}) is None


def test_reassignment_election_keeps_a_leader_in_the_target() -> None:
    assert election.reassignment_election((2, 3), state(2, (1, 2, 3)), {1, 2, 3}) == (2, (2, 3))
    assert election.reassignment_election((3, 4), state(1, (1, 3, 4)), {1, 3, 4}) == (3, (3, 4))


@pytest.fixture
def registry(tmp_path: Path):
    with EmbeddedRegistry(tmp_path, fsync=False) as reg:
        reg.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
        yield reg


def test_controller_writes_initial_states_and_bumps_epochs(registry: EmbeddedRegistry) -> None:
    controller = Controller(1, registry)
    registry.create_topic("t", {0: (1,), 1: (1,)}, {})
    controller.process({"controller"})
    assert controller.active
    states = registry.partition_states("t")
    assert {p: (s.leader, s.leader_epoch, s.isr) for p, s in states.items()} == {
        0: (1, 0, (1,)),
        1: (1, 0, (1,)),
    }
    # the leader goes away: offline, ISR kept, epoch bumped
    registry.unregister_broker(1)
    controller.process({"brokers"})
    after = registry.partition_states("t")[0]
    assert (after.leader, after.leader_epoch, after.isr) == (-1, 1, (1,))
    # it comes back: leader again, epoch bumped again
    registry.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    controller.process({"brokers"})
    again = registry.partition_states("t")[0]
    assert (again.leader, again.leader_epoch, again.isr) == (1, 2, (1,))


def test_embedded_fenced_writes(registry: EmbeddedRegistry) -> None:
    registry.create_topic("t", {0: (1,)}, {})
    assert registry.try_become_controller(1)
    fence = registry.controller_fence()
    assert fence is not None
    new = PartitionState(1, 0, (1,), fence.epoch)
    registry.set_partition_states([PartitionStateUpdate("t", 0, new, -1)], fence)
    with pytest.raises(PartitionStateConflictError):
        registry.set_partition_states([PartitionStateUpdate("t", 0, new, -1)], fence)
    with pytest.raises(ControllerMovedError):
        registry.set_partition_states(
            [PartitionStateUpdate("t", 0, new, 0)], ControllerFence(fence.epoch - 1, 0)
        )


def register(registry: EmbeddedRegistry, *ids: int) -> None:
    for broker_id in ids:
        registry.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id))


def summary(registry: EmbeddedRegistry, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    return {p: (s.leader, s.leader_epoch, s.isr) for p, s in registry.partition_states(topic).items()}


def test_unclean_election_topic_config_overrides_broker_config(registry: EmbeddedRegistry) -> None:
    register(registry, 2)
    registry.create_topic("clean", {0: (1, 2)}, {})
    registry.create_topic("unclean", {0: (1, 2)}, {"unclean.leader.election.enable": "true"})
    controller = Controller(1, registry, unclean_leader_election=False)
    controller.process({"controller"})
    fence = registry.controller_fence()
    assert fence is not None
    for topic in ("clean", "unclean"):  # only broker 1 is in the ISR
        registry.set_partition_state(topic, 0, PartitionState(1, 0, (1,), fence.epoch))
    registry.unregister_broker(1)
    controller.process({"brokers"})
    assert summary(registry, "clean") == {0: (-1, 1, (1,))}
    assert summary(registry, "unclean") == {0: (2, 1, (2,))}


def test_auto_rebalance_moves_leadership_back_to_preferred(registry: EmbeddedRegistry) -> None:
    register(registry, 2)
    registry.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
    controller = Controller(1, registry, imbalance_percentage=10)
    controller.process({"controller"})
    fence = registry.controller_fence()
    assert fence is not None
    registry.set_partition_state("t", 1, PartitionState(1, 3, (1, 2), fence.epoch))
    controller.process({"partitions"})
    assert summary(registry, "t")[1] == (1, 3, (1, 2))  # no rebalance without the tick
    controller.process({"rebalance"})
    assert summary(registry, "t")[1] == (2, 4, (1, 2))


def test_controlled_shutdown_request_is_answered(registry: EmbeddedRegistry) -> None:
    register(registry, 2, 3)
    registry.create_topic("t", {0: (2, 3, 1), 1: (1, 2, 3)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    registry.request_controlled_shutdown(2)
    controller.process({"admin"})
    assert summary(registry, "t") == {0: (3, 1, (3, 1)), 1: (1, 1, (1, 3))}
    assert registry.controlled_shutdown_requests() == {2: ("done", 0)}


def test_a_broker_back_from_an_unclean_shutdown_leaves_every_isr_first(registry: EmbeddedRegistry) -> None:
    """The bug the power-loss nemesis found: broker 3, controller and leader, lost its unsynced
    writes, restarted, won the controller again and led on with an empty log at the same leader
    epoch (nothing looked dead to the new controller); the followers truncated to it. Announced,
    the restart moves its leaderships to other ISR members and takes it out of every ISR."""
    register(registry, 2, 3)
    registry.create_topic("t", {0: (3, 1, 2), 1: (1, 3, 2)}, {})
    registry.create_topic("solo", {0: (3,)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    assert summary(registry, "t") == {0: (3, 0, (3, 1, 2)), 1: (1, 0, (1, 3, 2))}
    registry.announce_unclean_restart(3)
    controller.process({"admin"})
    # led by 3: another ISR member leads; followed by 3: out of the ISR; 3 alone: nobody better
    assert summary(registry, "t") == {0: (1, 1, (1, 2)), 1: (1, 1, (1, 2))}
    assert summary(registry, "solo") == {0: (3, 0, (3,))}
    assert registry.unclean_restarts() == set()  # handled: broker 3 may take its roles
    controller.process({"brokers"})
    assert summary(registry, "t")[0] == (1, 1, (1, 2))  # it rejoins by catching up, not by decree


def test_reassignment_with_the_embedded_registry(registry: EmbeddedRegistry) -> None:
    register(registry, 2, 3)
    registry.create_topic("t", {0: (1, 2)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    registry.admin_requests.set_reassignment_requests({("t", 0): (3, 2)})
    controller.process({"admin"})
    record = registry.get_topic("t")
    assert record is not None
    assert (record.assignment, record.adding_replicas, record.removing_replicas) == (
        {0: (3, 2, 1)},
        {0: (3,)},
        {0: (1,)},
    )
    state = registry.partition_states("t")[0]
    registry.set_partition_state(
        "t", 0, PartitionState(1, state.leader_epoch, (1, 2, 3), state.controller_epoch)
    )
    controller.process({"partitions"})
    assert summary(registry, "t") == {0: (3, 2, (2, 3))}
    record = registry.get_topic("t")
    assert record is not None and record.assignment == {0: (3, 2)} and not record.adding_replicas
    assert registry.admin_requests.reassignment_requests() == {}


def test_replicas_in_a_failed_log_dir_lose_leadership_and_isr_membership(registry: EmbeddedRegistry) -> None:
    """KIP-112: broker 3 reports the replicas of its failed log dir offline. Those it led get
    another ISR member as leader, those it followed lose it from their ISR, the one it alone held
    goes offline (leader -1); its replicas in healthy dirs keep their leadership and ISR."""
    register(registry, 2, 3)
    registry.create_topic("t", {0: (3, 1, 2), 1: (1, 3, 2)}, {})
    registry.create_topic("solo", {0: (3,)}, {})
    registry.create_topic("healthy", {0: (3, 1, 2)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    registry.report_offline_replicas(3, [("t", 0), ("t", 1), ("solo", 0)])
    controller.process({"admin"})
    assert summary(registry, "t") == {0: (1, 1, (1, 2)), 1: (1, 1, (1, 2))}
    assert summary(registry, "solo") == {0: (-1, 1, (3,))}
    assert summary(registry, "healthy") == {0: (3, 0, (3, 1, 2))}
    controller.process({"rebalance"})  # 3 is preferred, but its replica is offline: no move back
    assert summary(registry, "t")[0] == (1, 1, (1, 2))


def test_unreachable_leader_election_needs_a_majority_of_reporters() -> None:
    """A leader alive in ZooKeeper that a majority of its replicas cannot reach: the first reporting
    ISR member leads, with the ISR less the old leader; one reporter of three is not enough (a
    bridge: the other follower still replicates)."""
    isr_full = state(1, (1, 2, 3))
    assert election.unreachable_leader_election((1, 2, 3), isr_full, {2, 3}) == (2, (2, 3))
    assert election.unreachable_leader_election((1, 3, 2), isr_full, {2, 3}) == (3, (2, 3))
    assert election.unreachable_leader_election((1, 2, 3), isr_full, {3}) is None
    # a reporter outside the ISR and not eligible never leads
    assert election.unreachable_leader_election((1, 2, 3), state(1, (1, 3)), {2, 3}) == (3, (3,))
    assert election.unreachable_leader_election((1, 2, 3), state(1, (1,)), {2, 3}) is None


def test_unreachable_leader_election_takes_an_eligible_leader_replica() -> None:
    """The leader shrank the ISR to itself first: its followers left the ISR below min ISR, so they
    are eligible (KIP-966) and one of them leads, alone in the ISR."""
    shrunk = PartitionState(1, 5, (1,), 1, 3, elr=(3, 2))
    assert election.unreachable_leader_election((1, 2, 3), shrunk, {2, 3}) == (2, (2,))
    assert election.unreachable_leader_election((1, 2, 3), shrunk, {3}) is None


def test_offline_election_takes_an_eligible_leader_replica_before_going_offline() -> None:
    shrunk = PartitionState(1, 5, (1,), 1, 3, elr=(2,))
    assert election.offline_partition_election((1, 2, 3), shrunk, {2, 3}, unclean=False) == (2, (2,))
    assert election.offline_partition_election((1, 2, 3), shrunk, {3}, unclean=False) == (-1, (1,))


def test_a_leader_its_followers_report_unreachable_loses_leadership(registry: EmbeddedRegistry) -> None:
    """Broker 1 keeps its session (registered) but brokers 2 and 3 report it unreachable: the
    controller moves its partition to 2 (epoch bumped, 1 out of the ISR). A partition 2 leads is
    left alone by 1's report of 2 (one reporter of three), and a withdrawn report moves nothing."""
    register(registry, 2, 3)
    registry.create_topic("t", {0: (1, 2, 3), 1: (2, 1, 3)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    assert summary(registry, "t") == {0: (1, 0, (1, 2, 3)), 1: (2, 0, (2, 1, 3))}
    registry.report_unreachable_leader(2, 1, True)
    controller.process({"admin"})
    assert summary(registry, "t")[0] == (1, 0, (1, 2, 3))  # one reporter: no move
    registry.report_unreachable_leader(3, 1, True)
    registry.report_unreachable_leader(1, 2, True)
    controller.process({"admin"})
    assert summary(registry, "t") == {0: (2, 1, (2, 3)), 1: (2, 0, (2, 1, 3))}
    assert controller.unreachable_leader_elections == 1
    registry.report_unreachable_leader(2, 1, False)
    registry.report_unreachable_leader(3, 1, False)
    controller.process({"admin"})
    assert summary(registry, "t")[0] == (2, 1, (2, 3))


def test_eligible_leader_replicas_survive_controller_writes_and_leave_on_an_unclean_restart(
    registry: EmbeddedRegistry,
) -> None:
    register(registry, 2, 3)
    registry.create_topic("t", {0: (1, 2, 3)}, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    fence = registry.controller_fence()
    assert fence is not None
    # the leader shrank the ISR to itself below min ISR: 2 and 3 eligible
    registry.set_partition_state("t", 0, PartitionState(1, 0, (1,), fence.epoch, elr=(2, 3)))
    registry.announce_unclean_restart(3)  # 3 may have lost unsynced records: no longer eligible
    controller.process({"admin"})
    after = registry.partition_states("t")[0]
    assert (after.leader, after.isr, after.elr) == (1, (1,), (2,))
    registry.unregister_broker(1)  # the leader dies: the eligible replica leads, alone in the ISR
    controller.process({"brokers"})
    after = registry.partition_states("t")[0]
    assert (after.leader, after.isr, after.elr) == (2, (2,), ())


def test_a_dead_brokers_leadership_moves_in_the_first_batches(
    registry: EmbeddedRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker's death changes every partition whose ISR it was in; the state changes that move a
    leader are written first, so its partitions are led again before the ISR-only changes are
    written (at 10,000 partitions those were most of 21 batches)."""
    from kctl.broker.controller import controller as controller_module

    monkeypatch.setattr(controller_module, "_BATCH", 4)
    register(registry, 2, 3)
    # partitions 12-17 led by 1 (preferred), 0-11 led by 2 or 3 with 1 a follower: 1 in every ISR;
    # those it leads come last in the controller's pass
    assignment = {p: (1, 2, 3) if p >= 12 else ((2, 1, 3) if p % 2 else (3, 1, 2)) for p in range(18)}
    registry.create_topic("t", assignment, {})
    controller = Controller(1, registry)
    controller.process({"controller"})
    assert {s.leader for p, s in registry.partition_states("t").items() if p >= 12} == {1}
    batches: list[list[int]] = []
    write = registry.set_partition_states

    def recording(updates, fence):  # type: ignore[no-untyped-def]
        batches.append([u.partition for u in updates])
        return write(updates, fence)

    monkeypatch.setattr(registry, "set_partition_states", recording)
    registry.unregister_broker(1)  # broker 1 dies (the embedded registry keeps one controller)
    controller.process({"brokers"})
    assert sorted(p for batch in batches for p in batch) == list(range(18))  # every ISR changes
    first_written = [p for batch in batches[:2] for p in batch]  # 6 leader moves fit in 2 batches of 4
    assert set(range(12, 18)) <= set(first_written), batches
    states = registry.partition_states("t")
    assert all(s.leader in (2, 3) and 1 not in s.isr for s in states.values())
