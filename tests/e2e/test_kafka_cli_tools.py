"""Apache Kafka 3.9's own command-line tools, unchanged, against kctl (issue 16 §3): kafka-topics,
kafka-configs (topics, brokers, broker-loggers), kafka-consumer-groups (with --reset-offsets), the
console producer and consumer, kafka-get-offsets, kafka-delete-records, kafka-log-dirs and
kafka-broker-api-versions on one broker; kafka-acls (and the console clients as an ACL-limited user)
on a broker with the authorizer on and a SASL/PLAIN super user; kafka-reassign-partitions and
kafka-leader-election on a 3-broker cluster.

Each test asserts the tool's exit code and its effect, read back with kctl's own clients (or from
the tool's output where that is the effect). The tools run from Kafka's jars (``kafka_tool``
fixture, kctl.testing.kafka_tools): without them every test here skips with the reason. Each run
starts a JVM, so the tests keep invocations few and share one broker (one cluster) per module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_kafka import unique

from kctl.client import AdminClient, TopicPartition
from kctl.client.admin.results import NewTopic
from kctl.client.admin.security import AclBinding
from kctl.client.config import ClientConfig
from kctl.client.connection import BrokerConnection
from kctl.client.consumer.consumer import Consumer
from kctl.client.group.admin import GroupAdmin
from kctl.client.partitioner import murmur2_partition
from kctl.client.producer.producer import Producer
from kctl.client.security import SecuritySettings
from kctl.protocol import ApiKey
from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.testing import BrokerProcess, LocalCluster, wait_for
from kctl.testing.kafka_tools import KafkaTools, ToolResult

pytestmark = pytest.mark.slow  # each tool run starts a JVM

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def broker(kafka_tool: KafkaTools, module_broker_factory: Any) -> BrokerProcess:
    """One plain broker for the module (requested after kafka_tool: no broker when the tools skip)."""
    started: BrokerProcess = module_broker_factory(
        {"num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
    )
    return started


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    with AdminClient(broker.bootstrap) as client:
        yield client


def tool(kafka_tool: KafkaTools, broker: BrokerProcess, name: str, *args: str, **kw: Any) -> ToolResult:
    """Run `name` with ``--bootstrap-server`` set to the broker's address."""
    return kafka_tool(name, "--bootstrap-server", broker.bootstrap, *args, **kw)


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    """`count` records of `topic` read from the beginning with kctl's consumer."""
    records: list[Any] = []
    with Consumer(bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()

        def enough() -> bool:
            records.extend(consumer.poll(0.5))
            return len(records) >= count

        wait_for(enough, f"{count} records", 20)
    return records


def produce_lines(
    kafka_tool: KafkaTools, broker: BrokerProcess, topic: str, lines: list[str], *args: str
) -> None:
    result = tool(
        kafka_tool, broker, "kafka-console-producer", "--topic", topic, *args, input="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.describe()
    assert "ERROR" not in result.stderr, result.describe()


# ------------------------------------------------------------------------ without Kafka's jars


@pytest.mark.parametrize("require", ["", "1"])
def test_fixture_without_jars_skips_loudly_or_fails_when_required(tmp_path: Path, require: str) -> None:
    """No java on PATH and an empty jar cache: a test using ``kafka_tool`` is skipped with the reason
    in the summary (or fails with KCTL_REQUIRE_KAFKA_TOOLS=1) — never passes silently."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["kctl.testing.pytest_plugin"]\n')
    (tmp_path / "test_uses_tools.py").write_text("def test_it(kafka_tool):\n    assert False\n")
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    env = {
        **os.environ,
        "PATH": str(empty_path),
        "KCTL_KAFKA_CACHE": str(tmp_path / "cache"),
        "KCTL_REQUIRE_KAFKA_TOOLS": require,
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if require:
        assert result.returncode == 1 and "1 error" in result.stdout, result.stdout + result.stderr
    else:
        assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout + result.stderr
        assert "SKIPPED" in result.stdout
    assert "Apache Kafka's tools unavailable: no java on PATH" in result.stdout, result.stdout


# ------------------------------------------------------------------------------------ kafka-topics


def test_topics_create_list_describe_alter_delete(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    topic = unique("kt-topic")
    created = tool(
        kafka_tool,
        broker,
        "kafka-topics",
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
        "--config",
        "cleanup.policy=compact",
    ).check()
    assert f"Created topic {topic}." in created.stdout
    [description] = admin.describe_topics([topic])
    assert description.ok and len(description.partitions) == 3
    assert all(p.replicas == (broker.broker_id,) for p in description.partitions)
    [configs] = admin.describe_topic_configs([topic])
    values = {entry.name: entry.value for entry in configs.entries}
    assert values["retention.ms"] == "3600000" and values["cleanup.policy"] == "compact"

    assert topic in tool(kafka_tool, broker, "kafka-topics", "--list").check().lines

    tool(kafka_tool, broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "5").check()
    [description] = admin.describe_topics([topic])
    assert len(description.partitions) == 5

    described = tool(kafka_tool, broker, "kafka-topics", "--describe", "--topic", topic).check()
    head, *rows = described.lines
    assert f"Topic: {topic}" in head and "PartitionCount: 5" in head and "ReplicationFactor: 1" in head
    assert "retention.ms=3600000" in head and "cleanup.policy=compact" in head
    assert [row.split("Partition: ")[1].split()[0] for row in rows] == ["0", "1", "2", "3", "4"]
    assert all(f"Leader: {broker.broker_id}" in row and f"Isr: {broker.broker_id}" in row for row in rows)

    tool(kafka_tool, broker, "kafka-topics", "--delete", "--topic", topic).check()
    wait_for(lambda: topic not in {t.name for t in admin.list_topics()}, f"{topic} deleted", 10)


def test_topics_errors_exit_nonzero_and_change_nothing(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    topic = unique("kt-errors")
    tool(kafka_tool, broker, "kafka-topics", "--create", "--topic", topic, "--partitions", "2").check()
    again = tool(kafka_tool, broker, "kafka-topics", "--create", "--topic", topic)
    assert again.returncode == 1 and "TopicExistsException" in again.stderr, again.describe()
    shrink = tool(kafka_tool, broker, "kafka-topics", "--alter", "--topic", topic, "--partitions", "1")
    assert shrink.returncode == 1 and "InvalidPartitionsException" in shrink.stderr, shrink.describe()
    unknown = tool(
        kafka_tool,
        broker,
        "kafka-topics",
        "--create",
        "--topic",
        unique("kt-bad"),
        "--config",
        "no.such.config=1",
    )
    assert unknown.returncode == 1 and "InvalidConfigurationException" in unknown.stderr, unknown.describe()
    [description] = admin.describe_topics([topic])
    assert len(description.partitions) == 2


# ------------------------------------------------------------------------------------ kafka-configs


def test_configs_describe_and_alter_topic(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    topic = unique("kt-configs")
    admin.create_topics([NewTopic(topic, 1, 1, {"retention.ms": "3600000"})])[0].raise_for_error()
    entity = ("--entity-type", "topics", "--entity-name", topic)
    tool(
        kafka_tool,
        broker,
        "kafka-configs",
        "--alter",
        *entity,
        "--add-config",
        "retention.ms=7200000,segment.bytes=1048576,cleanup.policy=[compact,delete]",
    ).check()
    [configs] = admin.describe_topic_configs([topic])
    values = {entry.name: entry.value for entry in configs.entries}
    assert values["retention.ms"] == "7200000" and values["segment.bytes"] == "1048576"
    assert values["cleanup.policy"] == "compact,delete"

    tool(kafka_tool, broker, "kafka-configs", "--alter", *entity, "--delete-config", "segment.bytes").check()
    [configs] = admin.describe_topic_configs([topic])
    segment = next(entry for entry in configs.entries if entry.name == "segment.bytes")
    assert segment.is_default and segment.value == "1073741824"

    described = tool(kafka_tool, broker, "kafka-configs", "--describe", *entity).check()
    assert described.lines[0] == f"Dynamic configs for topic {topic} are:"
    assert {line.split()[0] for line in described.lines[1:]} == {
        "retention.ms=7200000",
        "cleanup.policy=compact,delete",
    }

    bad = tool(kafka_tool, broker, "kafka-configs", "--alter", *entity, "--add-config", "retention.ms=soon")
    assert bad.returncode == 1 and "InvalidConfigurationException" in bad.stdout + bad.stderr, bad.describe()
    [configs] = admin.describe_topic_configs([topic])
    assert {entry.name: entry.value for entry in configs.entries}["retention.ms"] == "7200000"


def test_configs_describe_broker(kafka_tool: KafkaTools, broker: BrokerProcess) -> None:
    """Describe only: altering broker configs is another change (dynamic broker configs, issue 16 §1)."""
    entity = ("--entity-type", "brokers", "--entity-name", str(broker.broker_id))
    everything = tool(kafka_tool, broker, "kafka-configs", "--describe", *entity, "--all").check()
    assert everything.lines[0] == f"All configs for broker {broker.broker_id} are:"
    values = dict(line.split()[0].split("=", 1) for line in everything.lines[1:])
    assert values["num.partitions"] == "1"  # the broker's -X override
    assert values["log.dirs"] == str(broker.data_dir)
    dynamic = tool(kafka_tool, broker, "kafka-configs", "--describe", *entity).check()
    assert dynamic.lines == [f"Dynamic configs for broker {broker.broker_id} are:"]


def test_configs_broker_loggers_change_levels_at_runtime(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    """kafka-configs --entity-type broker-loggers: --describe lists the loggers and their levels,
    --alter --add-config kctl.request=DEBUG turns the request log on at once, --delete-config returns
    it to its configured level; an unknown level fails and changes nothing."""
    entity = ("--entity-type", "broker-loggers", "--entity-name", str(broker.broker_id))

    def levels() -> dict[str, str]:
        described = tool(kafka_tool, broker, "kafka-configs", "--describe", *entity).check()
        assert described.lines[0] == f"Dynamic configs for broker-logger {broker.broker_id} are:"
        return dict(line.split()[0].split("=", 1) for line in described.lines[1:])

    before = levels()
    assert before["root"] == "INFO" and before["kctl.request"] == "INFO", before

    def logged(client_id: str) -> bool:
        return f"client_id={client_id} " in broker.log_file.read_text(errors="replace")

    tool(
        kafka_tool, broker, "kafka-configs", "--alter", *entity, "--add-config", "kctl.request=DEBUG"
    ).check()
    try:
        now = levels()
        assert {name: now[name] for name in before} == {**before, "kctl.request": "DEBUG"}
        with Producer(broker.bootstrap, {"client.id": "kafka-configs-on"}) as producer:
            producer.produce_sync(unique("kt-loggers"), b"v", timeout=30)
        wait_for(lambda: logged("kafka-configs-on"), "request log lines", describe=broker.log_tail)

        bad = tool(
            kafka_tool, broker, "kafka-configs", "--alter", *entity, "--add-config", "kctl.broker=LOUD"
        )
        assert bad.returncode == 1 and "InvalidConfigurationException" in bad.stdout + bad.stderr, (
            bad.describe()
        )
    finally:
        tool(
            kafka_tool, broker, "kafka-configs", "--alter", *entity, "--delete-config", "kctl.request"
        ).check()
    after = {e.name: e.value for e in admin.describe_broker_loggers(broker.broker_id)}
    assert after["kctl.request"] == "INFO" and after["kctl.broker"] == "INFO"


# ------------------------------------------------------------------ console producer and consumer


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_console_producer_keys_headers_and_codecs(
    kafka_tool: KafkaTools, broker: BrokerProcess, codec: str
) -> None:
    topic = unique(f"kt-console-{codec}")
    lines = [f"h1:a,h2:b\tk{i % 2}\tv{i}" for i in range(4)]
    produce_lines(
        kafka_tool,
        broker,
        topic,
        lines,
        "--compression-codec",
        codec,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--request-required-acks",
        "all",
    )
    records = read_all(broker.bootstrap, topic, 1, 4)
    assert [(r.key, r.value) for r in records] == [(f"k{i % 2}".encode(), f"v{i}".encode()) for i in range(4)]
    assert all(r.headers == (("h1", b"a"), ("h2", b"b")) for r in records)


def test_console_consumer_from_beginning_keys_and_group(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    topic, group = unique("kt-consume"), unique("kt-consume-group")
    admin.create_topics([NewTopic(topic, 2, 1)])[0].raise_for_error()
    produce_lines(
        kafka_tool,
        broker,
        topic,
        [f"key{i}:value{i}" for i in range(6)],
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    )
    consumed = tool(
        kafka_tool,
        broker,
        "kafka-console-consumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "6",
        "--group",
        group,
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
        "--timeout-ms",
        "30000",
    ).check()
    assert sorted(consumed.lines) == sorted(f"key{i}:value{i}" for i in range(6))
    assert "Processed a total of 6 messages" in consumed.stderr
    # Kafka's producer put each key where kctl's partitioner does (murmur2)
    records = read_all(broker.bootstrap, topic, 2, 6)
    assert {r.key: r.partition for r in records} == {
        f"key{i}".encode(): murmur2_partition(f"key{i}".encode(), 2) for i in range(6)
    }
    # the group's commit is visible to kctl (the consumer commits on close)
    committed = GroupAdmin(admin).committed_offsets(group)
    assert sum(o.offset for o in committed.values() if o is not None) == 6


def test_producer_and_consumer_perf_tests_idempotent_in_flight_batches(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    """Kafka's perf tools: an idempotent producer with many small batches in flight (5 per
    connection) and a group consumer reading them all back."""
    topic = unique("kt-perf")
    admin.create_topics([NewTopic(topic, 3, 1)])[0].raise_for_error()
    produced = kafka_tool(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={broker.bootstrap}",
        "batch.size=2048",
        "linger.ms=0",
        "acks=all",
        "enable.idempotence=true",
        "max.in.flight.requests.per.connection=5",
    ).check()
    assert "20000 records sent" in produced.stdout, produced.describe()
    ends = admin.list_offsets([TopicPartition(topic, p) for p in range(3)])
    assert sum(r.offset for r in ends.values()) == 20000
    consumed = tool(
        kafka_tool,
        broker,
        "kafka-consumer-perf-test",
        "--topic",
        topic,
        "--messages",
        "20000",
        "--timeout",
        "30000",
    ).check()
    header, row = consumed.lines[-2:]
    assert dict(zip(header.split(", "), row.split(", "), strict=True))["data.consumed.in.nMsg"] == "20000"


# ------------------------------------------------------------------------------ consumer groups


def test_consumer_groups_list_describe_reset_delete(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient
) -> None:
    topic, group = unique("kt-groups"), unique("kt-group")
    admin.create_topics([NewTopic(topic, 2, 1)])[0].raise_for_error()
    produce_lines(
        kafka_tool,
        broker,
        topic,
        [f"k{i}:v{i}" for i in range(10)],
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    )
    tool(
        kafka_tool,
        broker,
        "kafka-console-consumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "10",
        "--group",
        group,
        "--timeout-ms",
        "30000",
    ).check()
    groups = GroupAdmin(admin)
    end = {tp: r.offset for tp, r in admin.list_offsets([TopicPartition(topic, p) for p in (0, 1)]).items()}
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    def committed() -> dict[TopicPartition, int | None]:
        return {
            tp: (o.offset if o is not None else None)
            for tp, o in groups.committed_offsets(group, [tp0, tp1]).items()
        }

    assert committed() == end

    assert group in tool(kafka_tool, broker, "kafka-consumer-groups", "--list").check().lines
    described = tool(kafka_tool, broker, "kafka-consumer-groups", "--describe", "--group", group).check()
    rows = {tuple(line.split()[1:3]): line.split() for line in described.lines if line.startswith(group)}
    for tp in (tp0, tp1):
        row = rows[(topic, str(tp.partition))]
        assert row[3:6] == [str(end[tp]), str(end[tp]), "0"]  # CURRENT-OFFSET LOG-END-OFFSET LAG
    state = tool(
        kafka_tool, broker, "kafka-consumer-groups", "--describe", "--group", group, "--state"
    ).check()
    assert any(line.startswith(group) and "Empty" in line for line in state.lines), state.describe()

    reset = ("--group", group, "--reset-offsets")
    tool(
        kafka_tool, broker, "kafka-consumer-groups", *reset, "--to-earliest", "--topic", topic, "--execute"
    ).check()
    assert committed() == {tp0: 0, tp1: 0}
    tool(
        kafka_tool,
        broker,
        "kafka-consumer-groups",
        *reset,
        "--to-offset",
        "2",
        "--topic",
        f"{topic}:1",
        "--execute",
    ).check()
    assert committed() == {tp0: 0, tp1: 2}
    tool(
        kafka_tool, broker, "kafka-consumer-groups", *reset, "--shift-by", "1", "--topic", topic, "--execute"
    ).check()
    assert committed() == {tp0: 1, tp1: 3}
    planned = tool(
        kafka_tool, broker, "kafka-consumer-groups", *reset, "--to-latest", "--topic", topic, "--dry-run"
    ).check()
    assert committed() == {tp0: 1, tp1: 3}  # a dry run changes nothing
    assert str(end[tp0]) in planned.stdout

    tool(kafka_tool, broker, "kafka-consumer-groups", "--delete", "--group", group).check()
    assert group not in {g.group_id for g in groups.list_groups()}
    missing = tool(kafka_tool, broker, "kafka-consumer-groups", "--delete", "--group", group)
    assert "GroupIdNotFoundException" in missing.stdout + missing.stderr, missing.describe()


# ------------------------------------------------------------------ offsets, records, log dirs


@pytest.fixture(scope="module")
def filled(broker: BrokerProcess, admin: AdminClient) -> str:
    """A topic of two partitions holding 3 and 5 records, timestamps 1000.. (written by kctl)."""
    topic = unique("kt-offsets")
    admin.create_topics([NewTopic(topic, 2, 1)])[0].raise_for_error()
    with Producer(broker.bootstrap, {"acks": "all"}) as producer:
        futures = [
            producer.send(topic, f"v{i}", partition=p, timestamp=1000 + 10 * i)
            for p, n in ((0, 3), (1, 5))
            for i in range(n)
        ]
        producer.flush(10)
    for future in futures:
        future.result(10)
    return topic


def test_get_offsets_latest_earliest_max_timestamp(
    kafka_tool: KafkaTools, broker: BrokerProcess, filled: str
) -> None:
    expected = {"-1": {0: 3, 1: 5}, "-2": {0: 0, 1: 0}, "-3": {0: 2, 1: 4}, "1015": {0: 2, 1: 2}}
    for time, offsets in expected.items():
        result = tool(kafka_tool, broker, "kafka-get-offsets", "--topic", filled, "--time", time).check()
        assert result.lines == [f"{filled}:{p}:{o}" for p, o in sorted(offsets.items())], (
            time,
            result.describe(),
        )


def test_delete_records_from_json_file(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient, filled: str, tmp_path: Path
) -> None:
    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": filled, "partition": 1, "offset": 2}]})
    )
    result = tool(kafka_tool, broker, "kafka-delete-records", "--offset-json-file", str(plan)).check()
    assert f"partition: {filled}-1\tlow_watermark: 2" in result.stdout, result.describe()
    tps = [TopicPartition(filled, 0), TopicPartition(filled, 1)]
    assert {tp.partition: r.offset for tp, r in admin.list_offsets(tps, "earliest").items()} == {0: 0, 1: 2}
    remaining = read_all(broker.bootstrap, filled, 2, 6)
    assert sorted((r.partition, r.offset) for r in remaining) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 2),
        (1, 3),
        (1, 4),
    ]

    beyond = tmp_path / "beyond.json"
    beyond.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": filled, "partition": 0, "offset": 99}]})
    )
    result = tool(kafka_tool, broker, "kafka-delete-records", "--offset-json-file", str(beyond))
    assert "OffsetOutOfRangeException" in result.stdout, result.describe()
    assert {tp.partition: r.offset for tp, r in admin.list_offsets(tps, "earliest").items()} == {0: 0, 1: 2}


def test_delete_records_refused_on_a_compact_only_topic(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient, tmp_path: Path
) -> None:
    """Kafka deletes records only where cleanup.policy includes delete: POLICY_VIOLATION otherwise."""
    topic = unique("kt-compacted")
    admin.create_topics([NewTopic(topic, 1, 1, {"cleanup.policy": "compact"})])[0].raise_for_error()
    produce_lines(
        kafka_tool,
        broker,
        topic,
        ["a:1", "b:2"],
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    )
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 1}]}))
    result = tool(kafka_tool, broker, "kafka-delete-records", "--offset-json-file", str(plan))
    assert (
        f"partition: {topic}-0\terror: org.apache.kafka.common.errors.PolicyViolationException"
        in result.stdout
    ), result.describe()
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets([tp], "earliest")[tp].offset == 0


def test_log_dirs_describe(
    kafka_tool: KafkaTools, broker: BrokerProcess, admin: AdminClient, filled: str
) -> None:
    result = tool(kafka_tool, broker, "kafka-log-dirs", "--describe", "--topic-list", filled).check()
    document = json.loads(result.lines[-1])
    [entry] = document["brokers"]
    assert entry["broker"] == broker.broker_id
    [log_dir] = entry["logDirs"]
    assert log_dir["error"] is None and Path(log_dir["logDir"]) == broker.data_dir
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    ours = admin.describe_log_dirs([broker.broker_id])[broker.broker_id]
    expected = {
        f"{r.topic_partition.topic}-{r.topic_partition.partition}": r.size
        for d in ours
        for r in d.replicas
        if r.topic_partition.topic == filled
    }
    assert sizes == expected and len(sizes) == 2 and all(size > 0 for size in sizes.values())


def test_broker_api_versions(kafka_tool: KafkaTools, broker: BrokerProcess) -> None:
    result = tool(kafka_tool, broker, "kafka-broker-api-versions").check()
    assert f"{broker.bootstrap} (id: {broker.broker_id} rack: null) -> (" in result.stdout
    for line in (
        "Produce(0): 0 to 11 [usable: 11]",
        "Fetch(1): 0 to 17 [usable: 17]",
        "Metadata(3): 0 to 12 [usable: 12]",
    ):
        assert line in result.stdout, result.describe()


# ------------------------------------------------------------------------------------ kafka-acls


class Secured:
    """A broker with the ACL authorizer and four listeners: PLAINTEXT (anonymous, no rights),
    SASL_PLAINTEXT and SASL_SSL (PLAIN users ``admin``, a super user, and ``alice``; SCRAM users
    made by the tests), SSL with required client certificates (``CN=admin`` a super user); Kafka
    client property files for them."""

    def __init__(self, broker: BrokerProcess, directory: Path, ca: Path, admin_cert: Path) -> None:
        self.broker = broker
        self.directory = directory
        _, self.bootstrap, self.sasl_ssl, self.ssl = broker.addresses
        self.ca = ca
        self.admin_config = self.sasl_properties("admin", "PLAIN", ADMIN_PASSWORD)
        self.alice_config = self.sasl_properties("alice", "PLAIN", ALICE_PASSWORD)
        self.cert_config = self._write(
            "admin-cert",
            f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={admin_cert}\n",
        )

    def _write(self, stem: str, text: str) -> Path:
        path = self.directory / f"{stem}.properties"
        path.write_text(text)
        return path

    def sasl_properties(self, user: str, mechanism: str, password: str, *, tls: bool = False) -> Path:
        """A Kafka client property file logging in as `user` with `mechanism` (over TLS: SASL_SSL)."""
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        text = f"security.protocol={'SASL_SSL' if tls else 'SASL_PLAINTEXT'}\nsasl.mechanism={mechanism}\n"
        text += (
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{password}";\n'
        )
        if tls:
            text += f"ssl.truststore.type=PEM\nssl.truststore.location={self.ca}\n"
        return self._write(f"{user}-{mechanism}-{tls}", text)

    def admin(self) -> AdminClient:
        return AdminClient(
            self.bootstrap,
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": ADMIN_PASSWORD,
            },
        )


@pytest.fixture(scope="module")
def secured(
    kafka_tool: KafkaTools, module_broker_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Secured:
    pytest.importorskip("cryptography")
    from kctl.testing import certs

    directory = tmp_path_factory.mktemp("kafka-acls")
    ca = certs.TestCA(directory / "certs")
    server = ca.issue("broker", "localhost", server=True)
    admin_cert = ca.issue("admin", "admin", server=False)
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
        f'user_alice="{ALICE_PASSWORD}";'
    )
    properties = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.keystore),
        "ssl.truststore.location": str(ca.pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:CN=admin,O=kctl-test",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    return Secured(module_broker_factory(properties), directory, ca.pem, admin_cert.keystore)


def test_scram_users_and_tls_with_kafka_clients(kafka_tool: KafkaTools, secured: Secured) -> None:
    """Kafka's clients over TLS (JSSE against kctl's listener) with a client certificate and with
    SASL/SCRAM; SCRAM credentials made with kafka-configs (AlterUserScramCredentials)."""
    topic = unique("sec-scram")
    as_cert = ("--bootstrap-server", secured.ssl, "--command-config", str(secured.cert_config))
    kafka_tool("kafka-topics", *as_cert, "--create", "--topic", topic).check()
    kafka_tool(
        "kafka-configs",
        *as_cert,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-512],SCRAM-SHA-256=[password=carol-256]",
    ).check()
    with secured.admin() as admin:
        [carol] = admin.describe_users(["carol"])
        assert sorted(carol.mechanisms) == [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 8192)], carol
    kafka_tool(
        "kafka-acls",
        *as_cert,
        "--add",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Describe",
        "--topic",
        topic,
    ).check()
    for mechanism, password in (("SCRAM-SHA-512", "carol-512"), ("SCRAM-SHA-256", "carol-256")):
        config = secured.sasl_properties("carol", mechanism, password, tls=True)
        listed = kafka_tool(
            "kafka-topics", "--bootstrap-server", secured.sasl_ssl, "--command-config", str(config), "--list"
        )
        assert listed.check().lines == [topic], listed.describe()  # carol sees only what she may describe
    wrong = secured.sasl_properties("carol", "SCRAM-SHA-512", "carol-256", tls=True)
    refused = kafka_tool(
        "kafka-topics", "--bootstrap-server", secured.sasl_ssl, "--command-config", str(wrong), "--list"
    )
    assert refused.returncode == 1 and "SaslAuthenticationException" in refused.stderr, refused.describe()


def test_acls_add_list_remove_and_enforced(kafka_tool: KafkaTools, secured: Secured) -> None:
    topic, group = unique("sec-topic"), unique("app-")
    as_admin = ("--bootstrap-server", secured.bootstrap, "--command-config", str(secured.admin_config))
    tool_alice = ("--bootstrap-server", secured.bootstrap)
    kafka_tool("kafka-topics", *as_admin, "--create", "--topic", topic).check()
    kafka_tool(
        "kafka-acls",
        *as_admin,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--topic",
        topic,
    ).check()
    kafka_tool(
        "kafka-acls",
        *as_admin,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--group",
        "app-",
        "--resource-pattern-type",
        "prefixed",
    ).check()
    kafka_tool(
        "kafka-acls",
        *as_admin,
        "--add",
        "--deny-principal",
        "User:alice",
        "--operation",
        "Delete",
        "--topic",
        "*",
    ).check()

    with secured.admin() as admin:

        def alice() -> set[tuple[str, str | None, str, str, str]]:
            bindings = admin.describe_acls(
                AclBinding(
                    AclResourceType.ANY,
                    None,
                    PatternType.ANY,
                    "User:alice",
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
            )
            return {
                (
                    b.resource_type.name,
                    b.resource_name,
                    b.pattern_type.name,
                    b.operation.name,
                    b.permission.name,
                )
                for b in bindings
            }

        assert alice() == {
            ("TOPIC", topic, "LITERAL", "READ", "ALLOW"),
            ("TOPIC", topic, "LITERAL", "WRITE", "ALLOW"),
            ("TOPIC", topic, "LITERAL", "DESCRIBE", "ALLOW"),
            ("GROUP", "app-", "PREFIXED", "READ", "ALLOW"),
            ("TOPIC", "*", "LITERAL", "DELETE", "DENY"),
        }
        listed = kafka_tool("kafka-acls", *as_admin, "--list", "--topic", topic).check()
        assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in listed.stdout
        for operation in ("READ", "WRITE", "DESCRIBE"):
            assert (
                f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)"
                in listed.stdout
            )

        # the ACLs hold for Kafka's own clients: alice produces and consumes in an app- group ...
        produced = kafka_tool(
            "kafka-console-producer",
            *tool_alice,
            "--producer.config",
            str(secured.alice_config),
            "--topic",
            topic,
            input="one\ntwo\n",
        )
        assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.describe()
        consumed = kafka_tool(
            "kafka-console-consumer",
            *tool_alice,
            "--consumer.config",
            str(secured.alice_config),
            "--topic",
            topic,
            "--group",
            f"{group}1",
            "--from-beginning",
            "--max-messages",
            "2",
            "--timeout-ms",
            "30000",
        ).check()
        assert consumed.lines == ["one", "two"]
        # ... but may not delete it (deny wins), nor use another group
        denied = kafka_tool(
            "kafka-topics",
            *tool_alice,
            "--command-config",
            str(secured.alice_config),
            "--delete",
            "--topic",
            topic,
        )
        assert denied.returncode == 1 and "TopicAuthorizationException" in denied.stderr, denied.describe()
        assert topic in {t.name for t in admin.list_topics()}

        kafka_tool(
            "kafka-acls",
            *as_admin,
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            topic,
        ).check()
        assert ("TOPIC", topic, "LITERAL", "WRITE", "ALLOW") not in alice()
        assert len(alice()) == 4
        refused = kafka_tool(
            "kafka-console-producer",
            *tool_alice,
            "--producer.config",
            str(secured.alice_config),
            "--topic",
            topic,
            "--producer-property",
            "max.block.ms=5000",
            "--producer-property",
            "delivery.timeout.ms=5000",
            "--producer-property",
            "request.timeout.ms=4000",
            input="three\n",
        )
        assert "AuthorizationException" in refused.stderr, refused.describe()
        end = admin.list_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        assert end.offset == 2


def test_idempotent_producer_with_only_a_prefixed_write_acl(kafka_tool: KafkaTools, secured: Secured) -> None:
    """Kafka's producer is idempotent by default: InitProducerId needs IdempotentWrite on the
    cluster or Write on some topic (KIP-679), judged by resource type — a prefixed ACL counts even
    before any topic it covers exists (asked raw first: no topic with the prefix exists yet). Then
    Kafka's console producer creates the topic by producing to it."""
    user, password, prefix = unique("bob"), "bob-secret", unique("fresh-")
    topic = f"{prefix}orders"
    with secured.admin() as admin:
        assert [r.error_code for r in admin.alter_users([(user, "SCRAM-SHA-256", password)])] == [0]
    as_admin = ("--bootstrap-server", secured.bootstrap, "--command-config", str(secured.admin_config))
    kafka_tool(
        "kafka-acls",
        *as_admin,
        "--add",
        "--producer",
        "--allow-principal",
        f"User:{user}",
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
    ).check()
    settings = SecuritySettings.from_config(
        ClientConfig.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": password,
            }
        )
    )
    host, _, port = secured.bootstrap.rpartition(":")
    with BrokerConnection(host, int(port), security=settings) as conn:
        answer = conn.request(
            ApiKey.INIT_PRODUCER_ID,
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        )
    assert answer.error_code == 0 and answer.producer_id >= 0, answer
    config = secured.sasl_properties(user, "SCRAM-SHA-256", password)
    produced = kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        secured.bootstrap,
        "--producer.config",
        str(config),
        "--topic",
        topic,
        "--producer-property",
        "max.block.ms=15000",
        input="one\ntwo\n",
    )
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.describe()
    with secured.admin() as admin:
        tp = TopicPartition(topic, 0)
        assert admin.list_offsets([tp])[tp].offset == 2


# --------------------------------------------------------- reassignment and leader election (cluster)


@pytest.fixture(scope="module")
def cluster(kafka_tool: KafkaTools, module_cluster_factory: Any) -> LocalCluster:
    started: LocalCluster = module_cluster_factory(3, {"group.initial.rebalance.delay.ms": "0"})
    return started


def test_reassign_partitions_generate_execute_and_leader_election(
    kafka_tool: KafkaTools, cluster: LocalCluster, tmp_path: Path
) -> None:
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    topic = unique("kt-reassign")
    kafka_tool(
        "kafka-topics", *bootstrap, "--create", "--topic", topic, "--replica-assignment", "1:2,2:3"
    ).check()
    lines = [f"k{i}:v{i}" for i in range(8)]
    produced = kafka_tool(
        "kafka-console-producer",
        *bootstrap,
        "--topic",
        topic,
        "--request-required-acks",
        "all",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        input="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.describe()
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = kafka_tool(
        "kafka-reassign-partitions",
        *bootstrap,
        "--generate",
        "--topics-to-move-json-file",
        str(topics_file),
        "--broker-list",
        "1,2,3",
    ).check()
    current = json.loads(generated.lines[1])
    assert sorted((p["partition"], p["replicas"]) for p in current["partitions"]) == [
        (0, [1, 2]),
        (1, [2, 3]),
    ]

    plan = tmp_path / "plan.json"
    target = {0: [3, 2], 1: [1, 3]}  # each preferred leader a new replica
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in target.items()],
            }
        )
    )
    executed = kafka_tool(
        "kafka-reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", str(plan)
    ).check()
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in executed.stdout
    with AdminClient(cluster.bootstrap_servers) as admin:

        def settled() -> bool:
            [description] = admin.describe_topics([topic])
            return {p.partition: (list(p.replicas), sorted(p.isr)) for p in description.partitions} == {
                p: (r, sorted(r)) for p, r in target.items()
            }

        wait_for(settled, "the reassignment done", 30)
        assert kafka_tool("kafka-reassign-partitions", *bootstrap, "--list").check().lines == [
            "No partition reassignments found."
        ]

        # leadership may still be with the old replicas: a preferred election moves it to 3 and 1
        [description] = admin.describe_topics([topic])
        leaders = {p.partition: p.leader for p in description.partitions}
        elected = kafka_tool(
            "kafka-leader-election", *bootstrap, "--election-type", "preferred", "--all-topic-partitions"
        ).check()
        moved = sorted(f"{topic}-{p}" for p, leader in leaders.items() if leader != target[p][0])
        if moved:
            assert "Successfully completed leader election (PREFERRED) for partitions" in elected.stdout, (
                elected.describe()
            )
            assert all(name in elected.stdout for name in moved)

        def preferred() -> bool:
            [description] = admin.describe_topics([topic])
            return {p.partition: p.leader for p in description.partitions} == {
                p: r[0] for p, r in target.items()
            }

        wait_for(preferred, "preferred leaders", 15)
        again = kafka_tool(
            "kafka-leader-election",
            *bootstrap,
            "--election-type",
            "preferred",
            "--topic",
            topic,
            "--partition",
            "0",
        ).check()
        assert f"Valid replica already elected for partitions {topic}-0" in again.stdout, again.describe()

    # the records were copied to the new replicas: Kafka's consumer reads them all from them, now leaders
    consumed = kafka_tool(
        "kafka-console-consumer",
        *bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "8",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
        "--timeout-ms",
        "30000",
    ).check()
    assert sorted(consumed.lines) == sorted(lines)


def test_reassign_partitions_verify(kafka_tool: KafkaTools, cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    topic = unique("kt-verify")
    kafka_tool(
        "kafka-topics", *bootstrap, "--create", "--topic", topic, "--replica-assignment", "1:2"
    ).check()
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 3]}]})
    )
    kafka_tool(
        "kafka-reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", str(plan)
    ).check()
    with AdminClient(cluster.bootstrap_servers) as admin:
        wait_for(
            lambda: list(admin.describe_topics([topic])[0].partitions[0].replicas) == [2, 3],
            "moved",
            30,
        )
    verified = kafka_tool(
        "kafka-reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", str(plan)
    )
    assert verified.returncode == 0, verified.describe()
    assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout
