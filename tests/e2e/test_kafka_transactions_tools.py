"""Apache Kafka 3.9's own transaction tools, unchanged, against kctl (issue 27 §2):

- `kafka-transactions.sh` (TransactionsCommand): `list`, `describe`, `describe-producers`,
  `find-hanging` and `abort` of an open transaction (the tool finds its producer with
  DescribeProducers and writes the ABORT marker with WriteTxnMarkers itself), on a transaction a
  confluent-kafka producer left open;
- Kafka's `TransactionalMessageCopier` (the copier of Kafka's own exactly-once system tests) copying
  an input partition to an output topic in transactions, with random aborts, SIGKILLed mid-copy and
  started again with the same transactional id: a read_committed consumer then finds every input
  record in the output exactly once, in order.

The tools run from Kafka's jars (``kafka_tool`` fixture): without them every test here skips."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import RawConnection, create_topic, unique
from txn_support import last_stable_offset

from kctl.testing import BrokerProcess, wait_for
from kctl.testing.kafka_tools import KafkaTools

pytestmark = pytest.mark.slow  # each tool run starts a JVM

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def broker(kafka_tool: KafkaTools, module_broker_factory: Any) -> BrokerProcess:
    started: BrokerProcess = module_broker_factory({"group.initial.rebalance.delay.ms": "0"})
    return started


@pytest.fixture
def open_transaction(broker: BrokerProcess) -> Iterator[tuple[str, str, ck.Producer]]:
    """A topic and a transactional id whose transaction holds 5 records, left open."""
    topic, tid = unique("txn-tools"), unique("txn-tools-tid")
    create_topic(broker.bootstrap, topic, 1)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    yield topic, tid, producer


def test_kafka_transactions_lists_describes_and_aborts(
    kafka_tool: KafkaTools, broker: BrokerProcess, open_transaction: tuple[str, str, ck.Producer]
) -> None:
    topic, tid, _ = open_transaction
    bootstrap = ["--bootstrap-server", broker.bootstrap]

    listed = kafka_tool("kafka-transactions", *bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    [row] = [line.split() for line in listed.lines if line.split()[0] == tid]
    assert "Ongoing" in row

    described = kafka_tool("kafka-transactions", *bootstrap, "describe", "--transactional-id", tid)
    assert described.returncode == 0, described.stderr
    assert "Ongoing" in described.stdout and f"{topic}-0" in described.stdout

    producers = kafka_tool(
        "kafka-transactions", *bootstrap, "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert producers.returncode == 0, producers.stderr
    header, *rows = [line.split() for line in producers.lines]
    start = header.index("CurrentTransactionStartOffset")
    assert [r[start] for r in rows] == ["0"]  # the open transaction starts at offset 0

    hanging = kafka_tool("kafka-transactions", *bootstrap, "find-hanging", "--broker-id", "0")
    assert hanging.returncode == 0, hanging.stderr
    assert topic not in hanging.stdout  # open, but its coordinator knows it: not hanging

    with RawConnection(broker.bootstrap) as conn:
        assert last_stable_offset(conn, topic) == 0  # held at the open transaction
        aborted = kafka_tool(
            "kafka-transactions",
            *bootstrap,
            "abort",
            "--topic",
            topic,
            "--partition",
            "0",
            "--start-offset",
            "0",
        )
        assert aborted.returncode == 0, aborted.stderr
        wait_for(lambda: last_stable_offset(conn, topic) == 6, "the LSO past the ABORT marker", 30)

    reader = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "isolation.level": "read_committed"}
    )
    reader.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    assert [m for m in reader.consume(10, timeout=3.0) if m.error() is None] == []  # aborted: nothing
    reader.close()


def _copier(kafka_tool: KafkaTools, bootstrap: str, source: str, sink: str, tid: str, group: str) -> Any:
    command = kafka_tool.command(
        "transactional-message-copier",
        "--broker-list", bootstrap,
        "--input-topic", source, "--input-partition", "0",
        "--output-topic", sink,
        "--transactional-id", tid,
        "--consumer-group", group,
        "--transaction-size", "50",
        "--enable-random-aborts",
        "--use-group-metadata",
    )  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _statuses(process: Any, until: Any) -> list[dict[str, Any]]:
    """The copier's JSON status lines, read until ``until(status)`` holds or it exits."""
    seen: list[dict[str, Any]] = []
    for line in process.stdout:
        try:
            status = json.loads(line)
        except ValueError:
            continue
        seen.append(status)
        if until(status):
            break
    return seen


def _copy_through_kills(
    kafka_tool: KafkaTools, bootstrap: str, source: str, sink: str, records: int, fault: Any = None
) -> list[str]:
    """Fill ``source`` with ``records`` values, copy it with Kafka's copier: SIGKILLed once it has
    consumed a fifth of them (``fault()`` run then too), then started again with the same id, to the
    end. Returns what a read_committed consumer reads from ``sink``."""
    tid, group = unique("copier-tid"), unique("copier-group")
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(records):
        producer.produce(source, f"m{i:05d}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0

    first = _copier(kafka_tool, bootstrap, source, sink, tid, group)
    try:  # let it copy part of the input, then kill it without warning
        fifth = records // 5
        progress = _statuses(
            first, lambda s: s.get("stage") == "ProcessLoop" and s.get("consumed", 0) >= fifth
        )
        assert progress and progress[-1].get("remaining", 0) > 0, f"not killed mid-copy: {progress[-1:]}"
        if fault is not None:
            fault()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)

    second = _copier(kafka_tool, bootstrap, source, sink, tid, group)  # the same id: fences the first
    try:
        _statuses(second, lambda s: s.get("stage") == "ShutdownComplete")
        assert second.wait(timeout=180) == 0
    finally:
        if second.poll() is None:
            second.kill()

    reader = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("copier-reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([ck.TopicPartition(sink, 0, ck.OFFSET_BEGINNING)])
    values: list[str] = []
    idle_polls = 60
    while len(values) < records and idle_polls:
        batch = reader.consume(500, timeout=1.0)
        values += [m.value().decode() for m in batch if m.error() is None]
        idle_polls -= 0 if batch else 1
    values += [m.value().decode() for m in reader.consume(500, timeout=2.0) if m.error() is None]
    reader.close()
    return values


def test_kafkas_transactional_message_copier_copies_exactly_once_through_a_kill(
    kafka_tool: KafkaTools, broker: BrokerProcess
) -> None:
    records = 2000
    source, sink = unique("copier-in"), unique("copier-out")
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    values = _copy_through_kills(kafka_tool, broker.bootstrap, source, sink, records)
    assert len(values) == records, f"{len(values)} records, {len(set(values))} distinct"
    assert values == [f"m{i:05d}" for i in range(records)]  # each once, in order


def test_the_copier_on_a_cluster_through_a_broker_and_a_copier_killed(
    kafka_tool: KafkaTools, module_cluster_factory: Any
) -> None:
    """RF 3, min ISR 2: mid-copy the leader of the output partition is SIGKILLed (and later started
    again) as well as the copier; still every input record once, in order."""
    from kctl.testing.cluster_clients import create_topic as create_replicated
    from kctl.testing.cluster_view import ClusterView

    cluster = module_cluster_factory(3, {"zookeeper.session.timeout.ms": "6000"})
    bootstrap = cluster.bootstrap_servers
    source, sink = unique("copier-in"), unique("copier-out")
    for topic in (source, sink):
        create_replicated(bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    killed: list[int] = []
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(sink, 1, timeout=60)

        def kill_the_output_leader() -> None:
            leader = view.wait_for_leader(sink, 0).leader
            cluster.kill(leader)
            killed.append(leader)
            view.wait_for_leader(sink, 0, not_in={leader}, timeout=60)

        records = 1500
        values = _copy_through_kills(kafka_tool, bootstrap, source, sink, records, kill_the_output_leader)
        cluster.restart(killed[0])
        view.wait_for_full_isr(sink, 1, timeout=90)
    assert len(values) == records, f"{len(values)} records, {len(set(values))} distinct"
    assert values == [f"m{i:05d}" for i in range(records)]
