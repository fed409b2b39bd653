"""A zombie leader: SIGSTOPped past its ZooKeeper session timeout, replaced, then SIGCONTed.

The zombie must not acknowledge an acks=all write for the partition it no longer leads (a raw
Produce sent straight to it answers NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH), the cluster keeps
acknowledging writes through the new leader, nothing acknowledged is lost, and no two state versions
in ZooKeeper ever name two different leaders for one leader epoch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kctl.protocol import ErrorCode
from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_checks import check_acked_read_once, wait_for_identical_replicas
from kctl.testing.cluster_clients import SequencedProducer, create_topic, raw_produce, read_partitions
from kctl.testing.cluster_view import ClusterView, leaders_by_epoch

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_S = 6
PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_S * 1000),
    "replica.lag.time.max.ms": "3000",
}
FENCED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH}


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("zombie"), 3, properties=PROPERTIES, zookeeper=zookeeper)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def test_zombie_leader_is_fenced(cluster: LocalCluster) -> None:
    topic = "zombie"
    with ClusterView(cluster.zookeeper_connect) as view:
        create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
        view.wait_for_full_isr(topic, 1)
        history = view.watch_partition_states(topic, 0)
        zombie = view.wait_for_leader(topic, 0).leader
        zombie_address = cluster.broker(zombie).bootstrap
        others = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != zombie)
        producer = SequencedProducer(others, topic, prefix="zb").start()
        try:
            producer.wait_for_acks(100)
            paused_at = time.monotonic()
            cluster.broker(zombie).pause()
            try:
                new_state = view.wait_for_leader(topic, 0, not_in={zombie}, timeout=SESSION_TIMEOUT_S * 5)
                elected_after = time.monotonic() - paused_at
                assert elected_after >= SESSION_TIMEOUT_S * 0.5, "elected before the session expired"
                # the cluster acknowledges without the zombie
                producer.wait_for_acks(producer.acked_count() + 100, timeout=60)
            finally:
                cluster.broker(zombie).resume()
            # the zombie, right after waking up: it must not acknowledge as the partition's leader
            error_code, _ = raw_produce(zombie_address, topic, 0, ["zombie-write"], acks=-1)
            answer = ErrorCode(error_code).name
            assert error_code in FENCED, f"the zombie answered {answer}, not a fencing error"
            view.wait_for_isr(topic, 0, set(view.assignment(topic)[0]), timeout=60)
            producer.wait_for_acks(producer.acked_count() + 100)
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:10]
        records = read_partitions(cluster.bootstrap_servers, topic, [0])
        assert check_acked_read_once(producer.acked, records) == []
        assert "zombie-write" not in [value for _, value in records[0]]
        epochs = leaders_by_epoch(history)
        assert new_state.leader_epoch > min(epochs)
        assert all(len(leaders) == 1 for leaders in epochs.values()), f"two leaders for one epoch: {epochs}"
        wait_for_identical_replicas(cluster, view, topic, [0])
