"""`kctl cluster info` (kcat -L, rpk cluster info) against an embedded broker and a ZooKeeper cluster:
cluster id, controller, brokers with their rack, and every partition's leader, replicas and ISR."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from cli_support import kctl

from kctl.client import AdminClient


def info_json(bootstrap: str, *args: str) -> Any:
    result = kctl("cluster", "info", "-b", bootstrap, "-f", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def embedded(module_broker_factory: Any) -> Any:
    broker = module_broker_factory({"broker.rack": "rack-a"})
    assert kctl("topic", "create", "info-t", "-p", "3", "-b", broker.bootstrap).returncode == 0
    return broker


def test_embedded_broker_json(embedded: Any) -> None:
    with AdminClient(embedded.bootstrap) as admin:
        expected = admin.describe_cluster()
    document = info_json(embedded.bootstrap)
    assert document["cluster_id"] == expected.cluster_id and document["cluster_id"]
    assert document["controller_id"] == 0
    [broker] = document["brokers"]
    assert broker["broker_id"] == 0 and broker["rack"] == "rack-a" and broker["controller"] is True
    assert broker["endpoint"] == embedded.bootstrap
    [topic] = [t for t in document["topics"] if t["topic"] == "info-t"]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert (p["leader"], p["replicas"], p["isr"], p["offline_replicas"]) == (0, [0], [0], [])
    assert all(not t["internal"] for t in document["topics"])


def test_embedded_broker_table_and_jsonl(embedded: Any) -> None:
    table = kctl("cluster", "info", "-b", embedded.bootstrap)
    assert table.returncode == 0, table.stderr
    lines = [line.split() for line in table.stdout.splitlines() if line.strip()]
    assert ["controller", "0"] in lines
    assert ["0", embedded.bootstrap, "rack-a", "*"] in lines
    assert ["info-t", "2", "0", "0", "0", "0", "-"] in lines
    jsonl = kctl("cluster", "info", "-b", embedded.bootstrap, "-f", "jsonl")
    assert jsonl.returncode == 0, jsonl.stderr
    [line] = jsonl.stdout.splitlines()
    assert json.loads(line)["brokers"][0]["broker_id"] == 0


def test_named_topics_and_missing_ones(embedded: Any) -> None:
    document = info_json(embedded.bootstrap, "-t", "info-t")
    assert [t["topic"] for t in document["topics"]] == ["info-t"]
    missing = kctl("cluster", "info", "-b", embedded.bootstrap, "-t", "no-such-topic")
    assert missing.returncode == 3, missing.stderr
    assert "no-such-topic" in missing.stderr
    some = kctl(
        "cluster", "info", "-b", embedded.bootstrap, "-t", "no-such-topic", "-t", "info-t", "-f", "json"
    )
    assert some.returncode == 1
    assert [t["topic"] for t in json.loads(some.stdout)["topics"]] == ["info-t"]


def test_unreachable_broker_exits_3() -> None:
    result = kctl("cluster", "info", "-b", "127.0.0.1:1", "-X", "default.api.timeout.ms=2000")
    assert result.returncode == 3, result.stderr


def test_zookeeper_cluster(module_cluster_factory: Any) -> None:
    cluster = module_cluster_factory(3, {"broker.rack": "r1"})
    bootstrap = cluster.bootstrap_servers
    created = kctl("topic", "create", "info-rf3", "-p", "2", "-r", "3", "-b", bootstrap)
    assert created.returncode == 0, created.stderr
    document = info_json(bootstrap, "--internal")
    assert [b["broker_id"] for b in document["brokers"]] == [1, 2, 3]
    assert all(b["rack"] == "r1" for b in document["brokers"])
    assert document["controller_id"] in (1, 2, 3)
    assert [b["broker_id"] for b in document["brokers"] if b["controller"]] == [document["controller_id"]]
    [topic] = [t for t in document["topics"] if t["topic"] == "info-rf3"]
    for p in topic["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3]
        assert p["leader"] in p["replicas"]
        assert sorted(p["isr"]) == [1, 2, 3] or p["leader"] in p["isr"]


def test_offsets_and_trim_on_a_replicated_topic(module_cluster_factory: Any) -> None:
    """`topic offsets` and `topic trim` go to each partition's leader: on a cluster with three
    replicas per partition too."""
    cluster = module_cluster_factory(3, {"broker.rack": "r1"})
    bootstrap = cluster.bootstrap_servers
    assert kctl("topic", "create", "trim-rf3", "-p", "2", "-r", "3", "-b", bootstrap).returncode == 0
    produced = subprocess.run(
        [sys.executable, "-m", "kctl", "produce", "trim-rf3", "-p", "1", "-b", bootstrap],
        input="".join(f"r{i}\n" for i in range(10)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    trimmed = kctl("topic", "trim", "trim-rf3", "--to", "-4", "--execute", "-f", "json", "-b", bootstrap)
    assert trimmed.returncode == 0, trimmed.stderr
    assert [(r["partition"], r["new_log_start_offset"], r["status"]) for r in json.loads(trimmed.stdout)] == [
        (0, 0, "unchanged"),
        (1, 6, "trimmed"),
    ]
    offsets = kctl("topic", "offsets", "trim-rf3", "-f", "json", "-b", bootstrap)
    assert offsets.returncode == 0, offsets.stderr
    assert [(r["earliest"], r["latest"]) for r in json.loads(offsets.stdout)] == [(0, 0), (6, 10)]
