"""The ``kctl`` Spark data source and the warehouse load on a 3-broker cluster (one per module, on the
test session's ZooKeeper): a topic whose partitions are led by different brokers is read exactly
(each task's consumer goes to its partition's leader, from a bootstrap list of one broker), written
with ``acks=all`` to a replicated topic and read back, and loaded into Parquet."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import fill, require_pyspark, shared_session

from kctl.client import AdminClient
from kctl.localcluster import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_clients import create_topic

require_pyspark()

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("spark-cluster"), 3, zookeeper=zookeeper)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    return shared_session(request)


def _leaders(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """Each partition's leader, once every partition has one."""
    deadline = time.monotonic() + timeout
    with AdminClient(bootstrap) as admin:
        while True:
            described = admin.cluster.refresh_metadata([topic]).topic(topic)
            leaders = {p.partition: p.leader for p in described.partitions} if described else {}
            if leaders and min(leaders.values()) >= 0:
                return leaders
            assert time.monotonic() < deadline, f"{topic} has partitions without a leader: {leaders}"
            time.sleep(0.1)


def test_read_partitions_led_by_different_brokers(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    create_topic(cluster.bootstrap_servers, "spread", 6, 2)
    leaders = _leaders(cluster.bootstrap_servers, "spread")
    assert set(leaders.values()) == {1, 2, 3}, leaders  # every broker leads some partition
    sent = fill(cluster.bootstrap_servers, "spread", 6, 20)
    one_broker = cluster.broker(1).bootstrap  # the tasks find the other leaders from the metadata
    df = (
        spark.read.format("kctl")
        .option("kafka.bootstrap.servers", one_broker)
        .option("subscribe", "spread")
        .option("minPartitions", "12")
        .load()
    )
    assert df.rdd.getNumPartitions() >= 12
    rows = df.collect()
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in rows) == sorted(
        (s.partition, s.offset, s.value) for s in sent
    )

    from kctl.spark.load import plan_load, run_load

    out = tmp_path / "warehouse"
    summary = run_load(spark, plan_load(one_broker, {}, ["spread"], out), one_broker, {})
    assert summary.records == 120
    loaded = spark.read.parquet(str(out)).select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in loaded) == sorted((s.partition, s.offset) for s in sent)


def test_write_with_acks_all_to_a_replicated_topic(spark: Any, cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap_servers, "replicated", 3, 3, {"min.insync.replicas": "2"})
    assert len(set(_leaders(cluster.bootstrap_servers, "replicated").values())) == 3
    df = spark.createDataFrame([(f"r{i}", i % 3) for i in range(60)], "value string, partition int")
    (
        df.write.format("kctl")
        .mode("append")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("kafka.acks", "all")
        .option("topic", "replicated")
        .save()
    )
    back = (
        spark.read.format("kctl")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", "replicated")
        .load()
        .collect()
    )
    assert sorted((bytes(r.value).decode(), r.partition) for r in back) == sorted(
        (f"r{i}", i % 3) for i in range(60)
    )
