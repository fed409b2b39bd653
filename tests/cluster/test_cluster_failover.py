"""Fault injection on one 3-broker cluster: leaders SIGKILLed under acks=all load (confluent-kafka
and kcat), a follower killed and restarted, the controller killed, divergent logs (KIP-101/KIP-279).

Every test leaves the cluster with all three brokers running. The checks are end to end: every
acknowledged record is read back once at its acknowledged offset, and every replica's log (read
with ``kctl log dump --deep -f jsonl``) is identical below the high watermark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kctl.testing import LocalCluster
from kctl.testing.cluster_checks import check_acked_read_once, wait_for_identical_replicas
from kctl.testing.cluster_clients import (
    Delivery,
    SequencedProducer,
    create_topic,
    kcat_produce,
    read_partitions,
    replica_batches,
)
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
}
ROUNDS = 5
FETCH_WAIT_S = 1.0
KCAT_RECORDS = 3000  # at 500/s: kcat is still producing while the leader is killed and replaced


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


@pytest.fixture(autouse=True)
def all_brokers_running(cluster: LocalCluster, view: ClusterView) -> Iterator[None]:
    """Each test starts and ends with every broker running and registered."""
    yield
    for broker in cluster.brokers.values():
        if not broker.running:
            broker.start()  # right after a kill: it waits for its old registration to expire
        else:
            broker.resume()
    view.wait_for(lambda: view.live_brokers() == set(cluster.brokers), "all brokers registered")


def _new_topic(
    cluster: LocalCluster, view: ClusterView, name: str, partitions: int = 3, min_isr: int = 2
) -> None:
    create_topic(cluster.bootstrap_servers, name, partitions, 3, {"min.insync.replicas": str(min_isr)})
    view.wait_for_full_isr(name, partitions)


def _kill_and_restart_leader(cluster: LocalCluster, view: ClusterView, topic: str, partition: int) -> int:
    """SIGKILL the partition's leader, wait for another leader, restart it, wait for a full ISR."""
    leader = view.wait_for_leader(topic, partition).leader
    cluster.kill(leader)
    view.wait_for_leader(topic, partition, not_in={leader})
    cluster.restart(leader)
    view.wait_for_isr(topic, partition, set(view.assignment(topic)[partition]), timeout=60)
    return leader


def test_leader_kills_under_acks_all_load_confluent(cluster: LocalCluster, view: ClusterView) -> None:
    topic = "failover-confluent"
    _new_topic(cluster, view, topic)
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="ck").start()
    killed = []
    try:
        producer.wait_for_acks(200)
        for _ in range(ROUNDS):
            before = producer.acked_count()
            killed.append(_kill_and_restart_leader(cluster, view, topic, 0))
            producer.wait_for_acks(before + 100, timeout=60)
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:10]
    assert len(killed) == ROUNDS
    records = read_partitions(cluster.bootstrap_servers, topic, [0, 1, 2])
    assert check_acked_read_once(producer.acked, records) == []
    assert sum(len(rows) for rows in records.values()) == len(producer.acked)
    wait_for_identical_replicas(cluster, view, topic, [0, 1, 2])


def test_leader_kills_under_acks_all_load_kcat(cluster: LocalCluster, view: ClusterView) -> None:
    topic = "failover-kcat"
    _new_topic(cluster, view, topic, partitions=1)
    acknowledged: list[str] = []
    for round_number in range(ROUNDS):
        values = [f"kcat{round_number}-{n}" for n in range(KCAT_RECORDS)]
        outcome: list[tuple[bool, str]] = []
        sender = threading.Thread(
            target=lambda v=values, o=outcome: o.append(kcat_produce(cluster.bootstrap_servers, topic, 0, v))
        )
        sender.start()
        _kill_and_restart_leader(cluster, view, topic, 0)
        sender.join()
        assert outcome[0][0], f"round {round_number}: kcat failed to deliver: {outcome[0][1][-2000:]}"
        acknowledged += values
    records = read_partitions(cluster.bootstrap_servers, topic, [0])
    read_values = [value for _, value in records[0]]
    assert sorted(read_values) == sorted(acknowledged), "kcat's acknowledged records differ from what is read"
    assert len(set(read_values)) == len(read_values)
    for round_number in range(ROUNDS):  # in order within each kcat run
        run = [value for value in read_values if value.startswith(f"kcat{round_number}-")]
        assert run == [f"kcat{round_number}-{n}" for n in range(KCAT_RECORDS)]
    wait_for_identical_replicas(cluster, view, topic, [0])


def _isr_in_metadata(cluster: LocalCluster, topic: str, partition: int) -> set[int]:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=10)
    return set(metadata.topics[topic].partitions[partition].isrs)


def test_follower_killed_is_under_replicated_then_catches_up(
    cluster: LocalCluster, view: ClusterView
) -> None:
    topic = "follower-restart"
    _new_topic(cluster, view, topic, partitions=1)
    state = view.wait_for_leader(topic, 0)
    follower = next(b for b in view.assignment(topic)[0] if b != state.leader and b != view.controller_id())
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="fr").start()
    try:
        producer.wait_for_acks(100)
        cluster.kill(follower)
        rest = set(view.assignment(topic)[0]) - {follower}
        view.wait_for_isr(topic, 0, rest)
        view.wait_for(lambda: _isr_in_metadata(cluster, topic, 0) == rest, "Metadata's ISR without it")
        before = producer.acked_count()
        producer.wait_for_acks(before + 200)  # min.insync.replicas=2 still met
        cluster.restart(follower)
        view.wait_for_isr(topic, 0, rest | {follower}, timeout=60)
        view.wait_for(lambda: _isr_in_metadata(cluster, topic, 0) == rest | {follower}, "Metadata's full ISR")
        producer.wait_for_acks(producer.acked_count() + 100)
    finally:
        producer.stop()
    assert not producer.errors
    assert check_acked_read_once(producer.acked, read_partitions(cluster.bootstrap_servers, topic, [0])) == []
    wait_for_identical_replicas(cluster, view, topic, [0])


def test_controller_killed_another_takes_over_and_elections_still_work(
    cluster: LocalCluster, view: ClusterView
) -> None:
    topic = "controller-kill"
    _new_topic(cluster, view, topic)
    controller = view.wait_for_controller()
    cluster.kill(controller)
    successor = view.wait_for_controller(not_in={controller})
    assert successor in cluster.brokers
    for partition in range(3):  # partitions the old controller led are led elsewhere
        view.wait_for_leader(topic, partition, not_in={controller})
    cluster.restart(controller)
    view.wait_for_full_isr(topic, 3, timeout=60)
    # a later election, run by the new controller: kill a leader that is not the controller
    partition, victim = next(
        (p, view.leader_of(topic, p)) for p in range(3) if view.leader_of(topic, p) != view.controller_id()
    )
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="ct", partition=partition).start()
    try:
        producer.wait_for_acks(50)
        cluster.kill(victim)
        view.wait_for_leader(topic, partition, not_in={victim})
        producer.wait_for_acks(producer.acked_count() + 100)
        cluster.restart(victim)
        view.wait_for_full_isr(topic, 3, timeout=60)
    finally:
        producer.stop()
    assert not producer.errors
    records = read_partitions(cluster.bootstrap_servers, topic, [partition])
    assert check_acked_read_once(producer.acked, records) == []


def _produce(cluster: LocalCluster, topic: str, values: list[str], acks: str) -> list[Delivery]:
    delivered: list[Delivery] = []
    failed: list[str] = []

    def on_delivery(error: object, message: object) -> None:
        if error is None:
            delivered.append(Delivery(message.partition(), message.offset(), message.value().decode()))  # type: ignore[attr-defined]
        else:
            failed.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": acks,
            "message.timeout.ms": 30000,
            "linger.ms": 1,
        }
    )
    for value in values:
        producer.produce(topic, value=value.encode(), partition=0, on_delivery=on_delivery)
    producer.flush(60)
    assert not failed, failed[:5]
    return delivered


def test_divergent_log_of_a_dead_leader_is_truncated(cluster: LocalCluster, view: ClusterView) -> None:
    """KIP-101: acks=1 records only the leader had are dropped when it comes back as a follower."""
    topic = "divergent"
    _new_topic(cluster, view, topic, partitions=1, min_isr=1)
    acked = _produce(cluster, topic, [f"all-{n}" for n in range(50)], "all")
    old_leader = view.wait_for_leader(topic, 0).leader
    followers = [b for b in view.assignment(topic)[0] if b != old_leader]
    for follower in followers:
        cluster.broker(follower).pause()
    try:
        # a follower fetch parked on the leader is answered within replica.fetch.wait.max.ms (500 ms
        # by default); wait it out so no fetch response carries the next records to a paused follower
        time.sleep(FETCH_WAIT_S)
        _produce(cluster, topic, [f"only-{n}" for n in range(20)], "1")  # on the leader alone
        cluster.kill(old_leader)
    finally:
        for follower in followers:
            cluster.broker(follower).resume()
    new_state = view.wait_for_leader(topic, 0, not_in={old_leader})
    assert new_state.leader in followers
    dead_log = replica_batches(cluster.broker(old_leader).data_dir, topic, 0, up_to=1 << 62)
    diverged = [v for batch in dead_log for _, _, v in batch["records"] if str(v).startswith("only-")]
    assert len(diverged) == 20, "the dead leader's log should hold the records it alone appended"
    acked += _produce(cluster, topic, [f"new-{n}" for n in range(30)], "all")
    cluster.restart(old_leader)
    view.wait_for_isr(topic, 0, set(view.assignment(topic)[0]), timeout=60)
    records = read_partitions(cluster.bootstrap_servers, topic, [0])
    assert check_acked_read_once(acked, records) == []
    assert not [value for _, value in records[0] if value.startswith("only-")]
    wait_for_identical_replicas(cluster, view, topic, [0])


def test_two_quick_failovers_converge(cluster: LocalCluster, view: ClusterView) -> None:
    """Two leaders killed one right after the other, under acks=all load; all replicas converge."""
    topic = "double-failover"
    _new_topic(cluster, view, topic, partitions=1)
    producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="df").start()
    try:
        producer.wait_for_acks(200)
        first = view.wait_for_leader(topic, 0).leader
        cluster.kill(first)
        second = view.wait_for_leader(topic, 0, not_in={first}).leader
        cluster.kill(second)
        cluster.restart(first)
        view.wait_for_leader(topic, 0, not_in={second}, timeout=60)
        cluster.restart(second)
        view.wait_for_isr(topic, 0, set(view.assignment(topic)[0]), timeout=60)
        producer.wait_for_acks(producer.acked_count() + 100, timeout=60)
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:10]
    records = read_partitions(cluster.bootstrap_servers, topic, [0])
    assert check_acked_read_once(producer.acked, records) == []
    wait_for_identical_replicas(cluster, view, topic, [0])
