"""The registry's behaviour, one suite run against both backends: the embedded registry (a JSON
document in a directory) and the ZooKeeper registry (a real server, a fresh chroot per test)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kctl.testing import Notifications, ZooKeeperServer
from kctl.zk import open_registry
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import (
    BrokerRegistration,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryUnavailableError,
    TopicExistsError,
    TopicRecord,
    UnknownTopicError,
)
from kctl.zk.registry import Registry
from kctl.zk.zookeeper import ZooKeeperRegistry

CLUSTER_ID = re.compile(r"[A-Za-z0-9_-]{22}")


class Cluster:
    """Opens started registries on one cluster's metadata (one directory / one chroot) and closes
    them all at the end of the test."""

    def __init__(self, backend: str, factory: Callable[[], Registry]) -> None:
        self.backend = backend
        self._factory = factory
        self.opened: list[Registry] = []

    def open(self) -> Registry:
        registry = self._factory()
        registry.start()
        self.opened.append(registry)
        return registry

    def close_all(self) -> None:
        for registry in self.opened:
            registry.close()


@pytest.fixture(params=["embedded", pytest.param("zookeeper", marks=pytest.mark.zk)])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    if request.param == "embedded":
        directory = tmp_path / "metadata"
        result = Cluster("embedded", lambda: EmbeddedRegistry(directory))
    else:
        server: ZooKeeperServer = request.getfixturevalue("zookeeper")
        connect = server.connect_string()
        result = Cluster("zookeeper", lambda: ZooKeeperRegistry(connect, connection_timeout_ms=10_000))
    yield result
    result.close_all()


@pytest.fixture
def registry(cluster: Cluster) -> Registry:
    return cluster.open()


def restart(cluster: Cluster, registry: Registry) -> Registry:
    """Close ``registry`` and open the cluster's metadata again, as a restarted broker does."""
    registry.close()
    return cluster.open()


# -- cluster id -----------------------------------------------------------------------------------
def test_cluster_id_is_created_once_in_kafkas_format(cluster: Cluster, registry: Registry) -> None:
    cluster_id = registry.cluster_id()
    assert CLUSTER_ID.fullmatch(cluster_id), cluster_id
    assert registry.cluster_id() == cluster_id
    assert restart(cluster, registry).cluster_id() == cluster_id


def test_each_cluster_has_its_own_id(tmp_path: Path) -> None:
    with EmbeddedRegistry(tmp_path / "a") as a, EmbeddedRegistry(tmp_path / "b") as b:
        assert a.cluster_id() != b.cluster_id()


# -- brokers --------------------------------------------------------------------------------------
def test_register_list_and_unregister_brokers(registry: Registry) -> None:
    seen = Notifications()
    registry.add_listener(seen)
    one = BrokerRegistration(1, "127.0.0.1", 9092, rack="r1")
    two = BrokerRegistration(2, "127.0.0.1", 9093, listeners=("PLAINTEXT://127.0.0.1:9093", "SSL://h:9094"))
    registry.register_broker(two)
    registry.register_broker(one)
    assert registry.live_brokers() == [one, two]
    assert one.listeners == ("PLAINTEXT://127.0.0.1:9092",)
    assert "brokers" in seen.reasons

    registry.unregister_broker(1)
    assert registry.live_brokers() == [two]
    registry.unregister_broker(1)  # no longer registered: a no-op
    assert registry.live_brokers() == [two]


def test_registering_again_replaces_the_registration(registry: Registry) -> None:
    registry.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    moved = BrokerRegistration(1, "127.0.0.1", 19092, rack="r2")
    registry.register_broker(moved)
    assert registry.live_brokers() == [moved]


def test_registrations_and_controller_do_not_survive_a_restart(cluster: Cluster, registry: Registry) -> None:
    registry.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    assert registry.try_become_controller(1)
    again = restart(cluster, registry)
    assert again.live_brokers() == []
    assert again.controller_id() is None


# -- controller -----------------------------------------------------------------------------------
def test_controller_election_and_epoch(cluster: Cluster, registry: Registry) -> None:
    seen = Notifications()
    registry.add_listener(seen)
    assert registry.controller_id() is None
    assert registry.controller_epoch() == 0

    assert registry.try_become_controller(1)
    assert registry.controller_id() == 1
    assert registry.controller_epoch() == 1
    assert "controller" in seen.reasons
    assert registry.try_become_controller(1)  # already controller: the epoch stays
    assert registry.controller_epoch() == 1
    assert not registry.try_become_controller(2)
    assert registry.controller_id() == 1

    registry.resign_controller()
    assert registry.controller_id() is None
    assert registry.try_become_controller(2)
    assert registry.controller_epoch() == 2

    again = restart(cluster, registry)
    assert again.controller_epoch() == 2  # the epoch persists
    assert again.try_become_controller(1)
    assert again.controller_epoch() == 3


# -- topics ---------------------------------------------------------------------------------------
def test_create_get_list_and_delete_topics(registry: Registry) -> None:
    seen = Notifications()
    registry.add_listener(seen)
    given_id = uuid.UUID("6f1c1c9b-8a47-4c55-9d2e-3c2a7d1a9b01")
    orders = registry.create_topic(
        "orders", {0: (1, 2), 1: (2, 1)}, {"retention.ms": "1000"}, topic_id=given_id
    )
    assert orders == TopicRecord("orders", given_id, {0: (1, 2), 1: (2, 1)}, {"retention.ms": "1000"})
    assert orders.partitions == 2
    assert orders.replication_factor == 2
    assert "topics" in seen.reasons

    events = registry.create_topic("events", {0: (1,)}, {})
    assert events.topic_id.version == 4
    assert events.configs == {}

    assert registry.get_topic("orders") == orders
    assert registry.get_topic("missing") is None
    assert registry.topics() == {"events": events, "orders": orders}

    seen.clear()
    registry.delete_topic("orders")
    assert "topics" in seen.reasons
    assert registry.get_topic("orders") is None
    assert list(registry.topics()) == ["events"]


def test_topic_errors(registry: Registry) -> None:
    registry.create_topic("t", {0: (1,)}, {})
    with pytest.raises(TopicExistsError, match="'t' already exists"):
        registry.create_topic("t", {0: (1,)}, {})
    with pytest.raises(UnknownTopicError):
        registry.delete_topic("nope")
    with pytest.raises(UnknownTopicError):
        registry.set_topic_configs("nope", {})
    with pytest.raises(UnknownTopicError):
        registry.add_partitions("nope", {0: (1,)})
    with pytest.raises(UnknownTopicError):
        registry.partition_states("nope")
    with pytest.raises(InvalidTopicError):
        registry.create_topic("bad/name", {0: (1,)}, {})
    with pytest.raises(InvalidTopicError):
        registry.create_topic("x" * 250, {0: (1,)}, {})
    with pytest.raises(InvalidReplicaAssignmentError, match="consecutive"):
        registry.create_topic("gap", {0: (1,), 2: (1,)}, {})
    with pytest.raises(InvalidReplicaAssignmentError, match="Duplicate"):
        registry.create_topic("dup", {0: (1, 1)}, {})
    with pytest.raises(InvalidReplicaAssignmentError, match="same number of replicas"):
        registry.create_topic("uneven", {0: (1, 2), 1: (1,)}, {})
    registry.create_topic("a.b", {0: (1,)}, {})
    with pytest.raises(InvalidTopicError, match="collides"):
        registry.create_topic("a_b", {0: (1,)}, {})
    assert sorted(registry.topics()) == ["a.b", "t"]


def test_create_topics_answers_per_topic(registry: Registry) -> None:
    """Many topics at once (CreateTopics of a hundred: a few multi-ops in ZooKeeper): each gets its
    record or its own error, in order; the others are created all the same."""
    registry.create_topic("taken", {0: (1,)}, {})
    registry.create_topic("a.b", {0: (1,)}, {})
    registry.create_topic("reborn", {0: (1,)}, {"retention.ms": "5"})
    registry.delete_topic("reborn")  # a deleted topic may leave its config znode behind
    seen = Notifications()
    registry.add_listener(seen)
    names = [f"t{i}" for i in range(120)]  # more than one chunk
    outcomes = registry.create_topics(
        [
            *((name, {0: (1,), 1: (1,)}, {"retention.ms": "7"}) for name in names),
            ("taken", {0: (1,)}, {}),
            ("a_b", {0: (1,)}, {}),
            ("gap", {0: (1,), 2: (1,)}, {}),
            ("reborn", {0: (1,)}, {"cleanup.policy": "compact"}),
            ("x.y", {0: (1,)}, {}),
            ("x_y", {0: (1,)}, {}),  # collides with one created in the same batch
        ]
    )
    created = outcomes[:120]
    assert [r.name for r in created if isinstance(r, TopicRecord)] == names
    assert isinstance(outcomes[120], TopicExistsError)
    assert isinstance(outcomes[121], InvalidTopicError) and "collides" in str(outcomes[121])
    assert isinstance(outcomes[122], InvalidReplicaAssignmentError)
    assert isinstance(outcomes[123], TopicRecord) and outcomes[123].configs == {"cleanup.policy": "compact"}
    assert isinstance(outcomes[124], TopicRecord)
    assert isinstance(outcomes[125], InvalidTopicError)
    topics = registry.topics()
    assert set(topics) == {"taken", "a.b", "reborn", "x.y", *names}
    assert topics["t7"] == created[7] and topics["t7"].configs == {"retention.ms": "7"}
    assert topics["reborn"].configs == {"cleanup.policy": "compact"}
    assert "topics" in seen.reasons


def test_a_deleted_topic_can_be_created_again(registry: Registry) -> None:
    first = registry.create_topic("t", {0: (1,), 1: (1,)}, {"cleanup.policy": "compact"})
    registry.set_partition_state("t", 0, PartitionState(1, 3, (1,)))
    registry.delete_topic("t")
    second = registry.create_topic("t", {0: (1,)}, {})
    assert second.topic_id != first.topic_id
    assert registry.get_topic("t") == second
    assert registry.partition_states("t") == {}


def test_add_partitions(registry: Registry) -> None:
    registry.create_topic("t", {0: (1, 2)}, {"retention.ms": "5"})
    seen = Notifications()
    registry.add_listener(seen)
    updated = registry.add_partitions("t", {1: (2, 1), 2: (1, 2)})
    assert updated.assignment == {0: (1, 2), 1: (2, 1), 2: (1, 2)}
    assert updated.configs == {"retention.ms": "5"}
    assert registry.get_topic("t") == updated
    assert "topics" in seen.reasons

    with pytest.raises(InvalidPartitionsError, match=r"numbered 3\.\.3"):
        registry.add_partitions("t", {2: (1, 2)})  # not new
    with pytest.raises(InvalidPartitionsError):
        registry.add_partitions("t", {4: (1, 2)})  # leaves a gap
    with pytest.raises(InvalidPartitionsError):
        registry.add_partitions("t", {})
    with pytest.raises(InvalidReplicaAssignmentError, match="Inconsistent replication factor"):
        registry.add_partitions("t", {3: (1,)})
    assert registry.get_topic("t") == updated


# -- configs --------------------------------------------------------------------------------------
def test_set_topic_configs_replaces_the_overrides(registry: Registry) -> None:
    registry.create_topic("t", {0: (1,)}, {"retention.ms": "1", "segment.bytes": "1024"})
    seen = Notifications()
    registry.add_listener(seen)
    registry.set_topic_configs("t", {"cleanup.policy": "compact"})
    assert registry.get_topic("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]
    assert "configs" in seen.reasons
    registry.set_topic_configs("t", {})
    assert registry.get_topic("t").configs == {}  # type: ignore[union-attr]


# -- partition state ------------------------------------------------------------------------------
def test_partition_state_round_trip(registry: Registry) -> None:
    registry.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
    assert registry.partition_states("t") == {}
    seen = Notifications()
    registry.add_listener(seen)

    stored = registry.set_partition_state(
        "t", 1, PartitionState(2, 0, (2, 1), controller_epoch=4, partition_epoch=99)
    )
    assert stored == PartitionState(2, 0, (2, 1), controller_epoch=4, partition_epoch=0)
    assert "partitions" in seen.reasons
    assert registry.partition_states("t") == {1: stored}

    shrunk = registry.set_partition_state("t", 1, PartitionState(2, 1, (2,), controller_epoch=4))
    assert shrunk.partition_epoch == 1
    leader0 = registry.set_partition_state("t", 0, PartitionState(1, 0, [1, 2], 4))  # type: ignore[arg-type]
    assert leader0.isr == (1, 2)
    assert registry.partition_states("t") == {0: leader0, 1: shrunk}

    with pytest.raises(UnknownTopicError):
        registry.set_partition_state("t", 2, PartitionState(1, 0, (1,)))
    with pytest.raises(UnknownTopicError):
        registry.set_partition_state("nope", 0, PartitionState(1, 0, (1,)))


def test_conditional_partition_state_writes(registry: Registry) -> None:
    registry.create_topic("t", {0: (1,)}, {})
    first = registry.set_partition_state("t", 0, PartitionState(1, 0, (1,)), expected_partition_epoch=-1)
    assert first.partition_epoch == 0
    with pytest.raises(PartitionStateConflictError):
        registry.set_partition_state("t", 0, PartitionState(1, 1, (1,)), expected_partition_epoch=-1)
    second = registry.set_partition_state("t", 0, PartitionState(1, 1, (1,)), expected_partition_epoch=0)
    assert second.partition_epoch == 1
    with pytest.raises(PartitionStateConflictError):
        registry.set_partition_state("t", 0, PartitionState(-1, 2, ()), expected_partition_epoch=0)
    assert registry.partition_states("t") == {0: second}


def test_a_leaders_isr_changes_are_stored_or_refused_each_on_its_own(registry: Registry) -> None:
    registry.create_topic("t", {0: (1, 2), 1: (1, 2), 2: (1, 2)}, {})
    registry.create_topic("gone", {0: (1, 2)}, {})
    for partition in (0, 1, 2):
        registry.set_partition_state("t", partition, PartitionState(1, 0, (1,)), expected_partition_epoch=-1)
    registry.set_partition_state("t", 1, PartitionState(1, 1, (1,)))  # moved on to partition epoch 1
    registry.set_partition_state("gone", 0, PartitionState(1, 0, (1,)))
    registry.delete_topic("gone")
    seen = Notifications()
    registry.add_listener(seen)

    outcome = registry.alter_partition_states(
        [
            PartitionStateUpdate("t", 0, PartitionState(1, 0, (1, 2)), expected_partition_epoch=0),
            PartitionStateUpdate("t", 1, PartitionState(1, 0, (1, 2)), expected_partition_epoch=0),
            PartitionStateUpdate("t", 2, PartitionState(1, 0, (1, 2), controller_epoch=3), 0),
            PartitionStateUpdate("gone", 0, PartitionState(1, 0, (1, 2)), expected_partition_epoch=0),
        ]
    )

    assert outcome[("t", 0)] == PartitionState(1, 0, (1, 2), partition_epoch=1)
    assert isinstance(outcome[("t", 1)], PartitionStateConflictError)
    assert outcome[("t", 2)] == PartitionState(1, 0, (1, 2), controller_epoch=3, partition_epoch=1)
    assert isinstance(outcome[("gone", 0)], UnknownTopicError)
    assert registry.partition_states("t") == {
        0: outcome[("t", 0)],
        1: PartitionState(1, 1, (1,), partition_epoch=1),
        2: outcome[("t", 2)],
    }
    assert "partitions" in seen.reasons


# -- persistence ----------------------------------------------------------------------------------
def test_metadata_survives_a_restart(cluster: Cluster, registry: Registry) -> None:
    cluster_id = registry.cluster_id()
    registry.try_become_controller(1)
    topic = registry.create_topic("t", {0: (1,), 1: (1,)}, {"cleanup.policy": "compact"})
    topic = registry.add_partitions("t", {2: (1,)})
    registry.set_topic_configs("t", {"retention.ms": "60000"})
    state = registry.set_partition_state("t", 2, PartitionState(1, 7, (1,), controller_epoch=1))

    again = restart(cluster, registry)
    assert again.cluster_id() == cluster_id
    assert again.controller_epoch() == 1
    assert again.get_topic("t") == TopicRecord(
        "t", topic.topic_id, topic.assignment, {"retention.ms": "60000"}
    )
    assert again.partition_states("t") == {2: state}


# -- lifecycle ------------------------------------------------------------------------------------
def test_a_closed_registry_is_unavailable(registry: Registry) -> None:
    registry.close()
    registry.close()  # idempotent
    with pytest.raises(RegistryUnavailableError):
        registry.topics()
    with pytest.raises(RegistryUnavailableError):
        registry.register_broker(BrokerRegistration(1, "h", 1))


def test_a_failing_listener_does_not_stop_the_others(registry: Registry) -> None:
    def broken(reason: str) -> None:
        raise RuntimeError("listener bug")

    seen = Notifications()
    registry.add_listener(broken)
    registry.add_listener(seen)
    registry.create_topic("t", {0: (1,)}, {})
    assert "topics" in seen.reasons
    registry.remove_listener(seen)
    seen.clear()
    registry.delete_topic("t")
    assert seen.reasons == []


def test_open_registry_picks_the_backend(tmp_path: Path) -> None:
    embedded = open_registry(None, tmp_path)
    assert isinstance(embedded, EmbeddedRegistry)
    assert isinstance(open_registry("", tmp_path), EmbeddedRegistry)
    zk = open_registry(" 127.0.0.1:2181/kafka ", tmp_path, session_timeout_ms=6000, connection_timeout_ms=100)
    assert isinstance(zk, ZooKeeperRegistry)
    assert zk.connect == "127.0.0.1:2181/kafka"
    assert (zk.session_timeout_ms, zk.connection_timeout_ms) == (6000, 100)
    with embedded:
        assert CLUSTER_ID.fullmatch(embedded.cluster_id())
