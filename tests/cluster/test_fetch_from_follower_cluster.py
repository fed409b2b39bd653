"""Fetch from the closest replica (KIP-392) on real brokers, with confluent-kafka (librdkafka) as the
consumer: one cluster for the module, brokers in racks r1, r2, r3; broker 1 runs Kafka's rack-aware
selector, brokers 2 and 3 none (Kafka's default). Topics are replicated on all three.

- On a topic led by broker 1 (``replica.selector.class`` set), a consumer whose
  ``client.rack`` is a follower's rack reads every record, in order, from that follower: the
  follower's ``kctl_server_brokertopicmetrics_messagesout_total`` for the topic counts them all,
  the leader's and the other follower's none (the leader only named the follower as the
  preferred read replica). kctl's own consumers (assigned, and in a group) do the same with
  ``client.rack`` set to the other follower's rack.
- On a topic led by broker 2 (no selector) the leader answers ``preferred_read_replica`` -1 and
  serves the same consumer itself."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.broker.replica_selector import RACK_AWARE_SELECTOR
from kctl.client import TopicPartition
from kctl.client.consumer import Consumer as KctlConsumer
from kctl.client.group.consumer import GroupConsumer
from kctl.testing import LocalCluster, wait_for
from kctl.testing.metrics import scrape
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

RACKS = {1: "r1", 2: "r2", 3: "r3"}
PROPERTIES = {"metrics.listener": "http://127.0.0.1:0", "zookeeper.session.timeout.ms": "6000"}
RECORDS = 500
MESSAGES_OUT = "kctl_server_brokertopicmetrics_messagesout_total"


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    """Three brokers in racks r1, r2, r3; only broker 1 has the rack-aware selector."""
    selector = {"replica.selector.class": RACK_AWARE_SELECTOR}
    return module_cluster_factory(3, PROPERTIES, racks=RACKS, broker_properties={1: selector})


def _topic_led_by(cluster: LocalCluster, leader: int) -> str:
    """A new topic of one partition on brokers 1, 2, 3, led by ``leader``, holding RECORDS records
    acknowledged by all three."""
    topic = f"closest-{uuid.uuid4().hex[:8]}"
    replicas = [leader, *(b for b in (1, 2, 3) if b != leader)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])], operation_timeout=30)
    created[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=b"record-%d" % i)
    assert producer.flush(30) == 0
    assert admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader == leader
    return topic


def _consume_all(cluster: LocalCluster, topic: str, client_rack: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "client.rack": client_rack,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])

        def read() -> bool:
            for message in consumer.consume(RECORDS, 0.5):  # all that came, not one per poll
                assert message.error() is None, message.error()
                values.append(message.value())
            return len(values) >= RECORDS

        wait_for(read, f"{RECORDS} records consumed", timeout=90, describe=lambda: f"{len(values)} read")
    finally:
        consumer.close()
    return values


def _kctl_consume_all(consumer: KctlConsumer) -> list[bytes]:
    values: list[bytes] = []
    with consumer:

        def read() -> bool:
            values.extend(record.value or b"" for record in consumer.poll(0.5))
            return len(values) >= RECORDS

        wait_for(read, f"{RECORDS} records read by kctl", timeout=90, describe=lambda: f"{len(values)} read")
    return values


def _messages_out(cluster: LocalCluster, topic: str) -> dict[int, float]:
    """The records each broker sent consumers of ``topic``."""
    served = {}
    for broker_id, broker in cluster.brokers.items():
        assert broker.metrics_url is not None
        served[broker_id] = scrape(broker.metrics_url).value(MESSAGES_OUT, topic=topic) or 0
    return served


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster: LocalCluster) -> None:
    topic = _topic_led_by(cluster, 1)
    values = _consume_all(cluster, topic, client_rack="r2")
    assert values == [b"record-%d" % i for i in range(RECORDS)]
    assert _messages_out(cluster, topic) == {1: 0, 2: RECORDS, 3: 0}

    expected = [b"record-%d" % i for i in range(RECORDS)]
    assigned = KctlConsumer(cluster.bootstrap_servers, {"client.rack": "r3", "auto.offset.reset": "earliest"})
    assigned.assign([TopicPartition(topic, 0)])
    assert _kctl_consume_all(assigned) == expected
    assert _messages_out(cluster, topic) == {1: 0, 2: RECORDS, 3: RECORDS}
    properties = {"group.id": f"{topic}-kctl", "client.rack": "r3", "auto.offset.reset": "earliest"}
    member = GroupConsumer(cluster.bootstrap_servers, properties)
    member.subscribe([topic])
    assert _kctl_consume_all(member) == expected
    assert _messages_out(cluster, topic) == {1: 0, 2: RECORDS, 3: 2 * RECORDS}


def test_without_a_selector_the_leader_serves_every_rack(cluster: LocalCluster) -> None:
    topic = _topic_led_by(cluster, 2)
    values = _consume_all(cluster, topic, client_rack="r3")
    assert values == [b"record-%d" % i for i in range(RECORDS)]
    assert _messages_out(cluster, topic) == {1: 0, 2: RECORDS, 3: 0}
