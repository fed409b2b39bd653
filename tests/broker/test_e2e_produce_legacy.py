"""Produce v0-2 against a real `kctl broker start`: message sets of the formats before RecordBatch
(magic 0 and 1, written by kafka-python's legacy builder) are accepted and stored as RecordBatch v2,
as Kafka's brokers up-convert them, and read back by a modern client with their keys, values and
timestamps; a damaged one is refused with CORRUPT_MESSAGE and nothing is appended; librdkafka told
not to ask for API versions (``api.version.request=false``, ``broker.version.fallback=0.9.0``,
librdkafka's own test 0052) produces through them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from raw_kafka import create_topic, produce, running_broker, unique

from kctl.protocol.errors import ErrorCode
from kctl.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"auto.create.topics.enable": "false"}, "legacy") as process:
        yield process


def legacy_set(magic: int, codec: str, tag: str, count: int = 4) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
    for i in range(count):
        timestamp = T0 + i if magic else None
        builder.append(
            i, timestamp=timestamp, key=b"%s-key-%d" % (tag.encode(), i), value=b"%s-%d" % (tag.encode(), i)
        )
    return bytes(builder.build())


def fetch_partition(bootstrap: str, topic: str, version: int, fetch_offset: int) -> Any:
    """Partition 0 of ``topic`` as a raw Fetch of ``version`` from ``fetch_offset`` answers it."""
    from raw_kafka import RawConnection

    from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
    from kctl.protocol.registry import ApiKey

    wanted = FetchPartition(partition=0, fetch_offset=fetch_offset, partition_max_bytes=1 << 20)
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[FetchTopic(topic=topic, partitions=[wanted])],
    )
    with RawConnection(bootstrap) as conn:
        return conn.request(ApiKey.FETCH, version, body).responses[0].partitions[0]


def read_all(bootstrap: str, topic: str, count: int) -> list[ck.Message]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("legacy"), "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    messages: list[ck.Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    return messages


def test_produce_v0_to_v2_with_old_message_sets_is_stored_and_read_back(broker: BrokerProcess) -> None:
    topic = unique("legacy")
    assert create_topic(broker.bootstrap, topic) == 0
    sent: list[tuple[str, int]] = []  # (tag, magic) of each set, in order
    offset = 0
    for version, magic in ((0, 0), (1, 0), (2, 1)):
        for codec in CODECS:
            tag = f"v{version}{codec}"
            part = produce(broker.bootstrap, topic, 0, legacy_set(magic, codec, tag), version=version)
            assert part.error_code == ErrorCode.NONE, (tag, part)
            assert part.base_offset == offset, (tag, part.base_offset)
            offset += 4
            sent.append((tag, magic))
    messages = read_all(broker.bootstrap, topic, offset)
    assert [m.offset() for m in messages] == list(range(offset))
    expected = [(f"{tag}-{i}".encode(), f"{tag}-key-{i}".encode()) for tag, _ in sent for i in range(4)]
    assert [(m.value(), m.key()) for m in messages] == expected
    for index, (tag, magic) in enumerate(sent):
        stamps = [messages[index * 4 + i].timestamp()[1] for i in range(4)]
        assert stamps == ([T0 + i for i in range(4)] if magic else [-1] * 4), tag


def test_a_log_append_time_topic_stamps_old_messages_with_the_brokers_time(broker: BrokerProcess) -> None:
    topic = unique("legacy-lat")
    assert create_topic(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"}) == 0
    before = int(time.time() * 1000)
    part = produce(broker.bootstrap, topic, 0, legacy_set(1, "gzip", "lat"), version=2)
    after = int(time.time() * 1000)
    assert part.error_code == ErrorCode.NONE
    assert before <= part.log_append_time_ms <= after
    messages = read_all(broker.bootstrap, topic, 4)
    assert [m.timestamp() for m in messages] == [(ck.TIMESTAMP_LOG_APPEND_TIME, part.log_append_time_ms)] * 4


def test_a_damaged_old_message_set_is_refused_and_nothing_is_appended(broker: BrokerProcess) -> None:
    topic = unique("legacy-bad")
    assert create_topic(broker.bootstrap, topic) == 0
    damaged = bytearray(legacy_set(1, "none", "bad"))
    damaged[-1] ^= 0xFF
    part = produce(broker.bootstrap, topic, 0, bytes(damaged), version=2)
    assert part.error_code == ErrorCode.CORRUPT_MESSAGE
    good = produce(broker.bootstrap, topic, 0, legacy_set(0, "none", "good"), version=1)
    assert (good.error_code, good.base_offset) == (ErrorCode.NONE, 0)  # nothing of the damaged set went in
    assert broker.running, broker.log_tail()


def test_librdkafka_without_api_version_requests_produces_through_the_old_versions(
    broker: BrokerProcess,
) -> None:
    topic = unique("legacy-rdk")
    assert create_topic(broker.bootstrap, topic) == 0
    results: list[str | None] = []
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "api.version.request": False,
            "broker.version.fallback": "0.9.0",
            "compression.codec": "gzip",
        }
    )
    for i in range(20):
        producer.produce(
            topic, value=b"old-%d" % i, partition=0, on_delivery=lambda e, _m: results.append(e and e.str())
        )
    assert producer.flush(30) == 0
    assert results == [None] * 20, results  # every delivery succeeded
    messages = read_all(broker.bootstrap, topic, 20)
    assert [m.value() for m in messages] == [b"old-%d" % i for i in range(20)]


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)])
def test_kafka_python_speaking_an_old_protocol_produces_and_consumes(
    broker: BrokerProcess, api_version: tuple[int, ...]
) -> None:
    """kafka-python pinned to an old broker version uses only the old Produce and Fetch versions
    (0.10.1: Produce v2 / Fetch v3, magic 1; 0.9: Produce v1 / Fetch v1, magic 0): both directions
    go through the conversions."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("legacy-kp")
    assert create_topic(broker.bootstrap, topic) == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version, linger_ms=5)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"kp-%d" % i, partition=0) for i in range(30)]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(30))
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, api_version=api_version, consumer_timeout_ms=5000
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 5)
    got = [(m.offset, m.key, m.value) for m in consumer]
    consumer.close()
    assert got == [(i, b"k%d" % i, b"kp-%d" % i) for i in range(5, 30)]


def test_fetch_v0_to_v3_answers_in_the_old_formats_and_v4_in_record_batches(broker: BrokerProcess) -> None:
    """Raw Fetch requests from offset 2: v0-1 carry magic 0 messages, v2-3 magic 1 messages with the
    timestamps (headers, transaction markers and records before the fetch offset left out), each
    with a valid CRC; v4 the stored RecordBatch untouched."""
    from raw_kafka import record_batch

    from kctl.records.legacy import iter_messages, records_of

    topic = unique("legacy-fetch")
    assert create_topic(broker.bootstrap, topic) == 0
    assert produce(broker.bootstrap, topic, 0, record_batch(5, compression="gzip")).error_code == 0
    stored = produce(broker.bootstrap, topic, 0, record_batch(3)).base_offset
    assert stored == 5
    for version in range(5):
        response_part = fetch_partition(broker.bootstrap, topic, version, 2)
        records = bytes(response_part.records)
        if version == 4:
            assert records[16] == 2, "v4 carries RecordBatch v2"
            continue
        messages = iter_messages(records)
        assert {m.magic for m in messages} == {0 if version < 2 else 1}, version
        assert all(m.crc_ok and m.codec == 0 for m in messages)
        got = [(r.offset, r.key, r.value[:3]) for m in messages for r in records_of(m)]
        assert got == [
            (o, b"k%d" % (o % 5 if o < 5 else o - 5), b"v%d-" % (o % 5 if o < 5 else o - 5))
            for o in range(2, 8)
        ], (version, got)
        if version >= 2:
            assert all(abs(m.timestamp - time.time() * 1000) < 60_000 for m in messages)


def test_a_topic_without_down_conversion_answers_old_fetches_unsupported_version(
    broker: BrokerProcess,
) -> None:
    """``message.downconversion.enable=false``: Fetch v0-3 of the topic get UNSUPPORTED_VERSION and no
    records (Kafka's answer); v4 reads it as usual."""
    from raw_kafka import record_batch

    topic = unique("legacy-nodown")
    assert create_topic(broker.bootstrap, topic, 1, {"message.downconversion.enable": "false"}) == 0
    assert produce(broker.bootstrap, topic, 0, record_batch(2)).error_code == 0
    answers = {}
    for version in (1, 3, 4):
        part = fetch_partition(broker.bootstrap, topic, version, 0)
        answers[version] = (part.error_code, len(bytes(part.records or b"")) > 0)
    assert answers == {
        1: (ErrorCode.UNSUPPORTED_VERSION, False),
        3: (ErrorCode.UNSUPPORTED_VERSION, False),
        4: (0, True),
    }
