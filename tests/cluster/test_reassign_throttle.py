"""A throttled reassignment on a 2-broker LocalCluster (issue #9): `kctl partition reassign --execute
--throttle` sets Kafka's configs (the brokers' leader/follower.replication.throttled.rate, the topic's
leader/follower.replication.throttled.replicas) before the copying starts; the brokers hold the
copying back (observable: the "replication throttle" lines the quotas log, with the bytes copied so
far, well below the partition's size); once the rates are removed (dynamic broker configs, applied
without a restart) the copy completes, and --verify removes the throttle configs. Nothing is timed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kctl.broker.replication.throttle import UNLIMITED, ReplicationQuota, is_throttled
from kctl.client.admin.reassignments import throttled_replicas
from kctl.common.topic_partition import TopicPartition
from kctl.testing import LocalCluster, wait_for
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RATE = 10_000  # bytes/s
RECORDS, RECORD_SIZE = 300, 1000
PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.fetch.max.bytes": "8192",  # small fetches, so that the quota is checked often
    "replica.fetch.wait.max.ms": "100",
}
_COPIED = re.compile(r"replication throttle \((leader|follower)\): .* (\d+) bytes copied so far")


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(2, PROPERTIES)


def kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60)


def throttle_lines(cluster: LocalCluster) -> list[tuple[str, int]]:
    lines = []
    for broker_id in (1, 2):
        path = cluster.broker(broker_id).log_file
        text = path.read_text(errors="replace") if path.exists() else ""
        lines += [(m[1], int(m[2])) for m in _COPIED.finditer(text)]
    return lines


def topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(15).items()}


def broker_configs(admin: AdminClient, broker_id: int) -> dict[str, str]:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(broker_id))]).values()
    return {name: entry.value for name, entry in future.result(15).items()}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_quota_measures_the_rate_over_its_window() -> None:
    clock = FakeClock()
    rate = [1000]
    quota = ReplicationQuota("follower", lambda: rate[0], clock=clock)
    assert quota.limited and not quota.exceeded()
    quota.record(500)
    assert not quota.exceeded()  # 500 B over at least one second
    quota.record(600)
    assert quota.exceeded()
    assert 0 < quota.wait_s() <= 1.0
    clock.now += 2.0  # 1100 B over 2 s
    assert not quota.exceeded()
    quota.record(5000)
    assert quota.exceeded()
    clock.now += 12.0  # the samples have left the 11-second window
    assert not quota.exceeded() and quota.observed_rate() == 0
    rate[0] = UNLIMITED  # a removed rate (dynamic config) lifts the limit at once
    quota.record(10**9)
    assert not quota.limited and not quota.exceeded()
    quota.hold_back("t-0")
    assert quota.throttled_fetches == 1


def test_throttled_replica_lists() -> None:
    assert is_throttled(("*",), 3, 7)
    assert is_throttled(("0:1", "3:7"), 3, 7)
    assert not is_throttled(("0:1", "3:8"), 3, 7)
    assert not is_throttled((), 3, 7)
    moves = [
        (TopicPartition("a", 0), (1, 2), (2, 3)),
        (TopicPartition("a", 1), (1,), (1,)),  # not moving
        (TopicPartition("b", 4), (2,), (3, 4)),
    ]
    assert throttled_replicas(moves) == {
        "a": {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:3",
        },
        "b": {
            "leader.replication.throttled.replicas": "4:2",
            "follower.replication.throttled.replicas": "4:3,4:4",
        },
    }


@pytest.mark.slow
def test_throttled_reassignment_is_held_back_until_the_throttle_goes(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = "throttled"
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])], operation_timeout=30)[topic].result(
        30
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096})
    for i in range(RECORDS):
        producer.produce(topic, bytes([65 + i % 26]) * RECORD_SIZE, b"k%d" % i)
    assert producer.flush(30) == 0
    total = RECORDS * RECORD_SIZE

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
                ],
            }
        )
    )
    executed = kctl(
        "partition", "reassign", "-b", bootstrap, "--reassignment-json-file", str(plan), "--execute",
        "--throttle", str(RATE),
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    configs = topic_configs(admin, topic)
    assert configs["leader.replication.throttled.replicas"] == "0:1"
    assert configs["follower.replication.throttled.replicas"] == "0:2"
    for broker_id in (1, 2):
        rates = broker_configs(admin, broker_id)
        assert rates["leader.replication.throttled.rate"] == str(RATE)
        assert rates["follower.replication.throttled.rate"] == str(RATE)

    # the quotas hold the copying back: they say so, with far fewer bytes copied than the partition holds
    lines = wait_for(lambda: throttle_lines(cluster), "a broker to throttle the replication", 60)
    assert all(copied < total // 2 for _, copied in lines), lines
    verify = kctl("partition", "reassign", "-b", bootstrap, "--reassignment-json-file", str(plan), "--verify")
    assert verify.returncode == 1, verify.stdout  # still in progress

    # remove the rates (dynamic broker configs, applied at once): the copy completes
    for broker_id in (1, 2):
        removed = kctl(
            "broker", "config", "alter", "-b", bootstrap, "--broker", str(broker_id),
            "--delete", "leader.replication.throttled.rate",
            "--delete", "follower.replication.throttled.rate",
            "--execute",
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr

    def complete() -> bool:
        return (
            kctl(
                "partition", "reassign", "-b", bootstrap, "--reassignment-json-file", str(plan), "--verify"
            ).returncode
            == 0
        )

    wait_for(complete, "the reassignment to complete", 90)
    configs = topic_configs(admin, topic)
    assert configs["leader.replication.throttled.replicas"] == ""  # --verify removed them
    assert configs["follower.replication.throttled.replicas"] == ""
    replica = cluster.broker(2).data_dir / f"{topic}_0"
    assert sum(f.stat().st_size for f in replica.glob("*.log")) >= total
