"""`kctl consume --zookeeper`, `kctl group ... --zookeeper` (list, describe, rewind, delete, migrate)
and `kctl zk` against a real ZooKeeper server and a broker registered in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import zk_support
from zk_support import Runner, ZkCluster

from kctl.client import AdminClient
from kctl.client.group import GroupAdmin
from kctl.testing import wait_for
from kctl.zk.consumer_registry import ConsumerRegistry

if TYPE_CHECKING:
    from kctl.testing import ZooKeeperServer

zk_cluster = zk_support.zk_cluster  # the fixtures, shared
runners = zk_support.runners


def kctl(
    cluster: ZkCluster, *args: str, zookeeper: bool = True, bootstrap: bool = True
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    argv = [sys.executable, "-m", "kctl", *args]
    if zookeeper:
        argv += ["--zookeeper", cluster.connect]
    if bootstrap:
        argv += ["-b", cluster.bootstrap]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**environment, "COLUMNS": "250"}
    )


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_group_and_zk_commands_on_a_zookeeper_mode_group(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"cli-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 2)
    zk_cluster.produce(topic, 2, 10)
    runners.append(Runner(zk_cluster, group, [topic]))
    with zk_cluster.registry() as zk:
        wait_for(
            lambda: zk.committed_offsets(group) == {(topic, 0): 5, (topic, 1): 5},
            "offsets committed",
            30,
        )

    [described] = as_json(kctl(zk_cluster, "group", "describe", group, "-f", "json"))
    assert described["state"] == "Stable" and described["protocol_type"] == "zookeeper"
    [member] = described["members"]
    assert member["member_id"] == runners[0].consumer_id
    assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
    assert [
        (o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"]) for o in described["offsets"]
    ] == [
        (0, 5, 5, 0),
        (1, 5, 5, 0),
    ]
    table = kctl(zk_cluster, "group", "describe", group)
    assert (
        table.returncode == 0 and runners[0].consumer_id in table.stdout and "CURRENT-OFFSET" in table.stdout
    )

    refused = kctl(zk_cluster, "group", "rewind", group, "--to-earliest", "--execute")
    assert refused.returncode == 1 and runners[0].consumer_id in refused.stderr, refused.stderr
    with zk_cluster.registry() as zk:
        assert zk.committed_offsets(group) == {(topic, 0): 5, (topic, 1): 5}, "nothing changed"

    runners.pop().stop()
    [listed] = as_json(kctl(zk_cluster, "group", "list", "-f", "json"))
    assert listed["group"] == group and listed["state"] == "Empty" and listed["members"] == 0

    plan = as_json(kctl(zk_cluster, "group", "rewind", group, "--to-offset", "3", "-f", "json"))
    assert [(p["partition"], p["current_offset"], p["new_offset"], p["status"]) for p in plan] == [
        (0, 5, 3, "planned"),
        (1, 5, 3, "planned"),
    ]
    done = as_json(kctl(zk_cluster, "group", "rewind", group, "--to-offset", "3", "--execute", "-f", "json"))
    assert [p["status"] for p in done] == ["committed", "committed"]

    tree = kctl(zk_cluster, "zk", "tree", "/consumers", bootstrap=False)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0] == "/consumers" and f"  {group}" in lines and "        0 = 3" in lines, tree.stdout
    nodes = as_json(kctl(zk_cluster, "zk", "tree", f"/consumers/{group}", "-f", "json", bootstrap=False))
    assert {n["path"]: n["data"] for n in nodes}[f"/consumers/{group}/offsets/{topic}/1"] == 3

    migrate_plan = as_json(kctl(zk_cluster, "group", "migrate", group, "--to", "kafka", "-f", "json"))
    assert [
        (r["partition"], r["zookeeper_offset"], r["kafka_offset"], r["new_offset"], r["status"])
        for r in migrate_plan
    ] == [
        (0, 3, None, 3, "planned"),
        (1, 3, None, 3, "planned"),
    ]
    with AdminClient(zk_cluster.bootstrap) as admin:
        assert GroupAdmin(admin).committed_offsets(group) == {}, "a plan changes nothing"
    migrated = as_json(
        kctl(zk_cluster, "group", "migrate", group, "--to", "kafka", "--execute", "-f", "json")
    )
    assert [r["status"] for r in migrated] == ["copied", "copied"]
    with AdminClient(zk_cluster.bootstrap) as admin:
        assert [v.offset for v in GroupAdmin(admin).committed_offsets(group).values()] == [3, 3]

    consumers = as_json(kctl(zk_cluster, "zk", "consumers", "-f", "json", bootstrap=False))
    assert [(c["group"], c["consumer_count"], c["committed_partitions"]) for c in consumers] == [
        (group, 0, 2)
    ]
    [broker] = as_json(kctl(zk_cluster, "zk", "brokers", "-f", "json", bootstrap=False))
    assert broker["port"] == zk_cluster.broker.port and broker["controller"] is True
    listed_topics = {
        t["topic"]: t for t in as_json(kctl(zk_cluster, "zk", "topics", "-f", "json", bootstrap=False))
    }
    assert listed_topics[topic]["partition_count"] == 2 and len(listed_topics[topic]["partitions"]) == 2
    node = as_json(
        kctl(zk_cluster, "zk", "get", f"/brokers/ids/{broker['broker_id']}", "-f", "json", bootstrap=False)
    )
    assert node["data"]["port"] == zk_cluster.broker.port and node["ephemeral_owner"]
    children = as_json(kctl(zk_cluster, "zk", "ls", "/", "-f", "json", bootstrap=False))
    assert {"brokers", "consumers"} <= {c["name"] for c in children}
    missing = kctl(zk_cluster, "zk", "ls", "/no/such/znode", bootstrap=False)
    assert missing.returncode == 3 and "no znode /no/such/znode" in missing.stderr

    deleted = as_json(kctl(zk_cluster, "group", "delete", group, "-f", "json"))
    assert deleted == [{"group": group, "status": "deleted", "message": None}]
    with zk_cluster.registry() as zk:
        assert not zk.group_exists(group)


@pytest.mark.slow
def test_consume_zookeeper_reads_as_a_zookeeper_mode_member(zk_cluster: ZkCluster) -> None:
    topic, group = f"cons-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 2)
    zk_cluster.produce(topic, 2, 10)
    args = ["consume", topic, "--group", group, "--offset", "beginning", "-n", "6", "-f", "jsonl"]
    first = kctl(zk_cluster, *args)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 6 and f"as a member of group {group}" in first.stderr
    second = kctl(zk_cluster, *args[:-4], "-n", "4", "-f", "jsonl")
    assert second.returncode == 0, second.stderr
    read = [
        (r["partition"], r["offset"]) for r in map(json.loads, (first.stdout + second.stdout).splitlines())
    ]
    assert sorted(read) == [(p, o) for p in range(2) for o in range(5)], (
        "the second run starts where the first committed"
    )
    with zk_cluster.registry() as zk:
        assert zk.committed_offsets(group) == {(topic, 0): 5, (topic, 1): 5} and zk.consumers(group) == {}

    kafka_stored = kctl(zk_cluster, *args[:-4], "-n", "2", "-f", "jsonl", "-X", "offsets.storage=kafka")
    assert kafka_stored.returncode == 0, kafka_stored.stderr
    assert json.loads(kafka_stored.stdout.splitlines()[0])["offset"] == 0, "kafka has no offsets yet"
    with AdminClient(zk_cluster.bootstrap) as admin:
        assert sum(v.offset for v in GroupAdmin(admin).committed_offsets(group).values() if v) == 2
    with zk_cluster.registry() as zk:
        assert zk.committed_offsets(group) == {(topic, 0): 5, (topic, 1): 5}, "zookeeper's offsets untouched"
    usage = kctl(
        zk_cluster, "consume", topic, "--group", group, "-X", "dual.commit.enabled=true", zookeeper=False
    )
    assert usage.returncode == 2 and "need --zookeeper" in usage.stderr, usage.stderr
    bad = kctl(zk_cluster, "consume", topic, "--group", group, "-X", "offsets.storage=etcd")
    assert bad.returncode == 2 and "offsets.storage" in bad.stderr, bad.stderr
    alone = kctl(zk_cluster, "consume", topic)
    assert alone.returncode == 2 and "--zookeeper goes with --group" in alone.stderr


@pytest.mark.slow
def test_zookeeper_mode_group_commands_find_the_brokers_in_zookeeper(zk_cluster: ZkCluster) -> None:
    """`--zookeeper` alone, as the README writes it: the brokers (for log offsets, lag and Kafka's
    offsets) are those registered under /brokers/ids, as Kafka's ZooKeeper tools found them; an
    explicit -b still wins."""
    topic, group = f"nob-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 2)
    zk_cluster.produce(topic, 2, 10)
    with zk_cluster.registry() as zk:
        zk.commit_offset(group, topic, 0, 2)
        zk.commit_offset(group, topic, 1, 4)

    [described] = as_json(kctl(zk_cluster, "group", "describe", group, "-f", "json", bootstrap=False))
    assert [
        (o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"]) for o in described["offsets"]
    ] == [
        (0, 2, 5, 3),
        (1, 4, 5, 1),
    ]
    [listed] = as_json(kctl(zk_cluster, "group", "list", "-f", "json", bootstrap=False))
    assert listed["group"] == group
    rewound = as_json(
        kctl(
            zk_cluster, "group", "rewind", group, "--to-earliest", "--execute", "-f", "json", bootstrap=False
        )
    )
    assert [(p["partition"], p["new_offset"], p["status"]) for p in rewound] == [
        (0, 0, "committed"),
        (1, 0, "committed"),
    ]
    migrated = as_json(
        kctl(
            zk_cluster, "group", "migrate", group, "--to", "kafka", "--execute", "-f", "json", bootstrap=False
        )
    )
    assert [r["status"] for r in migrated] == ["copied", "copied"]
    with AdminClient(zk_cluster.bootstrap) as admin:
        assert [v.offset for v in GroupAdmin(admin).committed_offsets(group).values()] == [0, 0]
    read = kctl(
        zk_cluster, "consume", topic, "--group", f"{group}-c", "-o", "beginning", "-n", "3", "-f", "jsonl",
        bootstrap=False,
    )  # fmt: skip
    assert read.returncode == 0 and len(read.stdout.splitlines()) == 3, read.stderr

    explicit = subprocess.run(
        [sys.executable, "-m", "kctl", "group", "describe", group, "--zookeeper", zk_cluster.connect,
         "-b", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("KCTL_")},
    )  # fmt: skip
    assert explicit.returncode == 3 and "bootstrap servers 127.0.0.1:1" in explicit.stderr, explicit.stderr
    deleted = as_json(kctl(zk_cluster, "group", "delete", group, "-f", "json", bootstrap=False))
    assert deleted == [{"group": group, "status": "deleted", "message": None}]


def test_broker_addresses_pick_the_listener_of_the_clients_protocol(zookeeper: ZooKeeperServer) -> None:
    """A broker registered with several listeners (as Kafka writes /brokers/ids/<id>): the client gets
    the endpoint whose listener speaks its security.protocol, else the registration's host and port."""
    from kazoo.client import KazooClient

    chroot = zookeeper.chroot()
    connect = zookeeper.connect_string(chroot)
    registration = {
        "version": 5,
        "host": "plain.example",
        "port": 9092,
        "endpoints": [
            "INTERNAL://internal.example:9094",
            "EXTERNAL://tls.example:9093",
            "PLAINTEXT://plain.example:9092",
        ],
        "listener_security_protocol_map": {
            "INTERNAL": "PLAINTEXT",
            "EXTERNAL": "SASL_SSL",
            "PLAINTEXT": "PLAINTEXT",
        },
        "jmx_port": -1,
        "timestamp": "1",
    }
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=10)
    try:
        client.create(f"{chroot}/brokers/ids/7", json.dumps(registration).encode(), makepath=True)
        client.create(
            f"{chroot}/brokers/ids/3",
            json.dumps(
                {
                    **registration,
                    "endpoints": ["PLAINTEXT://[::1]:9092"],
                    "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                }
            ).encode(),
        )
        with ConsumerRegistry(connect) as registry:
            assert registry.broker_addresses() == ["[::1]:9092", "internal.example:9094"]
            assert registry.broker_addresses("sasl_ssl") == ["plain.example:9092", "tls.example:9093"]
    finally:
        client.stop()
        client.close()
