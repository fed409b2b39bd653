"""Metrics of a 3-broker cluster, scraped from every broker's /metrics: exactly one broker reports
an active controller; SIGKILL of a follower makes the under-replicated partitions reported by the
brokers still up add up to the partitions it hosted, and after its restart they go back to 0."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from kctl.testing import LocalCluster, wait_for
from kctl.testing.cluster_clients import create_topic
from kctl.testing.metrics import Samples, scrape_all
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

PROPERTIES = {
    "metrics.listener": "http://127.0.0.1:0",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}
TOPIC = "metered"
PARTITIONS = 6
URP = "kafka_server_replicamanager_underreplicatedpartitions"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"
ELECTIONS = "kafka_controller_controllerstats_leaderelection_total"


def _scrape(cluster: LocalCluster) -> list[Samples]:
    return scrape_all(b.metrics_url for b in cluster.brokers.values() if b.running)


def _sum(cluster: LocalCluster, name: str) -> float:
    return sum(samples.value(name) or 0 for samples in _scrape(cluster))


def _report(cluster: LocalCluster) -> str:
    lines = []
    for broker_id, broker in cluster.brokers.items():
        if broker.running and broker.metrics_url:
            [samples] = scrape_all([broker.metrics_url])
            lines.append(f"broker {broker_id}: urp={samples.value(URP)} active={samples.value(ACTIVE)}")
        else:
            lines.append(f"broker {broker_id}: down")
    return "\n".join(lines)


def test_urp_follows_a_killed_follower_and_one_controller_is_active(
    local_cluster_factory: ClusterFactory,
) -> None:
    cluster = local_cluster_factory(3, PROPERTIES)
    assert all(b.metrics_url for b in cluster.brokers.values())
    create_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS, 2)
    wait_for(lambda: _sum(cluster, ACTIVE) == 1, "one active controller", describe=lambda: _report(cluster))
    wait_for(
        lambda: _sum(cluster, URP) == 0, "no under-replicated partition", describe=lambda: _report(cluster)
    )
    for samples in _scrape(cluster):  # every broker timed its ZooKeeper operations (registration, reads)
        assert (samples.value("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count") or 0) > 0

    actives = {
        broker_id: samples.value(ACTIVE)
        for broker_id, samples in zip(cluster.brokers, _scrape(cluster), strict=True)
    }
    victim = max(broker_id for broker_id, active in actives.items() if active == 0)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(TOPIC, timeout=30)
    hosted = sum(1 for p in metadata.topics[TOPIC].partitions.values() if victim in p.replicas)
    led = sum(1 for p in metadata.topics[TOPIC].partitions.values() if p.leader == victim)
    assert 0 < hosted < PARTITIONS
    elections_before = _sum(cluster, ELECTIONS)

    cluster.kill(victim)
    wait_for(
        lambda: _sum(cluster, URP) == hosted,
        f"{hosted} under-replicated partitions once broker {victim} is killed",
        timeout=60,
        describe=lambda: _report(cluster),
    )
    assert _sum(cluster, ACTIVE) == 1
    # the partitions it led got a new leader from the (still active) controller
    assert _sum(cluster, ELECTIONS) - elections_before >= led

    cluster.restart(victim)
    wait_for(
        lambda: _sum(cluster, URP) == 0,
        f"no under-replicated partition once broker {victim} is back",
        timeout=60,
        describe=lambda: _report(cluster),
    )
    wait_for(lambda: _sum(cluster, ACTIVE) == 1, "one active controller", describe=lambda: _report(cluster))


def test_consumer_lag_covers_partitions_the_coordinator_does_not_host(
    local_cluster_factory: ClusterFactory,
) -> None:
    """One partition per broker (replication factor 1): the group's coordinator hosts at most one of
    them, and still reports the lag of all three (their leaders' high watermarks, asked meanwhile)."""
    import confluent_kafka as ck

    cluster = local_cluster_factory(3, {**PROPERTIES, "offsets.topic.num.partitions": "3"})
    topic, group, per_partition = "spread", "spread-group", 8
    create_topic(cluster.bootstrap_servers, topic, 3, 1)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for n in range(3 * per_partition):
        producer.produce(topic, b"x", partition=n % 3)
    assert producer.flush(30) == 0
    committed = {0: 2, 1: 5, 2: 0}
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        consumer.commit(
            offsets=[ck.TopicPartition(topic, p, offset) for p, offset in committed.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()

    def lags() -> dict[str, float]:
        found: dict[str, float] = {}
        for samples in _scrape(cluster):
            for labels, value in samples.matching("kafka_consumergroup_lag", consumergroup=group).items():
                found[dict(labels)["partition"]] = value
        return found

    expected = {str(p): float(per_partition - offset) for p, offset in committed.items()}
    wait_for(
        lambda: lags() == expected,
        f"the lag of {group} on all 3 partitions",
        60,
        describe=lambda: str(lags()),
    )
