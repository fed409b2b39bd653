"""A real `kctl broker start` with zookeeper.connect, against a real ZooKeeper server: it registers
itself in Kafka's znode layout (ephemeral /brokers/ids/<id>), writes topics and partition states when a
topic is created, serves the cluster id stored in /cluster/id, and its registration disappears when it
stops cleanly."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from raw_kafka import RawConnection, create_topic, kcat, metadata, produce, record_batch, unique

from kctl.testing import BrokerProcess, ZooKeeperServer, wait_for


@pytest.fixture
def chroot() -> str:
    return f"/kctl-e2e-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def zk(zookeeper: ZooKeeperServer, chroot: str) -> Iterator[KazooClient]:
    """A kazoo client looking at the broker's chroot."""
    client = KazooClient(hosts=zookeeper.hosts + chroot, timeout=10)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_broker(tmp_path: Path, zookeeper: ZooKeeperServer, chroot: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "data",
        {
            "zookeeper.connect": zookeeper.hosts + chroot,
            "zookeeper.session.timeout.ms": "6000",
            "broker.id": "7",
        },
    ).start()
    try:
        yield broker
    finally:
        broker.stop()


def read_json(zk: KazooClient, path: str) -> tuple[dict[str, Any], Any]:
    data, stat = zk.get(path)
    return json.loads(data), stat


def test_broker_registers_itself_in_kafkas_layout(zk_broker: BrokerProcess, zk: KazooClient) -> None:
    assert zk.get_children("/brokers/ids") == ["7"]
    registration, stat = read_json(zk, "/brokers/ids/7")
    assert stat.ephemeralOwner != 0, "the broker registration must be ephemeral"
    assert registration["host"] == "127.0.0.1" and registration["port"] == zk_broker.port, registration
    assert f"PLAINTEXT://127.0.0.1:{zk_broker.port}" in registration["endpoints"], registration
    assert isinstance(registration["version"], int) and registration["version"] >= 4, registration
    assert registration["listener_security_protocol_map"]["PLAINTEXT"] == "PLAINTEXT", registration
    assert isinstance(registration["jmx_port"], int) and str(registration["timestamp"]).isdigit()

    controller, stat = read_json(zk, "/controller")
    assert controller["brokerid"] == 7 and stat.ephemeralOwner != 0, controller

    listing = kcat(zk_broker.bootstrap, "-L").stdout.decode()
    assert f"broker 7 at {zk_broker.bootstrap} (controller)" in listing, listing


def test_cluster_id_in_metadata_is_the_one_in_zookeeper(zk_broker: BrokerProcess, zk: KazooClient) -> None:
    cluster, _ = read_json(zk, "/cluster/id")
    assert len(cluster["id"]) == 22 and "version" in cluster, cluster
    with RawConnection(zk_broker.bootstrap) as conn:
        response = metadata(conn)
    assert response.cluster_id == cluster["id"]
    assert response.controller_id == 7
    assert [(b.node_id, b.port) for b in response.brokers] == [(7, zk_broker.port)]
    meta = (zk_broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={cluster['id']}" in meta, meta


def test_creating_a_topic_writes_topic_and_partition_state_znodes(
    zk_broker: BrokerProcess, zk: KazooClient
) -> None:
    topic = unique("zk-topic")
    assert create_topic(zk_broker.bootstrap, topic, partitions=3, configs={"retention.ms": "7200000"}) == 0

    assignment, _ = read_json(zk, f"/brokers/topics/{topic}")
    assert assignment["partitions"] == {"0": [7], "1": [7], "2": [7]}, assignment
    assert assignment["version"] >= 3, assignment  # Kafka 3.x: with the topic id
    assert sorted(zk.get_children(f"/brokers/topics/{topic}/partitions")) == ["0", "1", "2"]
    controller_epoch = int(zk.get("/controller_epoch")[0])
    for partition in range(3):
        state, _ = read_json(zk, f"/brokers/topics/{topic}/partitions/{partition}/state")
        assert state["leader"] == 7 and state["isr"] == [7] and state["leader_epoch"] >= 0, state
        assert state["controller_epoch"] == controller_epoch and "version" in state, state
    config, _ = read_json(zk, f"/config/topics/{topic}")
    assert config["config"] == {"retention.ms": "7200000"}, config

    # the topic works, and the broker's metadata agrees with ZooKeeper's topic id
    assert produce(zk_broker.bootstrap, topic, 2, record_batch(3)).error_code == 0
    with RawConnection(zk_broker.bootstrap) as conn:
        [described] = metadata(conn, [topic]).topics
    assert [p.leader_id for p in described.partitions] == [7, 7, 7]
    assert str(described.topic_id) == str(uuid.UUID(bytes=_b64(assignment["topic_id"])))


def _b64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_topic_created_in_zookeeper_is_served(zk_broker: BrokerProcess, zk: KazooClient) -> None:
    """Another controller (e.g. Kafka's kafka-topics.sh --zookeeper) writes a topic: the broker picks it
    up through its watches and hosts the partition."""
    topic = unique("zk-external")
    zk.create(f"/brokers/topics/{topic}", json.dumps({"version": 1, "partitions": {"0": [7]}}).encode())
    zk.create(
        f"/brokers/topics/{topic}/partitions/0/state",
        json.dumps(
            {"controller_epoch": 1, "leader": 7, "version": 1, "leader_epoch": 0, "isr": [7]}
        ).encode(),
        makepath=True,
    )

    def served() -> bool:
        with RawConnection(zk_broker.bootstrap) as conn:
            [t] = metadata(conn, [topic]).topics
        return t.error_code == 0 and [p.leader_id for p in t.partitions] == [7]

    wait_for(served, "the broker to see the topic", 15)
    assert wait_for(
        lambda: produce(zk_broker.bootstrap, topic, 0, record_batch(2)).error_code == 0,
        "produce",
        15,
    )


def test_clean_stop_removes_the_ephemeral_registration(zk_broker: BrokerProcess, zk: KazooClient) -> None:
    assert zk.exists("/brokers/ids/7") is not None
    assert zk_broker.stop() == 0, zk_broker.log_tail()
    # the session is closed on a clean stop: the node goes at once, not after the session timeout
    assert zk.exists("/brokers/ids/7") is None
    assert zk.exists("/controller") is None
    assert zk.exists("/cluster/id") is not None  # persistent

    zk_broker.start()  # and comes back on restart, with the same cluster id
    wait_for(lambda: zk.exists("/brokers/ids/7"), "the registration after restart", 15)
