"""`kctl produce --transactional-id` and `kctl consume --isolation` against a real broker (issue 27 §3):
chunks of --transaction-size input records committed whole; a chunk with a bad line aborted (the
command names its lines, exit status 1) and never read by `kctl consume --isolation read_committed`
or confluent-kafka's read_committed consumer, while read_uncommitted still sees what it sent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from raw_kafka import running_broker, unique

from kctl.client import AdminClient, NewTopic
from kctl.testing import BrokerProcess
from kctl.testing.helpers import wait_for

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "1"}, "cli-txn") as process:
        yield process


def kctl(broker: BrokerProcess, *args: str, input: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", args[0], "-b", broker.bootstrap, *args[1:]],
        input=input,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def create_topic(broker: BrokerProcess) -> str:
    name = unique("cli-txn")
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, 1, 1)])
        assert result.ok, result
    return name


def consume(broker: BrokerProcess, topic: str, isolation: str) -> list[str]:
    result = kctl(
        broker, "consume", topic, "--offset", "beginning", "--until", "end", "-f", "raw", "-q",
        "--isolation", isolation,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().splitlines()


def confluent_read_committed(broker: BrokerProcess, topic: str, expected: int) -> list[str]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    values: list[str] = []

    def drained() -> bool:
        message = consumer.poll(0.2)
        if message is None:
            return False
        if message.error():
            return message.error().code() == ck.KafkaError._PARTITION_EOF and len(values) >= expected
        values.append(message.value().decode())
        return False

    try:
        wait_for(drained, "confluent-kafka to read to the end", timeout=TIMEOUT)
    finally:
        consumer.close()
    return values


def test_transactions_of_n_lines_are_committed(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    lines = [f"line-{i}" for i in range(1, 11)]
    result = kctl(
        broker, "produce", topic, "--transactional-id", unique("tid"), "--transaction-size", "4",
        input="\n".join(lines).encode() + b"\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    assert "3 transactions committed, 0 aborted" in result.stderr.decode()
    assert consume(broker, topic, "read_committed") == lines
    assert consume(broker, topic, "read_uncommitted") == lines  # markers are never records
    assert confluent_read_committed(broker, topic, len(lines)) == lines


def test_a_bad_line_aborts_its_transaction_and_names_its_lines(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    rows = [json.dumps({"value": f"v{i}"}) for i in range(1, 11)]
    rows[6] = "{not json"  # line 7: in the second chunk (lines 5-8)
    result = kctl(
        broker, "produce", topic, "-f", "jsonl", "--transactional-id", unique("tid"),
        "--transaction-size", "4", input="\n".join(rows).encode() + b"\n",
    )  # fmt: skip
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "lines 5-8 not written" in stderr and "line 7" in stderr, stderr
    committed = ["v1", "v2", "v3", "v4", "v9", "v10"]
    assert consume(broker, topic, "read_committed") == committed
    assert confluent_read_committed(broker, topic, len(committed)) == committed
    # the records of lines 5 and 6 went out before line 7 failed: in the log, aborted
    assert consume(broker, topic, "read_uncommitted") == ["v1", "v2", "v3", "v4", "v5", "v6", "v9", "v10"]


def test_usage_errors(broker: BrokerProcess) -> None:
    result = kctl(broker, "consume", "t", "--isolation", "sometimes")
    assert result.returncode == 2
    result = kctl(broker, "produce", "t", "--transactional-id", "x", "--transaction-size", "0")
    assert result.returncode == 2
