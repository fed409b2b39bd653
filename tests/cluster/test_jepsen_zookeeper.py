"""ZooKeeper's own failures under acks=all load, checked the Jepsen way (issue 24): a 3-broker cluster
(RF=3, min.insync.replicas=2) on a real 3-server ZooKeeper ensemble in quorum mode, whose leader is
killed, paused past an election, whose follower is killed, and whose quorum is lost for a while,
under two idempotent writers (confluent-kafka and kctl's own producer). Nothing acknowledged may be
lost, duplicated or reordered, and every partition gets its full ISR back."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
from kazoo.client import KazooClient

from kctl.testing import LocalCluster, ZooKeeperEnsemble
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad
from kctl.testing.nemesis_zookeeper import (
    kill_zookeeper_follower,
    kill_zookeeper_leader,
    lose_zookeeper_quorum,
    pause_zookeeper_leader,
)

PARTITIONS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path_factory.mktemp("ensemble"), 3) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ensemble: ZooKeeperEnsemble) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("cluster"), 3, properties=CLUSTER_PROPERTIES, zookeeper=ensemble
    ) as started:
        yield started


def test_a_session_outlives_the_ensemble_leader(ensemble: ZooKeeperEnsemble) -> None:
    """What the brokers rely on: a client's session and its data survive the death of the server
    that leads the ensemble, and the restarted server rejoins as a follower."""
    client = KazooClient(hosts=ensemble.hosts, timeout=10.0)
    client.start(timeout=10)
    try:
        client.create("/survivor", b"before", ephemeral=True)
        session = client.client_id
        done = kill_zookeeper_leader(ensemble)
        assert done.startswith("kill -9 ZooKeeper leader zk-")
        client.set("/survivor", b"after")  # the session moved to a live server
        assert client.get("/survivor")[0] == b"after"
        assert client.client_id == session
        assert sorted(server.mode() for server in ensemble.servers) == ["follower", "follower", "leader"]
    finally:
        client.stop()
        client.close()


@pytest.mark.slow
def test_zookeeper_faults_under_load_lose_nothing(cluster: LocalCluster, ensemble: ZooKeeperEnsemble) -> None:
    topic = "jepsen-zookeeper"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS)
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
        ).start()
        try:
            for fault in (
                kill_zookeeper_leader,
                pause_zookeeper_leader,
                kill_zookeeper_follower,
                partial(lose_zookeeper_quorum, hold_s=3.0),
            ):
                campaign.inject(partial(fault, ensemble))
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(cluster.bootstrap_servers, topic, PARTITIONS)
        print(f"zookeeper faults: {campaign.faults_done}; {verdict.summary()}")
        view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
    assert len(campaign.faults_done) == 4
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 100 * 5
    assert campaign.failures() == []
