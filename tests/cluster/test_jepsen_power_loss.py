"""Lost page cache (issue 24): a broker that loses power loses every byte it had not fsynced. With
the default flush policy (no fsync per batch, as Kafka's), acks=all must still lose nothing when one
replica of three loses power: the others hold the data, and the restarted replica truncates to its
leader by leader epoch and fetches the rest. The ledger that tells what was durable is tested first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad
from kctl.testing.power_loss import apply_power_loss, durable_lengths, lose_power, power_loss_broker

PARTITIONS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


def test_the_ledger_knows_what_was_durable(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / name) for name in ("a.log", "b.log", "c.log"))
    events = [
        ("open", a, 0), ("durable", a, 100), ("open", b, 40), ("truncate", b, 10),
        ("open", c, 0), ("durable", c, 7), ("rename", c, c + ".deleted"), ("remove", c + ".deleted"),
    ]  # fmt: skip
    ledger = tmp_path / "ledger"
    ledger.write_text("".join(json.dumps(e) + "\n" for e in events) + '["durable", "cut by the ki')
    assert durable_lengths(ledger) == {a: 100, b: 10}
    Path(a).write_bytes(b"x" * 150)
    Path(b).write_bytes(b"y" * 10)
    assert apply_power_loss(ledger) == {a: 50}
    assert Path(a).read_bytes() == b"x" * 100 and Path(b).read_bytes() == b"y" * 10
    assert not ledger.exists()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("power-loss")
    cluster = LocalCluster(base / "cluster", 3, properties=CLUSTER_PROPERTIES, zookeeper=zookeeper)
    for broker_id, broker in cluster.brokers.items():
        power_loss_broker(broker, base / f"ledger-{broker_id}")
    with cluster:
        yield cluster


@pytest.mark.slow
def test_a_replica_that_loses_power_loses_no_acknowledged_write(cluster: LocalCluster) -> None:
    topic = "jepsen-power"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS)
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=150
        ).start()
        try:
            for broker_id in (view.wait_for_leader(topic, 0).leader, 2, 3):
                campaign.inject(partial(lose_power, cluster.broker(broker_id)))
                view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(cluster.bootstrap_servers, topic, PARTITIONS)
    print(f"power losses: {campaign.faults_done}; {verdict.summary()}")
    assert len(campaign.faults_done) == 3
    lost_bytes = [int(fault.split(": ")[1].split()[0]) for fault in campaign.faults_done]
    assert all(count > 0 for count in lost_bytes), campaign.faults_done  # each broker lost something
    assert verdict.ok, verdict.report()
    assert campaign.failures() == []
