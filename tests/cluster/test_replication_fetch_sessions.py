"""Followers fetch over incremental fetch sessions (KIP-227): on three broker processes, records
produced with acks=all to many partitions are replicated and read back whole, and once the cluster
is idle the followers' fetches name no partition (seen in the leaders' request logs: every Fetch
from the replica fetcher is then a few dozen bytes, not one entry per partition). A consumer's
fetch parked on a replicated partition wakes once per record, when the high watermark moves, not
also on the append before it (seen in the leader's DEBUG lines of parked fetches)."""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from raw_kafka import RawConnection, produce, record_batch, unique

import kctl.protocol as kp
from kctl.broker.replication.channel import CLIENT_ID
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.testing import BrokerProcess, LocalCluster, wait_for
from kctl.zk.zookeeper import ZooKeeperRegistry

pytestmark = pytest.mark.e2e

PARTITIONS = 30
PER_PARTITION = 20
PROPS = {
    "replica.fetch.wait.max.ms": "100",  # idle fetches come often
    "log.level.kctl.request": "DEBUG",
    "log.level.kctl.broker.fetch": "DEBUG",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
}
# a sessionless Fetch v11 from a follower of 30 partitions is over 1 KB; an incremental one naming
# none is its fixed fields and the client id
IDLE_FETCH_MAX_BYTES = 120
_FETCH = re.compile(rf"api=Fetch version=\d+ correlation_id=\d+ client_id={CLIENT_ID} .*?request_bytes=(\d+)")


def log_text(broker: BrokerProcess) -> str:
    return broker.log_file.read_text(errors="replace")


def follower_fetch_sizes(cluster: LocalCluster) -> list[list[int]]:
    """Per broker, the request sizes of the replica fetchers' Fetches it answered, in order."""
    return [
        [int(m.group(1)) for m in _FETCH.finditer(broker.log_file.read_text(errors="replace"))]
        for broker in cluster.brokers.values()
    ]


@pytest.fixture(scope="module")
def cluster(module_cluster_factory) -> LocalCluster:  # type: ignore[no-untyped-def]
    started: LocalCluster = module_cluster_factory(3, PROPS)
    return started


def test_followers_replicate_over_sessions_and_idle_fetches_name_no_partition(cluster: LocalCluster) -> None:
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


def test_a_parked_consumer_fetch_wakes_once_per_record(cluster: LocalCluster) -> None:
    topic = unique("wake")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})]
    )
    created[topic].result(timeout=30)
    with ZooKeeperRegistry(cluster.zookeeper_connect) as registry:
        state = wait_for(
            lambda: (s := registry.partition_states(topic).get(0)) is not None and len(s.isr) == 3 and s,
            "the partition's ISR complete",
            60,
        )
    leader = cluster.broker(state.leader)
    with RawConnection(leader.bootstrap) as conn:
        port = conn.sock.getsockname()[1]
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=30_000,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic=topic,
                    topic_id=uuid.UUID(int=0),
                    partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        header = conn.header(kp.ApiKey.FETCH, 11)
        conn.send(kp.encode_request(header, request))
        parked = f"fetch parked (127.0.0.1:{port})"
        wait_for(lambda: parked in log_text(leader), "the consumer's fetch parked", 20)
        assert produce(leader.bootstrap, topic, 0, record_batch(1), acks=-1).error_code == 0
        [topic_response] = kp.decode_response(header, conn.recv_frame())[1].responses
        [part] = topic_response.partitions
        assert part.high_watermark == 1 and len(part.records) > 0
    # parked once; woken when the high watermark passed the record, with the record to send
    assert log_text(leader).count(parked) == 1
