"""Partition reassignment and preferred leader election on a 4-broker cluster, under acks=all load.

The requests go once through ZooKeeper in Kafka's layout (``/admin/reassign_partitions``,
``/admin/preferred_replica_election``), the way ``kafka-reassign-partitions.sh --zookeeper`` made
them, and once through kctl's CLI (``kctl partition reassign`` / ``elect-leaders``: the
AlterPartitionReassignments and ElectLeaders APIs); the controller carries them out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.testing import LocalCluster
from kctl.testing.cluster_checks import check_acked_read_once, wait_for_identical_replicas
from kctl.testing.cluster_clients import SequencedProducer, read_partitions
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

PROPERTIES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000"}


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(4, PROPERTIES)


def _request(view: ClusterView, path: str, partitions: list[dict[str, object]]) -> None:
    view.client.create(path, json.dumps({"version": 1, "partitions": partitions}).encode(), makepath=True)


def test_reassignment_under_load_then_preferred_election(cluster: LocalCluster) -> None:
    topic = "moving"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new_topic = NewTopic(
        topic, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new_topic], operation_timeout=30)[topic].result(30)
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_isr(topic, 0, {1, 2, 3})
        assert view.leader_of(topic, 0) == 1
        producer = SequencedProducer(cluster.bootstrap_servers, topic, prefix="mv").start()
        try:
            producer.wait_for_acks(200)
            _request(
                view, "/admin/reassign_partitions", [{"topic": topic, "partition": 0, "replicas": [2, 3, 4]}]
            )
            view.wait_for(lambda: view.assignment(topic).get(0) == [2, 3, 4], "the assignment [2, 3, 4]", 90)
            view.wait_for(
                lambda: view.client.exists("/admin/reassign_partitions") is None, "the request completed", 30
            )
            moved = view.wait_for_isr(topic, 0, {2, 3, 4}, timeout=60)
            assert moved.leader in (2, 3, 4)
            producer.wait_for_acks(producer.acked_count() + 200, timeout=60)
            # leadership away from the preferred replica (2), then back by a preferred election
            if moved.leader == 2:
                cluster.stop_broker(2)  # controlled shutdown moves leadership to 3 or 4
                view.wait_for_leader(topic, 0, not_in={2})
                cluster.restart(2)
                view.wait_for_isr(topic, 0, {2, 3, 4}, timeout=60)
            assert view.leader_of(topic, 0) != 2
            _request(view, "/admin/preferred_replica_election", [{"topic": topic, "partition": 0}])
            view.wait_for(lambda: view.leader_of(topic, 0) == 2, "the preferred replica 2 leading again", 60)
            producer.wait_for_acks(producer.acked_count() + 200, timeout=60)
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:10]
        records = read_partitions(cluster.bootstrap_servers, topic, [0])
        assert check_acked_read_once(producer.acked, records) == []
        wait_for_identical_replicas(cluster, view, topic, [0])
        assert not (cluster.broker(1).data_dir / f"{topic}_0").exists(), "broker 1 kept the moved replica"


def _kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_reassignment_and_preferred_election_through_the_cli(cluster: LocalCluster, tmp_path: Path) -> None:
    """The same moves through ``kctl partition reassign --execute/--verify`` (AlterPartitionReassignments)
    and ``kctl partition elect-leaders --election-type preferred`` (ElectLeaders)."""
    topic = "moving-cli"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new_topic = NewTopic(
        topic, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new_topic], operation_timeout=30)[topic].result(30)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [4, 3, 2]}]})
    )
    bootstrap = cluster.bootstrap_servers
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_isr(topic, 0, {1, 2, 3})
        producer = SequencedProducer(bootstrap, topic, prefix="cli").start()
        try:
            producer.wait_for_acks(200)
            executed = _kctl(
                "partition", "reassign", "--reassignment-json-file", str(plan), "--execute", "-b", bootstrap
            )
            assert executed.returncode == 0, executed.stdout + executed.stderr
            view.wait_for(
                lambda: (
                    _kctl(
                        "partition",
                        "reassign",
                        "--reassignment-json-file",
                        str(plan),
                        "--verify",
                        "-b",
                        bootstrap,
                    ).returncode
                    == 0
                ),
                "kctl partition reassign --verify to report completion",
                90,
            )
            assert view.assignment(topic)[0] == [4, 3, 2]
            view.wait_for_isr(topic, 0, {2, 3, 4}, timeout=60)
            producer.wait_for_acks(producer.acked_count() + 200, timeout=60)
            if view.leader_of(topic, 0) == 4:
                cluster.stop_broker(4)
                view.wait_for_leader(topic, 0, not_in={4})
                cluster.restart(4)
                view.wait_for_isr(topic, 0, {2, 3, 4}, timeout=60)
            elected = _kctl(
                "partition",
                "elect-leaders",
                "--election-type",
                "preferred",
                "-t",
                topic,
                "-p",
                "0",
                "-b",
                bootstrap,
            )
            assert elected.returncode == 0, elected.stdout + elected.stderr
            view.wait_for(lambda: view.leader_of(topic, 0) == 4, "the preferred replica 4 leading", 30)
            producer.wait_for_acks(producer.acked_count() + 100, timeout=60)
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:10]
        records = read_partitions(bootstrap, topic, [0])
        assert check_acked_read_once(producer.acked, records) == []
        wait_for_identical_replicas(cluster, view, topic, [0])
