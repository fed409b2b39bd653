"""The zombie leader (issue 24): a partition leader cut from ZooKeeper while its clients and
followers still reach it, under acks=all load from two idempotent writers. Its session expires, the
controller elects another leader, the writers go on; whatever the old leader answered meanwhile, no
acknowledged record may be lost and no offset acknowledged twice (two leaders acknowledging writes
for one partition: split brain). Then the link heals and the old leader rejoins the ISR."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad
from kctl.testing.nemesis_zookeeper import ZooKeeperLinks, isolate_leader_from_zookeeper

PARTITIONS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture(scope="module")
def linked_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[tuple[LocalCluster, ZooKeeperLinks]]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("cluster"), 3, properties=CLUSTER_PROPERTIES, zookeeper=zookeeper
    )
    links = ZooKeeperLinks(cluster, zookeeper)
    try:
        with cluster:
            yield cluster, links
    finally:
        links.close()


@pytest.mark.slow
def test_a_leader_cut_from_zookeeper_loses_no_acknowledged_write(
    linked_cluster: tuple[LocalCluster, ZooKeeperLinks],
) -> None:
    cluster, links = linked_cluster
    topic = "jepsen-zombie"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS)
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
        ).start()
        try:
            for partition in (0, 1):
                campaign.inject(
                    partial(isolate_leader_from_zookeeper, links, view, topic, partition, campaign.loads)
                )
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(bootstrap, topic, PARTITIONS)
    print(f"zombie leaders: {campaign.faults_done}; {verdict.summary()}")
    assert len(campaign.faults_done) == 2
    assert not any(links.is_cut(broker_id) for broker_id in cluster.brokers)
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 100 * 3
    assert campaign.failures() == []


def test_a_zombie_leader_sends_its_clients_elsewhere(
    linked_cluster: tuple[LocalCluster, ZooKeeperLinks],
) -> None:
    """Cut off from ZooKeeper past its session, the old leader no longer names itself leader in its
    Metadata answers (found by bench_jepsen: librdkafka asked the zombie for metadata, was told the
    zombie led, and sent its writes there for a minute while another broker led)."""
    from raw_kafka import RawConnection

    from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
    from kctl.protocol.registry import ApiKey
    from kctl.testing import wait_for

    cluster, links = linked_cluster
    topic = "zombie-metadata"
    create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    def leader_named_by(broker_id: int) -> int:
        with RawConnection(cluster.broker(broker_id).bootstrap) as conn:
            answer = conn.request(ApiKey.METADATA, 9, request)
        return int(answer.topics[0].partitions[0].leader_id)

    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 1)
        zombie = view.wait_for_leader(topic, 0).leader
        links.cut(zombie)
        try:
            successor = view.wait_for_leader(topic, 0, not_in={zombie}, timeout=60).leader
            named = wait_for(
                lambda: (leader := leader_named_by(zombie)) != zombie and leader,
                f"broker {zombie}, cut off, to stop naming itself leader",
                30,
            )
            assert named in (-1, successor)
        finally:
            links.heal(zombie)
        view.wait_for_isr(topic, 0, {1, 2, 3}, timeout=60)


def test_a_client_that_knows_only_the_zombie_finds_the_new_leader(
    linked_cluster: tuple[LocalCluster, ZooKeeperLinks],
) -> None:
    """librdkafka connects to the brokers it needs only: bootstrapped with the zombie's address alone,
    it asked the zombie for metadata again and again (177 times in a minute in bench_jepsen's mixed
    campaign, never a request to the other brokers) and wrote nothing until the link healed. A fenced
    broker's Metadata answer must lead its clients to the brokers that know."""
    from confluent_kafka import Producer

    from kctl.testing import wait_for

    cluster, links = linked_cluster
    topic = "zombie-only"
    create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 1)
        zombie = view.wait_for_leader(topic, 0).leader
        acked: list[int] = []
        producer = Producer(
            {
                "bootstrap.servers": cluster.broker(zombie).bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 0,
            }
        )

        def send() -> None:
            producer.produce(topic, b"x", on_delivery=lambda err, msg: err is None and acked.append(1))
            producer.poll(0.05)

        wait_for(lambda: send() or len(acked) > 5, "writes through the leader", 30)
        links.cut(zombie)
        try:
            view.wait_for_leader(topic, 0, not_in={zombie}, timeout=60)
            before = len(acked)
            wait_for(
                lambda: send() or len(acked) > before + 5,
                f"writes acknowledged by the new leader while broker {zombie} is cut off",
                30,
            )
        finally:
            links.heal(zombie)
            producer.flush(30)
        view.wait_for_isr(topic, 0, {1, 2, 3}, timeout=60)


def test_a_broker_whose_zookeeper_link_drops_while_it_starts_starts_once_zookeeper_answers(
    linked_cluster: tuple[LocalCluster, ZooKeeperLinks],
) -> None:
    """Found by bench_jepsen's mixed campaign (fault 262 of 300): a broker started again after
    kill -9 was waiting for its old registration to expire when its link to ZooKeeper dropped; the
    ConnectionLoss ended the start (exit status 1) instead of the broker waiting for ZooKeeper to
    answer again, as Kafka's ZooKeeper client waits up to zookeeper.connection.timeout.ms."""
    import threading

    from kctl.testing import wait_for

    cluster, links = linked_cluster
    topic = "start-through-cut"
    create_topic(cluster.bootstrap_servers, topic, 3, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 3)
        victim = next(b for b in sorted(cluster.brokers) if b != view.controller_id())
        broker = cluster.broker(victim)
        broker.kill()
        log_size = broker.log_file.stat().st_size

        def new_lines() -> str:
            return broker.log_file.read_text(errors="replace")[log_size:]

        failures: list[BaseException] = []

        def start() -> None:
            try:
                broker.start(timeout=120)
            except BaseException as error:  # reported by the test thread below
                failures.append(error)

        starting = threading.Thread(target=start, name="start-through-cut")
        starting.start()
        try:
            wait_for(
                lambda: "waiting up to" in new_lines(),
                "the restarted broker to wait for its old registration",
                30,
            )
            links.cut(victim)
            wait_for(
                lambda: "retrying for up to" in new_lines() or not starting.is_alive(),
                f"broker {victim} to lose its ZooKeeper connection while starting",
                30,
            )
        finally:
            links.heal(victim)
        starting.join(150)
        assert not starting.is_alive()
        assert failures == [], f"{failures}\n{broker.log_tail(60)}"
        assert broker.running, broker.log_tail(60)
        lines = new_lines()
        assert "ZooKeeper answered again" in lines, lines[-4000:]
        assert view.client.exists(f"/brokers/ids/{victim}") is not None
        view.wait_for_full_isr(topic, 3, timeout=60)
