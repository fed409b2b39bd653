"""Read-process-write with confluent-kafka (librdkafka) against the embedded broker: the pattern
Kafka Streams and every exactly-once copier use (issue 27 §1–2). A consumer in a group reads the
input; a transactional producer writes the output and, in the same transaction, the consumer's
positions (`send_offsets_to_transaction`: AddOffsetsToTxn + TxnOffsetCommit). A committed
transaction moves the group's committed offsets and makes its output visible to read_committed; an
aborted one moves neither, so the next run copies the same input again, and the output seen by
read_committed holds every input record exactly once."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from raw_kafka import create_topic, unique

from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory

TIMEOUT_S = 30.0
RECORDS = 30
BATCH = 10


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory({})


def _consumer(broker: BrokerProcess, group: str, isolation: str = "read_committed") -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )


def _poll(consumer: ck.Consumer, count: int) -> list[ck.Message]:
    got: list[ck.Message] = []
    while len(got) < count:
        batch = consumer.consume(count - len(got), timeout=TIMEOUT_S)
        assert batch, f"only {len(got)} of {count} records within {TIMEOUT_S:g} s"
        got += [m for m in batch if m.error() is None]
    return got


def _committed(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = _consumer(broker, group)
    try:
        [position] = consumer.committed([ck.TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        return int(position.offset)
    finally:
        consumer.close()


def test_copy_in_transactions_commits_offsets_with_the_output(broker: BrokerProcess) -> None:
    source, sink, group = unique("rpw-in"), unique("rpw-out"), unique("rpw-group")
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(source, f"r{i:03d}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0

    copier = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("rpw-tid")})
    copier.init_transactions(TIMEOUT_S)

    def copy_batch(consumer: ck.Consumer, *, commit: bool) -> None:
        messages = _poll(consumer, BATCH)
        copier.begin_transaction()
        for message in messages:
            copier.produce(sink, message.value(), partition=0)
        positions = [ck.TopicPartition(source, 0, messages[-1].offset() + 1)]
        copier.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
        if commit:
            copier.commit_transaction(TIMEOUT_S)
        else:
            assert copier.flush(TIMEOUT_S) == 0  # written, then aborted (abort purges what is unsent)
            copier.abort_transaction(TIMEOUT_S)

    consumer = _consumer(broker, group)
    consumer.assign([ck.TopicPartition(source, 0, ck.OFFSET_STORED)])
    copy_batch(consumer, commit=True)  # r000-r009
    assert _committed(broker, group, source) == BATCH
    copy_batch(consumer, commit=False)  # r010-r019, aborted: neither output nor offsets
    assert _committed(broker, group, source) == BATCH
    consumer.close()

    consumer = _consumer(broker, group)  # a restart: resumes from the committed offset
    consumer.assign([ck.TopicPartition(source, 0, ck.OFFSET_STORED)])
    copy_batch(consumer, commit=True)  # r010-r019 again
    copy_batch(consumer, commit=True)  # r020-r029
    consumer.close()
    assert _committed(broker, group, source) == RECORDS

    reader = _consumer(broker, unique("rpw-reader"))
    reader.assign([ck.TopicPartition(sink, 0, ck.OFFSET_BEGINNING)])
    output = [m.value().decode() for m in _poll(reader, RECORDS)]
    assert reader.consume(10, timeout=1.0) == []  # nothing more: the aborted copy stays invisible
    reader.close()
    assert output == [f"r{i:03d}" for i in range(RECORDS)]

    everything = _consumer(broker, unique("rpw-all"), "read_uncommitted")
    everything.assign([ck.TopicPartition(sink, 0, ck.OFFSET_BEGINNING)])
    assert len(_poll(everything, RECORDS + BATCH)) == RECORDS + BATCH  # the aborted batch is there
    everything.close()
