"""DescribeProducers (issue 16 §2): an idempotent librdkafka producer's state as the partition leader
keeps it — producer id, epoch, last sequence, last timestamp; no coordinator epoch and no open
transaction — through kctl's admin client and `kctl transactions describe-producers`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import kctl

from kctl.client import AdminClient, NewTopic, TopicPartition

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess

LAST_TIMESTAMP = 1_700_000_000_123


@pytest.fixture(scope="module")
def produced(module_broker_factory: Any) -> BrokerProcess:
    """A broker with topic ``idem`` (2 partitions): 10 records of an idempotent producer in partition
    0 (the last one stamped LAST_TIMESTAMP), 3 of a plain producer in partition 1."""
    from confluent_kafka import Producer

    broker: BrokerProcess = module_broker_factory()
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("idem", 2, 1)])[0].raise_for_error()
    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(10):
        idempotent.produce("idem", f"v{i}".encode(), partition=0, timestamp=LAST_TIMESTAMP - 9 + i)
        idempotent.flush(30)  # one batch each: sequences 0..9
    plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "acks": 1})
    for i in range(3):
        plain.produce("idem", f"p{i}".encode(), partition=1)
    assert plain.flush(30) == 0
    return broker


def test_the_leader_describes_the_idempotent_producer(produced: BrokerProcess) -> None:
    with AdminClient(produced.bootstrap) as admin:
        results = admin.describe_producers([TopicPartition("idem", 0), TopicPartition("idem", 1)])
    first, second = results[TopicPartition("idem", 0)], results[TopicPartition("idem", 1)]
    assert (first.error_code, second.error_code) == (0, 0)
    assert second.producers == ()  # a producer without idempotence leaves no state
    [producer] = first.producers
    assert producer.producer_id >= 0
    assert (producer.producer_epoch, producer.last_sequence, producer.last_timestamp) == (
        0,
        9,
        LAST_TIMESTAMP,
    )
    assert (producer.coordinator_epoch, producer.current_txn_start_offset) == (-1, -1)


def test_unknown_partitions_are_errors(produced: BrokerProcess) -> None:
    with AdminClient(produced.bootstrap) as admin:
        results = admin.describe_producers([TopicPartition("idem", 7)], timeout=3)
    assert results[TopicPartition("idem", 7)].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_kctl_transactions_describe_producers(produced: BrokerProcess) -> None:
    b = produced.bootstrap
    result = kctl("transactions", "describe-producers", "--topic", "idem", "-b", b, "-f", "json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert {
        k: row[k] for k in ("topic", "partition", "producer_epoch", "last_sequence", "last_timestamp")
    } == {
        "topic": "idem",
        "partition": 0,
        "producer_epoch": 0,
        "last_sequence": 9,
        "last_timestamp": LAST_TIMESTAMP,
    }
    only_plain = kctl("transactions", "describe-producers", "--topic", "idem", "-p", "1", "-b", b)
    assert only_plain.returncode == 0, only_plain.stderr
    assert only_plain.stdout.split() == [
        "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP",
        "COORDINATOR-EPOCH", "CURRENT-TXN-START-OFFSET",
    ]  # fmt: skip
    assert kctl("transactions", "describe-producers", "--topic", "nope", "-b", b).returncode == 3
    assert kctl("transactions", "describe-producers", "--topic", "idem", "-p", "5", "-b", b).returncode == 3
