"""`kctl mirror` from a cluster-mode source: three brokers on ZooKeeper (replication factor 3,
acks=all) into a single-broker target, one cluster and one target for the module.

* ``--once`` with include/exclude and ``--rename``: records identical on both sides (key, value,
  headers, timestamp, partition, order; `kctl consume -f jsonl`), excluded topics left alone.
* A running mirror while an acks=all producer keeps writing: a topic created and partitions added on
  the source are picked up, then the leader of a source partition is SIGKILLed — the mirror follows
  the new leader (and the group coordinator holding its positions, wherever it moved) and the target
  ends up with exactly the source's records; SIGTERM stops it with exit 0.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest
from mirror_support import create, end_offsets, kctl, produce, records, start_mirror, topics
from raw_kafka import running_broker, unique

from kctl.testing import BrokerProcess, LocalCluster, ZooKeeperServer, wait_for
from kctl.testing.cluster_clients import SequencedProducer
from kctl.testing.cluster_view import ClusterView

pytestmark = pytest.mark.slow

PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "num.partitions": "1",
}


@pytest.fixture(scope="module")
def source(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("mirror-source")
    cluster = LocalCluster(directory, 3, properties=PROPERTIES, zookeeper=zookeeper)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "1"}, "mirror-target") as broker:
        yield broker


@pytest.fixture(scope="module")
def view(source: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(source.zookeeper_connect) as zk_view:
        yield zk_view


def test_once_from_a_cluster_source_with_selection_and_renaming(
    source: LocalCluster, target: BrokerProcess, view: ClusterView
) -> None:
    prefix = unique("cm")
    keep, skip = f"{prefix}-orders", f"{prefix}-orders-tmp"
    create(source.bootstrap_servers, keep, 3, {"retention.ms": "86400000"}, replication_factor=3)
    create(source.bootstrap_servers, skip, 1, replication_factor=3)
    view.wait_for_full_isr(keep, 3)
    produce(source.bootstrap_servers, keep, 1500, 3)
    produce(source.bootstrap_servers, skip, 10, 1)
    run = kctl(
        "mirror",
        "--from",
        f"dc1={source.bootstrap_servers}",
        "--to",
        f"agg={target.bootstrap}",
        "--include",
        f"{prefix}-.*",
        "--exclude",
        ".*-tmp",
        "--rename",
        "{cluster}.{topic}",
        "--group",
        f"g-{prefix}",
        "--once",
        "-f",
        "json",
    )
    assert run.returncode == 0, run.stderr
    assert sum(r["records"] for r in json.loads(run.stdout)) == 1500
    copied = records(target, f"dc1.{keep}")
    assert copied == records(source.bootstrap_servers, keep)
    assert sum(map(len, copied.values())) == 1500
    assert end_offsets(target, f"dc1.{keep}", 3) == end_offsets(source.bootstrap_servers, keep, 3)
    assert not {f"dc1.{skip}", skip, keep} & topics(target)


def test_running_mirror_follows_new_topics_partitions_and_a_killed_leader(
    source: LocalCluster, target: BrokerProcess, view: ClusterView
) -> None:
    prefix = unique("cl")
    live, later = f"{prefix}-live", f"{prefix}-later"
    create(source.bootstrap_servers, live, 2, {"min.insync.replicas": "2"}, replication_factor=3)
    view.wait_for_full_isr(live, 2)
    mirror = start_mirror(
        "--from",
        f"dc1={source.bootstrap_servers}",
        "--to",
        f"agg={target.bootstrap}",
        "--include",
        f"{prefix}-.*",
        "--refresh-interval",
        "0.3",
        "--commit-interval",
        "0.2",
        "--status-interval",
        "0.5",
        "-f",
        "jsonl",
        "--group",
        f"g-{prefix}",
    )
    producer = SequencedProducer(source.bootstrap_servers, live, prefix="m").start()
    killed = -1
    try:
        producer.wait_for_acks(300)
        wait_for(
            lambda: live in topics(target) and sum(end_offsets(target, live, 2).values()) >= 200,
            "the mirror to copy the first records",
            60,
        )
        # while it runs: a new topic, and partitions added to the one being written
        create(source.bootstrap_servers, later, 1, replication_factor=3)
        produce(source.bootstrap_servers, later, 100, 1)
        grown = kctl("topic", "alter", live, "--partitions", "3", "-b", source.bootstrap_servers)
        assert grown.returncode == 0, grown.stderr
        view.wait_for_full_isr(live, 3)
        wait_for(
            lambda: later in topics(target) and sum(end_offsets(target, later, 1).values()) == 100,
            "the new topic on the target",
            60,
        )
        wait_for(lambda: end_offsets(target, live, 3).get(2, 0) > 0, "the new partition's records", 60)

        # SIGKILL the leader of partition 0 under load: the mirror goes on from its successor
        killed = view.wait_for_leader(live, 0).leader
        source.kill(killed)
        view.wait_for_leader(live, 0, not_in={killed})
        acked = producer.acked_count()
        producer.wait_for_acks(acked + 400, timeout=60)
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:5]
    try:
        wanted = end_offsets(source.bootstrap_servers, live, 3)
        wait_for(lambda: end_offsets(target, live, 3) == wanted, f"the target to reach {wanted}", 90)
    finally:
        mirror.send_signal(signal.SIGTERM)
        out, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err
    assert any(json.loads(line).get("partitions") for line in out.splitlines() if line.startswith("{"))
    assert records(target, live) == records(source.bootstrap_servers, live)  # nothing lost, nothing twice
    assert records(target, later) == records(source.bootstrap_servers, later)
    assert sum(wanted.values()) == len(producer.acked)
    print(f"\nmirror from a cluster: leader {killed} of {live}-0 killed; {len(producer.acked)} copied")
