"""Network partitions between real processes (issue 24): three brokers and a ZooKeeper server, each in
a network namespace of its own (kctl.testing.netns), under acks=all load from two idempotent writers
(confluent-kafka and kctl's producer), RF 3, min ISR 2. Links are cut with silent packet drops:
a leader isolated from everything, cut from ZooKeeper only (the zombie), cut from its followers
(they report it and another broker leads), a bridge, and an asymmetric cut (the leader's packets to its
followers dropped, theirs still arriving). After each heal every replica is back in the ISR; at the
end nothing acknowledged is lost, duplicated, reordered or acknowledged twice at one offset.

Needs root and network namespaces (CI runs as root); elsewhere the module skips with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kctl.testing import LocalCluster, ZooKeeperServer, wait_for
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad
from kctl.testing.nemesis_network import NetworkNemesis
from kctl.testing.netns import NetworkLab, NetworkUnavailableError, Node

pytestmark = [pytest.mark.e2e, pytest.mark.zk, pytest.mark.slow]

PARTITIONS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


class Lab:
    def __init__(
        self, lab: NetworkLab, cluster: LocalCluster, brokers: dict[int, Node], zookeeper: Node
    ) -> None:
        self.lab = lab
        self.cluster = cluster
        self.brokers = brokers
        self.zookeeper = zookeeper


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        network = NetworkLab.create()
    except NetworkUnavailableError as error:
        pytest.skip(f"no network namespaces here: {error}")
    base: Path = tmp_path_factory.mktemp("netns-cluster")
    try:
        zk_node = network.add_node("zk")
        zookeeper = ZooKeeperServer(base / "zookeeper", host=zk_node.ip, command_prefix=zk_node.prefix)
        cluster = LocalCluster(
            base, 3, properties=CLUSTER_PROPERTIES, zookeeper=zookeeper, owns_zookeeper=True
        )
        brokers = network.attach(cluster)
        with cluster:
            yield Lab(network, cluster, brokers, zk_node)
    finally:
        network.close()


def test_the_brokers_and_zookeeper_run_in_namespaces_of_their_own(lab: Lab) -> None:
    """The topology the faults rely on: each broker listens on its node's address (not 127.0.0.1),
    registered so in ZooKeeper, and a cut link really drops the packets."""
    from kctl.client import AdminClient

    for broker_id, node in lab.brokers.items():
        assert lab.cluster.broker(broker_id).bootstrap.startswith(f"{node.ip}:")
    with AdminClient(lab.cluster.bootstrap_servers) as admin:
        # a broker learns of the others' registrations from a ZooKeeper watch: the last one started
        # may be missing from the first answer
        def described() -> dict[int, str] | None:
            brokers = {b.node_id: b.host for b in admin.describe_cluster().brokers}
            return brokers if len(brokers) == len(lab.brokers) else None

        brokers = wait_for(described, "every broker in DescribeCluster", 30)
    assert brokers == {broker_id: node.ip for broker_id, node in lab.brokers.items()}
    assert lab.cluster.zookeeper_connect.startswith(f"{lab.zookeeper.ip}:")

    with ClusterView(lab.cluster.zookeeper_connect) as view:
        lab.lab.cut(lab.brokers[1], lab.zookeeper)
        try:  # broker 1's session expires: it is deregistered, the others stay
            wait_for(lambda: 1 not in view.live_brokers(), "broker 1 to lose its ZooKeeper session", 30)
            assert {2, 3} <= set(view.live_brokers())
        finally:
            lab.lab.heal()
        wait_for(lambda: 1 in view.live_brokers(), "broker 1 to register again", 60)
    assert lab.lab.cuts == []


def test_a_leader_cut_from_its_followers_loses_leadership_while_its_session_lives(lab: Lab) -> None:
    """Cut from its followers only, a leader keeps its ZooKeeper session, so Kafka would keep it
    leader, alone in the ISR and taking no acks=all write, until the heal. kctl's followers report
    it unreachable and the controller moves the partition to one of them: an acks=all write is
    acknowledged during the cut, and after the heal every replica is back in the ISR and the write
    is there."""
    from confluent_kafka import Consumer, Producer

    topic = "cut-from-followers"
    bootstrap = lab.cluster.bootstrap_servers
    create_topic(bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    with ClusterView(lab.cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 1, timeout=60)
        leader = view.wait_for_leader(topic, 0).leader
        for follower in (b for b in lab.brokers if b != leader):
            lab.lab.cut(lab.brokers[leader], lab.brokers[follower])
        try:
            moved = view.wait_for_leader(topic, 0, not_in={leader}, timeout=45)
            assert leader in view.live_brokers()  # its session never ended: no expiry moved it
            assert leader not in moved.isr
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
            delivered: list[object] = []
            producer.produce(
                topic, b"during the cut", partition=0, on_delivery=lambda e, m: delivered.append(e)
            )
            assert producer.flush(30) == 0
            assert delivered == [None]
        finally:
            lab.lab.heal()
        view.wait_for_isr(topic, 0, set(lab.brokers), timeout=60)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "cut-check", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        wait_for(
            lambda: (
                values.extend(m.value() for m in consumer.consume(10, 1.0) if not m.error())
                or b"during the cut" in values
            ),
            "the write made during the cut",
            60,
        )
    finally:
        consumer.close()


def test_network_partitions_lose_no_acknowledged_write(lab: Lab) -> None:
    topic = "jepsen-network"
    bootstrap = lab.cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(lab.cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
        nemesis = NetworkNemesis(lab.lab, lab.brokers, lab.zookeeper, view)
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
        ).start()
        faults = [
            nemesis.isolate_leader,
            nemesis.cut_leader_from_zookeeper,
            nemesis.cut_leader_from_followers,
            nemesis.bridge,
            nemesis.asymmetric_leader_to_followers,
        ]
        try:
            for index, fault in enumerate(faults):
                campaign.inject(partial(fault, topic, index % PARTITIONS, campaign.loads))
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(bootstrap, topic, PARTITIONS)
    for done, gap in campaign.unavailability():
        print(f"{gap:6.2f} s without an acknowledgement: {done}")
    print(verdict.summary())
    assert len(campaign.faults_done) == len(faults)
    assert lab.lab.cuts == []
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 100 * (len(faults) + 1)
