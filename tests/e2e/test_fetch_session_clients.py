"""Real consumers against a broker with fetch sessions (KIP-227): Apache Kafka's Java consumer
(kafka-console-consumer from Kafka's jars, which opens a session and then fetches incrementally),
librdkafka (confluent-kafka) and kafka-python each read every record of a 3-partition topic produced
in rounds while they run, so most records reach them through fetches after the first."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from raw_kafka import create_topic, produce, record_batch, running_broker, unique

from kctl.testing import BrokerProcess, wait_for
from kctl.testing.kafka_tools import KafkaTools

PARTITIONS = 3
ROUNDS = 4
PER_ROUND = 5  # records per partition and round
TOTAL = PARTITIONS * ROUNDS * PER_ROUND
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"group.initial.rebalance.delay.ms": "0"}, "sessions") as process:
        yield process


def produce_round(bootstrap: str, topic: str, round_no: int) -> None:
    for partition in range(PARTITIONS):
        batch = record_batch(PER_ROUND, key=b"r%d-p%d-" % (round_no, partition))
        assert produce(bootstrap, topic, partition, batch).error_code == 0


def produce_in_rounds(bootstrap: str, topic: str, received: Any) -> None:
    """Produce each round once the consumer has everything before it (read by later fetches)."""
    for round_no in range(ROUNDS):
        produce_round(bootstrap, topic, round_no)
        wanted = (round_no + 1) * PARTITIONS * PER_ROUND
        wait_for(lambda wanted=wanted: received() >= wanted, f"{wanted} records read", TIMEOUT)


def test_java_console_consumer_reads_everything(kafka_tool: KafkaTools, broker: BrokerProcess) -> None:
    topic = unique("sessions-java")
    assert create_topic(broker.bootstrap, topic, PARTITIONS) == 0
    command = kafka_tool.command(
        "kafka-console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--group",
        unique("java"),
        "--from-beginning",
        "--max-messages",
        str(TOTAL),
        "--property",
        "print.key=true",
        "--timeout-ms",
        "60000",
    )
    lines: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
        reader.start()
        try:
            # the rounds are produced once the consumer's group is formed: later rounds reach it
            # through its incremental fetches
            wait_for(lambda: _group_has_member(broker), "the console consumer's group", TIMEOUT)
            produce_in_rounds(broker.bootstrap, topic, lambda: len(lines))
            assert process.wait(TIMEOUT) == 0, process.stderr.read() if process.stderr else ""
        finally:
            if process.poll() is None:
                process.kill()
        reader.join(10)
    keys = sorted(line.split("\t")[0] for line in lines)
    expected = sorted(
        f"r{r}-p{p}-{i}" for r in range(ROUNDS) for p in range(PARTITIONS) for i in range(PER_ROUND)
    )
    assert keys == expected


def _group_has_member(broker: BrokerProcess) -> bool:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    groups = admin.list_consumer_groups().result(10)
    return any(g.state.name == "STABLE" for g in groups.valid)


def test_librdkafka_reads_everything(broker: BrokerProcess) -> None:
    topic = unique("sessions-rdkafka")
    assert create_topic(broker.bootstrap, topic, PARTITIONS) == 0
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("rdkafka"), "enable.auto.commit": False}
    )
    keys: list[bytes] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                keys.append(message.key())

    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        produce_in_rounds(broker.bootstrap, topic, lambda: len(keys))
    finally:
        stop.set()
        poller.join(10)
        consumer.close()
    assert len(keys) == TOTAL and len(set(keys)) == TOTAL


def test_kafka_python_reads_everything(broker: BrokerProcess) -> None:
    topic = unique("sessions-kafka-python")
    assert create_topic(broker.bootstrap, topic, PARTITIONS) == 0
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200
    )
    consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    keys: list[bytes] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for records in consumer.poll(200).values():
                keys.extend(r.key for r in records)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        produce_in_rounds(broker.bootstrap, topic, lambda: len(keys))
    finally:
        stop.set()
        poller.join(10)
        consumer.close()
    assert len(keys) == TOTAL and len(set(keys)) == TOTAL
