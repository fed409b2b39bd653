"""`kctl topic create|list|describe|alter|delete` run as real processes against a real broker process."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli_support import kctl

from kctl.client import AdminClient, TopicPartition
from kctl.client.connection import parse_address
from kctl.log.naming import partition_dir_name
from kctl.protocol import ApiKey
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess


def topic(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return kctl("topic", *args, "-b", broker.bootstrap)


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def produce(bootstrap: str, name: str, partition: int, count: int) -> None:
    from kctl.client import BrokerConnection

    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    body = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=name, partition_data=[PartitionProduceData(index=partition, records=builder.build())]
            )
        ],
    )
    host, port = parse_address(bootstrap)
    with BrokerConnection(host, port) as conn:
        response = conn.request(ApiKey.PRODUCE, body)
    assert response.responses[0].partition_responses[0].error_code == 0


# -- create ----------------------------------------------------------------------------------------
def test_create_with_partitions_and_configs(broker: BrokerProcess) -> None:
    result = topic(
        broker,
        "create",
        "orders",
        "payments",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--topic-config",
        "retention.ms=3600000",
        "--topic-config",
        "cleanup.policy=compact",
        "-f",
        "json",
    )
    assert result.returncode == 0, result.stderr
    rows = as_json(result)
    assert [(r["topic"], r["status"], r["partitions"], r["replication_factor"]) for r in rows] == [
        ("orders", "created", 3, 1),
        ("payments", "created", 3, 1),
    ]
    assert all(len(r["topic_id"]) == 36 for r in rows)
    assert "created topic 'orders'" in result.stderr

    [described] = as_json(topic(broker, "describe", "orders", "-f", "json"))
    assert described["configs"] == {"cleanup.policy": "compact", "retention.ms": "3600000"}
    assert described["partition_count"] == 3


def test_create_with_broker_defaults(broker_factory: Any) -> None:
    broker = broker_factory({"num.partitions": "2"})
    result = topic(broker, "create", "defaults")
    assert result.returncode == 0, result.stderr
    header, row = lines(result.stdout)
    assert header[:4] == ["TOPIC", "STATUS", "PARTITIONS", "REPLICATION-FACTOR"]
    assert row[:4] == ["defaults", "created", "2", "1"]


def test_create_existing_topic_and_if_not_exists(broker: BrokerProcess) -> None:
    assert topic(broker, "create", "t").returncode == 0
    again = topic(broker, "create", "t")
    assert again.returncode == 1
    assert "kctl: error: topic 't': TOPIC_ALREADY_EXISTS" in again.stderr
    assert lines(again.stdout)[1][:2] == ["t", "TOPIC_ALREADY_EXISTS"]

    tolerant = topic(broker, "create", "t", "--if-not-exists", "-f", "json")
    assert tolerant.returncode == 0, tolerant.stderr
    assert [(r["topic"], r["status"]) for r in as_json(tolerant)] == [("t", "exists")]
    assert "error" not in tolerant.stderr

    # partial failure: one created, one rejected -> exit 1, both reported
    partial = topic(broker, "create", "u", "bad/name", "-f", "json")
    assert partial.returncode == 1
    statuses = {r["topic"]: r["status"] for r in as_json(partial)}
    assert statuses == {"u": "created", "bad/name": "INVALID_TOPIC_EXCEPTION"}
    assert "topic 'bad/name': INVALID_TOPIC_EXCEPTION" in partial.stderr


def test_create_validate_only_and_invalid_configs(broker: BrokerProcess) -> None:
    dry = topic(broker, "create", "dry", "-p", "4", "--validate-only", "-f", "json")
    assert dry.returncode == 0, dry.stderr
    assert as_json(dry)[0]["status"] == "valid"
    assert as_json(topic(broker, "list", "-f", "json")) == []

    bad = topic(broker, "create", "c", "--topic-config", "no.such.config=1")
    assert bad.returncode == 1
    assert "INVALID_CONFIG" in bad.stderr
    assert topic(broker, "create", "c", "--topic-config", "novalue").returncode == 2
    assert topic(broker, "create", "c", "--partitions", "0").returncode == 2
    wrong = topic(broker, "create", "c", "--config", "retention.ms=1")
    assert wrong.returncode == 2
    assert "--topic-config" in wrong.stderr


# -- list ------------------------------------------------------------------------------------------
def test_list_with_pattern(broker: BrokerProcess) -> None:
    for name, partitions in (("app.orders", "2"), ("app.payments", "1"), ("other", "3")):
        assert topic(broker, "create", name, "-p", partitions).returncode == 0
    table = topic(broker, "list")
    assert table.returncode == 0, table.stderr
    assert lines(table.stdout) == [
        ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"],
        ["app.orders", "2", "1"],
        ["app.payments", "1", "1"],
        ["other", "3", "1"],
    ]
    matched = topic(broker, "list", "--pattern", r"app\..*", "-f", "jsonl")
    assert [json.loads(line) for line in matched.stdout.splitlines()] == [
        {"topic": "app.orders", "partitions": 2, "replication_factor": 1},
        {"topic": "app.payments", "partitions": 1, "replication_factor": 1},
    ]
    assert as_json(topic(broker, "list", "--pattern", "app", "-f", "json")) == []  # the whole name must match
    internal = as_json(topic(broker, "list", "--internal", "-f", "json"))
    assert {"topic": "other", "partitions": 3, "replication_factor": 1, "internal": False} in internal
    assert topic(broker, "list", "--pattern", "(").returncode == 2


# -- describe --------------------------------------------------------------------------------------
def test_describe_json_with_offsets(broker: BrokerProcess) -> None:
    assert (
        topic(broker, "create", "events", "-p", "2", "--topic-config", "segment.bytes=1048576").returncode
        == 0
    )
    produce(broker.bootstrap, "events", 1, 7)
    with AdminClient(broker.bootstrap) as admin:
        assert admin.delete_records({TopicPartition("events", 1): 2})[TopicPartition("events", 1)].ok
    result = topic(broker, "describe", "events", "-f", "json")
    assert result.returncode == 0, result.stderr
    [doc] = as_json(result)
    assert doc["topic"] == "events" and doc["internal"] is False and len(doc["topic_id"]) == 36
    assert (doc["partition_count"], doc["replication_factor"]) == (2, 1)
    assert doc["configs"] == {"segment.bytes": "1048576"}
    p0, p1 = doc["partitions"]
    leader = p0["leader"]
    assert leader >= 0
    assert p0 == {
        "partition": 0,
        "leader": leader,
        "leader_epoch": p0["leader_epoch"],
        "replicas": [leader],
        "isr": [leader],
        "offline_replicas": [],
        "available": True,
        "log_start_offset": 0,
        "high_watermark": 0,
        "size": 0,
    }
    assert (p1["partition"], p1["log_start_offset"], p1["high_watermark"]) == (1, 2, 7)
    segments = list(broker.data_dir.rglob(f"{partition_dir_name(TopicPartition('events', 1))}/*.log"))
    assert segments and p1["size"] == sum(path.stat().st_size for path in segments) > 0
    assert "all_configs" not in doc

    every = topic(broker, "describe", "events", "--all-configs", "-f", "json")
    assert every.returncode == 0, every.stderr
    configs = {c["name"]: c for c in as_json(every)[0]["all_configs"]}
    assert configs["segment.bytes"] == {
        "name": "segment.bytes", "value": "1048576", "default": "1073741824",
        "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False, "sensitive": False,
    }  # fmt: skip
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"]["value"] == configs["cleanup.policy"]["default"] == "delete"
    assert len(configs) > 10
    table = topic(broker, "describe", "events", "--all-configs")
    assert "DEFAULT" in table.stdout and "DYNAMIC_TOPIC_CONFIG" in table.stdout


def test_describe_table_and_all(broker: BrokerProcess) -> None:
    assert topic(broker, "create", "a", "-p", "2").returncode == 0
    assert topic(broker, "create", "b").returncode == 0
    result = topic(broker, "describe", "--all")
    assert result.returncode == 0, result.stderr
    topics_table, partitions_table = result.stdout.split("\n\n")
    assert lines(topics_table)[0] == ["TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"]
    assert [row[0] for row in lines(topics_table)[1:]] == ["a", "b"]
    assert lines(topics_table)[1][4] == "-"
    rows = lines(partitions_table)
    assert rows[0] == [
        "TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "HIGH-WATERMARK",
        "SIZE",
    ]  # fmt: skip
    assert [(r[0], r[1], r[6], r[7], r[8], r[9]) for r in rows[1:]] == [
        ("a", "0", "-", "0", "0", "0B"),  # sizes human-readable in tables
        ("a", "1", "-", "0", "0", "0B"),
        ("b", "0", "-", "0", "0", "0B"),
    ]
    exact = topic(broker, "describe", "a", "--bytes")
    assert exact.returncode == 0, exact.stderr
    assert [row[9] for row in lines(exact.stdout.split("\n\n")[1])[1:]] == ["0", "0"]
    assert len(as_json(topic(broker, "describe", "--all", "-f", "json"))) == 2


def test_describe_missing_topics(broker: BrokerProcess) -> None:
    assert topic(broker, "create", "present").returncode == 0
    missing = topic(broker, "describe", "absent", "-f", "json")
    assert missing.returncode == 3
    assert "topic 'absent': UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    assert as_json(missing) == []
    partial = topic(broker, "describe", "present", "absent", "-f", "json")
    assert partial.returncode == 1
    assert [d["topic"] for d in as_json(partial)] == ["present"]
    assert topic(broker, "describe").returncode == 2
    assert topic(broker, "describe", "present", "--all").returncode == 2


# -- alter -----------------------------------------------------------------------------------------
def test_alter_partitions_and_configs(broker: BrokerProcess) -> None:
    create = topic(broker, "create", "t", "-p", "1", "--topic-config", "retention.ms=1000")
    assert create.returncode == 0, create.stderr
    result = topic(
        broker,
        "alter",
        "t",
        "--partitions",
        "4",
        "--topic-config",
        "segment.bytes=1048576",
        "--delete-config",
        "retention.ms",
        "-f",
        "json",
    )
    assert result.returncode == 0, result.stderr
    assert [(r["change"], r["status"]) for r in as_json(result)] == [
        ("partitions=4", "altered"),
        ("segment.bytes=1048576 -retention.ms", "altered"),
    ]
    [doc] = as_json(topic(broker, "describe", "t", "-f", "json"))
    assert doc["partition_count"] == 4
    assert doc["configs"] == {"segment.bytes": "1048576"}
    assert all(p["leader"] >= 0 and p["high_watermark"] == 0 for p in doc["partitions"])

    shrink = topic(broker, "alter", "t", "-p", "2")
    assert shrink.returncode == 1
    assert "INVALID_PARTITIONS" in shrink.stderr
    unknown = topic(broker, "alter", "t", "--topic-config", "no.such.config=1")
    assert unknown.returncode == 1
    assert "INVALID_CONFIG" in unknown.stderr
    dry = topic(
        broker, "alter", "t", "--topic-config", "segment.bytes=2097152", "--validate-only", "-f", "json"
    )
    assert dry.returncode == 0 and as_json(dry)[0]["status"] == "valid"
    assert as_json(topic(broker, "describe", "t", "-f", "json"))[0]["configs"] == {"segment.bytes": "1048576"}

    missing = topic(broker, "alter", "absent", "-p", "3", "--topic-config", "retention.ms=1")
    assert missing.returncode == 3
    assert len(lines(missing.stdout)) == 2  # header + the partitions row; configs were not tried
    assert topic(broker, "alter", "t").returncode == 2
    assert topic(broker, "alter", "t", "--topic-config", "a=1", "--delete-config", "a").returncode == 2


# -- delete ----------------------------------------------------------------------------------------
def test_delete(broker: BrokerProcess) -> None:
    for name in ("x", "y", "z"):
        assert topic(broker, "create", name).returncode == 0
    result = topic(broker, "delete", "x", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert as_json(result) == [{"topic": "x", "status": "deleted", "message": None}]
    assert [t["topic"] for t in as_json(topic(broker, "list", "-f", "json"))] == ["y", "z"]

    missing = topic(broker, "delete", "x")
    assert missing.returncode == 3
    assert "topic 'x': UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    tolerant = topic(broker, "delete", "x", "y", "--if-exists", "-f", "json")
    assert tolerant.returncode == 0, tolerant.stderr
    assert [(r["topic"], r["status"]) for r in as_json(tolerant)] == [("x", "absent"), ("y", "deleted")]
    partial = topic(broker, "delete", "z", "x")
    assert partial.returncode == 1
    assert as_json(topic(broker, "list", "-f", "json")) == []
    # a deleted name can be created again at once
    assert topic(broker, "create", "x", "-p", "2").returncode == 0


# -- client configuration and connection errors ----------------------------------------------------
def test_client_properties_file_env_and_x(broker: BrokerProcess, tmp_path: Path) -> None:
    assert topic(broker, "create", "t").returncode == 0
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"bootstrap.servers={broker.bootstrap}\nclient.id=cli-test\nrequest.timeout.ms=5000\nacks=all\n"
    )
    from_file = kctl("topic", "list", "--config", str(properties), "-f", "json")
    assert from_file.returncode == 0, from_file.stderr
    assert [t["topic"] for t in as_json(from_file)] == ["t"]
    assert "ignoring unknown client property 'acks'" in from_file.stderr
    from_env = kctl("topic", "list", "-f", "json", env={"KCTL_BOOTSTRAP_SERVER": broker.bootstrap})
    assert from_env.returncode == 0, from_env.stderr
    with_x = kctl(
        "topic", "list", "-X", f"bootstrap.servers={broker.bootstrap}", "-X", "client.id=x", "-f", "json"
    )
    assert with_x.returncode == 0, with_x.stderr

    typo = topic(broker, "list", "-X", "request.timeout=5")
    assert typo.returncode == 2
    assert "did you mean 'request.timeout.ms'" in typo.stderr
    assert topic(broker, "list", "-X", "request.timeout.ms=soon").returncode == 2
    assert kctl("topic", "list", "--config", str(tmp_path / "missing.properties")).returncode == 3


def test_unreachable_broker_exits_3_quickly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        started = time.monotonic()
        result = kctl("topic", "list", "-b", address)
        assert result.returncode == 3
        assert "cannot reach any broker" in result.stderr
        assert time.monotonic() - started < 30
    assert kctl("topic", "list", "-b", "a:b:c").returncode == 2
