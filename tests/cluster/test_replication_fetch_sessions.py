"""Followers fetch over incremental fetch sessions (KIP-227): on three broker processes, records
produced with acks=all to many partitions are replicated and read back whole, and once the cluster
is idle the followers' fetches name no partition (seen in the leaders' request logs: every Fetch
from the replica fetcher is then a few dozen bytes, not one entry per partition)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from raw_kafka import unique

from kctl.broker.replication.channel import CLIENT_ID
from kctl.testing import LocalCluster, wait_for
from kctl.zk.zookeeper import ZooKeeperRegistry

pytestmark = pytest.mark.e2e

PARTITIONS = 30
PER_PARTITION = 20
PROPS = {
    "replica.fetch.wait.max.ms": "100",  # idle fetches come often
    "log.level.kctl.request": "DEBUG",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
}
# a sessionless Fetch v11 from a follower of 30 partitions is over 1 KB; an incremental one naming
# none is its fixed fields and the client id
IDLE_FETCH_MAX_BYTES = 120
_FETCH = re.compile(rf"api=Fetch version=\d+ correlation_id=\d+ client_id={CLIENT_ID} .*?request_bytes=(\d+)")


def follower_fetch_sizes(cluster: LocalCluster) -> list[list[int]]:
    """Per broker, the request sizes of the replica fetchers' Fetches it answered, in order."""
    return [
        [int(m.group(1)) for m in _FETCH.finditer(broker.log_file.read_text(errors="replace"))]
        for broker in cluster.brokers.values()
    ]


def test_followers_replicate_over_sessions_and_idle_fetches_name_no_partition(local_cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster: LocalCluster = local_cluster_factory(3, PROPS)
    topic = unique("sessions")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics(
        [
            NewTopic(
                topic, num_partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "3"}
            )
        ]
    )
    created[topic].result(timeout=30)
    with ZooKeeperRegistry(cluster.zookeeper_connect) as registry:
        wait_for(
            lambda: (
                len(states := registry.partition_states(topic)) == PARTITIONS
                and all(len(s.isr) == 3 for s in states.values())
            ),
            "every partition's ISR complete",
            60,
        )
    # acks=all with min.insync.replicas=3: every record acknowledged is on all three replicas,
    # brought there by the followers' (incremental) fetches
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    failed: list[object] = []
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(
                topic,
                value=b"%d-%d" % (partition, i),
                partition=partition,
                on_delivery=lambda error, _m: failed.append(error) if error else None,
            )
        producer.poll(0)
    assert producer.flush(60) == 0 and failed == []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("g")})
    try:
        for partition in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=20)
            assert (low, high) == (0, PER_PARTITION)
    finally:
        consumer.close()
    # idle now: the next fetches of every follower carry no partition
    seen = [len(sizes) for sizes in follower_fetch_sizes(cluster)]

    def idle_fetches() -> list[list[int]] | None:
        latest = [sizes[count:] for sizes, count in zip(follower_fetch_sizes(cluster), seen, strict=True)]
        return latest if all(len(sizes) >= 10 for sizes in latest) else None

    latest = wait_for(idle_fetches, "10 more follower fetches on every leader", 60)
    assert all(max(sizes[-5:]) <= IDLE_FETCH_MAX_BYTES for sizes in latest), latest
