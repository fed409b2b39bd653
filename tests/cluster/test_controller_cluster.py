"""The controller in a real 3-broker cluster (LocalCluster, real ZooKeeper): initial partition
states, controller failover and leader failover after SIGKILL (new leader from the ISR, leader epoch
bumped), an unreplicated partition staying offline (unclean election off), preferred replica
election through /admin/preferred_replica_election, and controlled shutdown on SIGTERM.

The ISR expansion a partition leader would make (decision 4, replication's part) is written here
by the test itself, as that leader would write it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TypeVar

import pytest

from kctl.localcluster.broker import BrokerProcess, BrokerStartError
from kctl.localcluster.cluster import LocalCluster
from kctl.testing import ZooKeeperServer, wait_for
from kctl.zk.zookeeper import ZooKeeperRegistry

T = TypeVar("T")
SESSION_MS = 6000
PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "500",
}


@pytest.fixture
def cluster(tmp_path, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, properties=PROPERTIES, zookeeper=zookeeper) as started:
        yield started


@pytest.fixture
def registry(cluster: LocalCluster) -> Iterator[ZooKeeperRegistry]:
    with ZooKeeperRegistry(cluster.zookeeper_connect, connection_timeout_ms=10_000) as reg:
        yield reg


def summary(registry: ZooKeeperRegistry, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    return {p: (s.leader, s.leader_epoch, s.isr) for p, s in registry.partition_states(topic).items()}


def test_failover_preferred_election_and_controlled_shutdown(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    assert registry.controller_id() == 1  # the first broker started
    epoch = registry.controller_epoch()
    registry.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}, {})
    registry.create_topic("solo", {0: (2,)}, {})
    expected = {0: (1, 0, (1, 2, 3)), 1: (2, 0, (2, 3, 1)), 2: (3, 0, (3, 1, 2))}
    wait_for(lambda: summary(registry, "t") == expected, "initial states")
    wait_for(lambda: summary(registry, "solo") == {0: (2, 0, (2,))}, "solo's state")

    # SIGKILL the controller, which leads partition 0: another broker takes over within the
    # session timeout and partition 0 gets a new leader from its ISR with a higher epoch.
    killed_at = time.monotonic()
    cluster.kill(1)
    wait_for(lambda: registry.controller_id() in (2, 3), "a new controller", timeout=3 * SESSION_MS / 1000)
    assert registry.controller_epoch() == epoch + 1
    after = {0: (2, 1, (2, 3)), 1: (2, 1, (2, 3)), 2: (3, 1, (3, 2))}
    wait_for(lambda: summary(registry, "t") == after, "partition 0 led by broker 2")
    assert time.monotonic() - killed_at < 3 * SESSION_MS / 1000

    # SIGKILL broker 2: partitions 0 and 1 move to 3; solo (ISR [2] only) stays offline.
    cluster.kill(2)
    wait_for(
        lambda: summary(registry, "t") == {0: (3, 2, (3,)), 1: (3, 2, (3,)), 2: (3, 2, (3,))},
        "leaders moved to broker 3",
    )
    wait_for(lambda: summary(registry, "solo") == {0: (-1, 1, (2,))}, "solo offline")

    # Broker 1 and 2 come back: solo gets its leader again; the others wait for the ISR.
    cluster.restart(1)
    cluster.restart(2)
    wait_for(lambda: summary(registry, "solo") == {0: (2, 2, (2,))}, "solo back")
    assert all(s[0] == 3 for s in summary(registry, "t").values())

    # Replication brings brokers 1 and 2 back into partition 0's ISR (the leader, broker 3, expands
    # it as they catch up), then a preferred election is requested: broker 1 leads partition 0 again.
    wait_for(lambda: set(registry.partition_states("t")[0].isr) == {1, 2, 3}, "ISR expanded")
    epoch_before = registry.partition_states("t")[0].leader_epoch
    registry.admin_requests.set_preferred_election_requests({("t", 0)})
    wait_for(lambda: summary(registry, "t")[0][0] == 1, "preferred leader")
    assert summary(registry, "t")[0][1] > epoch_before
    wait_for(lambda: registry.admin_requests.preferred_election_requests() is None, "request handled")

    # SIGTERM broker 1 (it leads partition 0): controlled shutdown moves leadership off it before
    # it exits, to a replica that is alive and in the ISR, and drops it from every ISR.
    epoch_before = registry.partition_states("t")[0].leader_epoch
    cluster.stop_broker(1)
    assert "controlled shutdown of broker 1 succeeded" in cluster.broker(1).log_tail()
    for partition, state in registry.partition_states("t").items():
        assert state.leader in (2, 3), partition
        assert 1 not in state.isr, partition
    assert registry.partition_states("t")[0].leader_epoch > epoch_before

    # SIGTERM the controller: it resigns (and closes its session) as it stops, so the other broker
    # takes over without waiting for a session to expire.
    controller = registry.controller_id()
    assert controller in (2, 3)
    stopped_at = time.monotonic()
    cluster.stop_broker(controller)
    survivor = 5 - controller
    wait_for(lambda: registry.controller_id() == survivor, "the survivor as controller", timeout=6.0)
    assert time.monotonic() - stopped_at < SESSION_MS / 1000


def test_reassignment_follows_kafkas_steps(cluster: LocalCluster, registry: ZooKeeperRegistry) -> None:
    registry.create_topic("r", {0: (1, 2)}, {})
    wait_for(lambda: summary(registry, "r") == {0: (1, 0, (1, 2))}, "initial state")
    # Broker 3 (the replica being added) is frozen, so it cannot catch up and the reassignment
    # stays in its first step until it is resumed (within its ZooKeeper session timeout).
    cluster.broker(3).pause()
    try:
        registry.admin_requests.set_reassignment_requests({("r", 0): (2, 3)})

        # step 1: replicas = target + old, adding/removing visible in the topic znode, new epoch (two
        # writes, as Kafka's: the topic znode, then the partition state; a read may fall between)
        def started() -> bool:
            record = registry.get_topic("r")
            return (
                record is not None
                and record.assignment == {0: (2, 3, 1)}
                and summary(registry, "r")[0][1] >= 1
            )

        wait_for(started, "reassignment started", timeout=SESSION_MS / 2000)
        record = registry.get_topic("r")
        assert record is not None
        assert (record.adding_replicas, record.removing_replicas) == ({0: (3,)}, {0: (1,)})
        assert summary(registry, "r") == {0: (1, 1, (1, 2))}
        assert registry.admin_requests.reassignment_requests() == {("r", 0): (2, 3)}
    finally:
        cluster.broker(3).resume()

    # step 2: the leader adds the new replica to the ISR once it has caught up (replication), then
    # step 3: a leader from the target, ISR and replicas shrink to it, the request entry goes
    wait_for(lambda: summary(registry, "r") == {0: (2, 2, (2, 3))}, "reassignment complete")

    def finished() -> bool:
        done = registry.get_topic("r")
        return done is not None and done.assignment == {0: (2, 3)} and not done.adding_replicas

    wait_for(finished, "replicas shrunk")
    wait_for(lambda: registry.admin_requests.reassignment_requests() == {} or None, "request removed")
    assert cluster.broker(1).running


def test_rack_registration_and_duplicate_broker_id(
    cluster: LocalCluster, registry: ZooKeeperRegistry, tmp_path
) -> None:
    connect = {"zookeeper.connect": cluster.zookeeper_connect}
    racked = BrokerProcess(tmp_path / "racked", {**connect, "broker.id": "4", "broker.rack": "r1"})
    racked.start()
    try:
        racks = {b.broker_id: b.rack for b in registry.live_brokers()}
        assert racks == {1: None, 2: None, 3: None, 4: "r1"}
    finally:
        racked.stop()
    duplicate = BrokerProcess(tmp_path / "duplicate", {**connect, "broker.id": "2"})
    with pytest.raises(BrokerStartError):
        duplicate.start()
    errors = [line for line in duplicate.log_tail().splitlines() if "already registered" in line]
    assert len(errors) == 1 and "Broker id 2" in errors[0], duplicate.log_tail()
