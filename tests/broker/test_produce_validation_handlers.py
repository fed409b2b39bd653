"""Produce validation as the Produce and ListOffsets handlers answer it (issue #17, issue #16): the
answers CORRUPT_MESSAGE, INVALID_RECORD with ``record_errors`` and INVALID_TIMESTAMP, one batch per
partition from Produce v3, ListOffsets' max-timestamp inside a batch.

Run on kctl.testing's in-process broker (a real Broker without listeners: requests are encoded and
decoded at the version asked and handed to its dispatch): a broker process added nothing to these,
the bytes on the wire are the codec's, tested in tests/protocol. What a real client makes of the
answers stays in test_produce_validation.py (confluent-kafka on a broker process)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import make_batch
from test_produce_validation import BAD, T0

from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import InvalidRecordBatch
from kctl.records.validate import InvalidRecordError
from kctl.testing.inprocess import InProcessBroker

NONE, CORRUPT_MESSAGE, INVALID_TIMESTAMP, INVALID_RECORD = 0, 2, 32, 87


@pytest.fixture
def handlers(inprocess_broker: InProcessBroker) -> InProcessBroker:
    inprocess_broker.create_topic("validation")
    return inprocess_broker


def produce(broker: InProcessBroker, topic: str, records: bytes, *, version: int = 9) -> Any:
    """One batch to partition 0; the partition's answer."""
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )
    [topic_response] = broker.call(request, version=version).responses
    [part] = topic_response.partition_responses
    return part


def test_broker_answers_corrupt_message_and_invalid_record(handlers: InProcessBroker) -> None:
    expected = {InvalidRecordBatch: CORRUPT_MESSAGE, InvalidRecordError: INVALID_RECORD}
    for name, (batch, error) in BAD.items():
        part = produce(handlers, "validation", batch)
        assert part.error_code == expected[error], (name, part)
        assert part.error_message, name
    good = produce(handlers, "validation", make_batch(3))
    assert (good.error_code, good.base_offset) == (NONE, 0)  # nothing bad moved the log end offset


def test_produce_v3_plus_refuses_two_batches_per_partition(handlers: InProcessBroker) -> None:
    before = produce(handlers, "validation", make_batch(1)).base_offset
    two = make_batch(2) + make_batch(2)
    for version in (3, 7, 9):
        part = produce(handlers, "validation", two, version=version)
        assert part.error_code == INVALID_RECORD, (version, part)
    assert produce(handlers, "validation", make_batch(1)).base_offset == before + 1


def test_record_errors(handlers: InProcessBroker) -> None:
    handlers.create_topic("compacted", configs={"cleanup.policy": "compact"})
    batch = make_batch(3, keys=[b"a", None, b"c"], values=[b"1", b"2", b"3"])
    part = produce(handlers, "compacted", batch)
    assert part.error_code == INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
        (1, "Compacted topic cannot accept message without key")
    ]
    assert "1 record errors" in part.error_message
    handlers.create_topic("bounded", configs={"message.timestamp.before.max.ms": "60000"})
    old = make_batch(2, timestamp=int(time.time() * 1000) - 3_600_000)
    part = produce(handlers, "bounded", old, version=8)
    assert part.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in part.record_errors] == [0, 1]


def test_list_offsets_max_timestamp_inside_a_batch(handlers: InProcessBroker) -> None:
    handlers.create_topic("maxts")
    builder = RecordBatchBuilder()
    for timestamp in (T0, T0 + 50, T0 + 10):
        builder.append(timestamp, b"k", b"v")
    assert produce(handlers, "maxts", make_batch(2, timestamp=T0 - 100)).error_code == NONE
    assert produce(handlers, "maxts", builder.build()).error_code == NONE
    partition = ListOffsetsPartition(partition_index=0, timestamp=-3)
    request = ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(name="maxts", partitions=[partition])]
    )
    [part] = handlers.call(request, version=8).topics[0].partitions
    assert (part.error_code, part.offset, part.timestamp) == (NONE, 3, T0 + 50)
