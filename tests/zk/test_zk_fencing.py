"""Fenced controller writes against a real ZooKeeper: a deposed controller's batch fails with
ControllerMovedError and writes nothing; a stale partition epoch fails the whole batch with
PartitionStateConflictError; the admin request znodes are in Kafka's format."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kctl.testing import ZooKeeperServer
from kctl.zk.model import (
    BrokerRegistration,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
)
from kctl.zk.zookeeper import ZooKeeperRegistry


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect_string()


@pytest.fixture
def registries(connect: str) -> Iterator[tuple[ZooKeeperRegistry, ZooKeeperRegistry]]:
    first = ZooKeeperRegistry(connect, connection_timeout_ms=10_000)
    second = ZooKeeperRegistry(connect, connection_timeout_ms=10_000)
    first.start()
    second.start()
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_deposed_controller_cannot_write(registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry]) -> None:
    old, new = registries
    old.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
    assert old.try_become_controller(1)
    old_fence = old.controller_fence()
    assert old_fence is not None
    stored = old.set_partition_states(
        [
            PartitionStateUpdate("t", 0, PartitionState(1, 0, (1, 2), old_fence.epoch), -1),
            PartitionStateUpdate("t", 1, PartitionState(2, 0, (2, 1), old_fence.epoch), -1),
        ],
        old_fence,
    )
    assert {k: s.partition_epoch for k, s in stored.items()} == {("t", 0): 0, ("t", 1): 0}

    # the old controller's /controller goes (as when its session expires) and broker 2 wins
    old.kazoo_client.delete("/controller")
    assert new.try_become_controller(2)
    new_fence = new.controller_fence()
    assert new_fence is not None and new_fence.epoch == old_fence.epoch + 1

    with pytest.raises(ControllerMovedError):
        old.set_partition_states(
            [PartitionStateUpdate("t", 0, PartitionState(1, 1, (1,), old_fence.epoch), 0)], old_fence
        )
    assert old.partition_states("t")[0].leader_epoch == 0  # nothing written
    new.set_partition_states(
        [PartitionStateUpdate("t", 0, PartitionState(2, 1, (2,), new_fence.epoch), 0)], new_fence
    )
    state = old.partition_states("t")[0]
    assert (state.leader, state.leader_epoch, state.isr, state.partition_epoch) == (2, 1, (2,), 1)
    with pytest.raises(ControllerMovedError):
        old.set_topic_assignment("t", {0: (2, 1), 1: (2, 1)}, {}, {}, old_fence)


def test_stale_partition_epoch_fails_the_whole_batch(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    controller, leader = registries
    controller.create_topic("t", {0: (1, 2), 1: (1, 2)}, {})
    assert controller.try_become_controller(1)
    fence = controller.controller_fence()
    assert fence is not None
    initial = PartitionState(1, 0, (1, 2), fence.epoch)
    controller.set_partition_states([PartitionStateUpdate("t", p, initial, -1) for p in (0, 1)], fence)
    # the partition leader shrinks partition 1's ISR (decision 4) meanwhile
    leader.set_partition_state("t", 1, PartitionState(1, 0, (1,), fence.epoch), expected_partition_epoch=0)
    with pytest.raises(PartitionStateConflictError):
        controller.set_partition_states(
            [PartitionStateUpdate("t", p, PartitionState(2, 1, (2,), fence.epoch), 0) for p in (0, 1)],
            fence,
        )
    states = controller.partition_states("t")
    assert (states[0].leader, states[0].partition_epoch) == (1, 0)  # partition 0 untouched too
    assert states[1].isr == (1,)


def test_admin_znodes_in_kafkas_format(registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry]) -> None:
    registry, other = registries
    registry.admin_requests.set_reassignment_requests({("t", 0): (2, 3)})
    data, _ = other.kazoo_client.get("/admin/reassign_partitions")
    entry = {"topic": "t", "partition": 0, "replicas": [2, 3]}
    assert json.loads(data) == {"version": 1, "partitions": [entry]}
    assert other.admin_requests.reassignment_requests() == {("t", 0): (2, 3)}
    registry.admin_requests.set_reassignment_requests({})
    assert other.kazoo_client.exists("/admin/reassign_partitions") is None

    assert other.admin_requests.preferred_election_requests() is None
    registry.admin_requests.set_preferred_election_requests({("t", 1)})
    data, _ = other.kazoo_client.get("/admin/preferred_replica_election")
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 1}]}
    assert other.admin_requests.preferred_election_requests() == {("t", 1)}

    registry.request_controlled_shutdown(7)
    assert other.controlled_shutdown_requests() == {7: ("requested", -1)}
    other.answer_controlled_shutdown(7, 0)
    assert registry.controlled_shutdown_requests() == {7: ("done", 0)}
    registry.close()  # ephemeral: the request goes with the session
    assert other.controlled_shutdown_requests() == {}


def test_broker_id_in_use_is_refused(registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry]) -> None:
    from kctl.zk.model import BrokerIdInUseError

    first, second = registries
    first.register_broker(BrokerRegistration(5, "127.0.0.1", 9092))
    with pytest.raises(BrokerIdInUseError, match="already registered"):
        second.register_broker(BrokerRegistration(5, "127.0.0.1", 9093))


def test_reassignment_progress_is_kept_in_the_topic_znode(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    registry, other = registries
    registry.create_topic("t", {0: (1, 2)}, {})
    assert registry.try_become_controller(1)
    fence = registry.controller_fence()
    assert fence is not None
    registry.set_topic_assignment("t", {0: (3, 1, 2)}, {0: (3,)}, {0: (2,)}, fence)
    data, _ = other.kazoo_client.get("/brokers/topics/t")
    document = json.loads(data)
    assert document["partitions"] == {"0": [3, 1, 2]}
    assert document["adding_replicas"] == {"0": [3]}
    assert document["removing_replicas"] == {"0": [2]}
    record = other.get_topic("t")
    assert record is not None
    assert (record.adding_replicas, record.removing_replicas) == ({0: (3,)}, {0: (2,)})
