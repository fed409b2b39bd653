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
