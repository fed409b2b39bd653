"""Slow and failing disks (issue 24) under acks=all load on a 3-broker cluster (RF 3, min ISR 2): a
leader's and a follower's disk stall for seconds, and a leader's and a follower's disk start failing
with EIO. A broker whose disk fails halts at its next write (as Kafka does when its last log dir
fails: exit status 70), closing its ZooKeeper session so that leadership moves at once; restarted on
a mended disk it recovers its logs. Nothing acknowledged may be lost, duplicated or reordered."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kctl.broker.broker import DISK_FAILURE_EXIT
from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.disk_faults import fail_disk, faulty_disk_broker, slow_disk
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad

PARTITIONS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("disks")
    cluster = LocalCluster(base / "cluster", 3, properties=CLUSTER_PROPERTIES, zookeeper=zookeeper)
    for broker_id, broker in cluster.brokers.items():
        faulty_disk_broker(broker, base / f"disk-{broker_id}")
    with cluster:
        yield cluster


def _follower(view: ClusterView, topic: str, partition: int) -> int:
    state = view.wait_for_leader(topic, partition)
    return next(r for r in view.assignment(topic)[partition] if r != state.leader)


@pytest.mark.slow
def test_slow_and_failing_disks_lose_no_acknowledged_write(cluster: LocalCluster) -> None:
    topic = "jepsen-disks"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS)
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
        ).start()
        try:
            leader = view.wait_for_leader(topic, 0).leader
            campaign.inject(partial(slow_disk, cluster.broker(_follower(view, topic, 0)), 300, 3.0))
            campaign.inject(partial(slow_disk, cluster.broker(leader), 300, 3.0))
            view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
            campaign.inject(partial(fail_disk, cluster.broker(view.wait_for_leader(topic, 1).leader)))
            view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
            campaign.inject(partial(fail_disk, cluster.broker(_follower(view, topic, 2))))
            view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(cluster.bootstrap_servers, topic, PARTITIONS)
    print(f"disk faults: {campaign.faults_done}; {verdict.summary()}")
    halted = [fault for fault in campaign.faults_done if "(EIO)" in fault]
    assert len(halted) == 2 and all(f"status {DISK_FAILURE_EXIT}" in fault for fault in halted), halted
    assert verdict.ok, verdict.report()
    assert campaign.failures() == []


def test_the_control_file_drives_the_fault(tmp_path: Path) -> None:
    from kctl.testing.disk_faults import _Control

    control = _Control(tmp_path / "disk")
    control.check()  # no file: no fault
    (tmp_path / "disk").write_text("eio")
    with pytest.raises(OSError, match="Input/output error"):
        control.check()
    (tmp_path / "disk").write_text("slow 1")
    control._stamp = None  # the same mtime within the filesystem's resolution
    control.check()
    assert (control.mode, control.delay_s) == ("slow", 0.001)
