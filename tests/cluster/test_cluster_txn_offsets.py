"""Transactional offset commits across a coordinator's death, on a 3-broker cluster
(``__consumer_offsets`` with RF 3): a TxnOffsetCommit acknowledged by the group's coordinator (once
replicated) is still pending on the broker that takes over its ``__consumer_offsets`` partition after
the coordinator is killed with SIGKILL (it rebuilt the group from its replica of the partition), and
the producer's COMMIT marker, sent to the new leader, makes it the committed offset."""

from __future__ import annotations

import pytest
from raw_kafka import RawConnection
from txn_offsets_support import (
    UNSTABLE,
    coordinator_ready,
    fetch,
    marker,
    plain_commit,
    producer_id,
    txn_commit,
)

from kctl.broker.group.records import partition_for_group
from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OFFSETS_PARTITIONS = 3
PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
}


@pytest.fixture
def cluster(local_cluster_factory: ClusterFactory) -> LocalCluster:
    return local_cluster_factory(3, PROPERTIES)


def test_a_pending_txn_commit_survives_its_coordinators_death(cluster: LocalCluster) -> None:
    topic, group = "txn-offsets-failover", "txn-survivors"
    create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
    offsets_partition = partition_for_group(group, OFFSETS_PARTITIONS)
    with ClusterView(cluster.zookeeper_connect) as view:
        with RawConnection(cluster.bootstrap_servers.split(",")[0]) as any_broker:
            coordinator_ready(any_broker, group, coordinator_only=True)  # creates __consumer_offsets
        view.wait_for_full_isr("__consumer_offsets", OFFSETS_PARTITIONS, timeout=60)
        coordinator = view.wait_for_leader("__consumer_offsets", offsets_partition).leader
        with RawConnection(cluster.broker(coordinator).bootstrap) as conn:
            coordinator_ready(conn, group)
            pid = producer_id(conn)
            plain_commit(conn, group, topic, {0: 1})
            assert txn_commit(conn, group, pid, topic, {0: 42}) == {0: 0}  # acknowledged: replicated
            assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
        cluster.kill(coordinator)
        successor = view.wait_for_leader("__consumer_offsets", offsets_partition, not_in={coordinator}).leader
        with RawConnection(cluster.broker(successor).bootstrap) as conn:
            coordinator_ready(conn, group)
            assert fetch(conn, group, topic, [0]) == (0, {0: (1, 0)})
            assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
            assert marker(conn, pid, group, commit=True, partitions=OFFSETS_PARTITIONS) == 0
            assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (42, 0)})
        cluster.restart(coordinator)
