"""confluent-kafka (librdkafka) and kafka-python 3.x, each on its own, against a real `kctl broker
start`: producers (acks 0/1/all, every codec, keys, headers, timestamps, idempotence), consumers with
assign()/seek() reading exactly what was produced (no group subscription: consumer groups are not
implemented yet), the admin operations, and a cross-check that what one client produces the other
consumes byte for byte."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.admin import OffsetSpec as KpOffsetSpec
from kafka.errors import TopicAlreadyExistsError
from raw_kafka import running_broker, unique

from kctl.log.inspect import read_batches
from kctl.log.naming import partition_dir_name
from kctl.testing import BrokerProcess, wait_for

T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT = 20.0

# one record: (key, value, headers, timestamp ms)
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "2"}, "clients") as process:
        yield process


def sample_records(count: int, *, nullable_headers: bool = True, big: bool = False) -> list[Record]:
    """Compressible, varied records: binary and empty keys/values, a null key, a null value
    (tombstone), repeated header keys, a large value."""
    records: list[Record] = []
    for i in range(count):
        key: bytes | None = b"key-%d" % (i % 7)
        value: bytes | None = (b"value %06d " % i) + b"lorem ipsum dolor sit amet " * 8
        headers: list[tuple[str, bytes | None]] = [("seq", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
        if i % 10 == 3:
            key = None
        if i % 10 == 4:
            value = None
        if i % 10 == 5:
            key, value = b"", b""
        if i % 10 == 6:
            value = bytes(range(256)) * 4
            headers = [("bin", bytes(range(256)))]
        if i % 10 == 7 and nullable_headers:
            headers = [("null-header", None)]
        if i % 10 == 8:
            headers = []
        records.append((key, value, headers, T0 + i * 1000))
    if big:
        records.append((b"big", b"B" * 200_000, [("size", b"200000")], T0 + count * 1000))
    return records


def compressible_alone(records: list[Record]) -> list[Record]:
    """The records, each with a header that compresses well. librdkafka stores a batch uncompressed
    when compressing would not shrink it, and how records split into batches depends on timing: a
    batch of only a tombstone or an empty record would be stored as "none". With this padding any
    batch, even of one record, shrinks under every codec, so the codec on disk is deterministic."""
    pad = ("pad", b"compresses well " * 32)
    return [(key, value, [*headers, pad], timestamp) for key, value, headers, timestamp in records]


def disk_batches(broker: BrokerProcess, topic: str, partition: int) -> list[dict[str, Any]]:
    """The batches of a partition as stored (read from the segment files, like `kctl log dump`)."""
    rows = []
    for segment in sorted((broker.data_dir / f"{topic}_{partition}").glob("*.log")):
        for item in read_batches(Path(segment)):
            assert isinstance(item, tuple), f"unreadable bytes in {segment}: {item}"
            rows.append(item[0].as_row())
    return rows


# ------------------------------------------------------------------------------------ confluent-kafka


def ck_produce(
    bootstrap: str, topic: str, partition: int, records: list[Record], **config: Any
) -> list[tuple[Any, int | None]]:
    """Produce with confluent-kafka; returns the delivery reports (error, offset) in delivery order."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    reports: list[tuple[Any, int | None]] = []

    def delivered(error: Any, message: Any) -> None:
        reports.append((error, message.offset() if error is None else None))

    for key, value, headers, timestamp in records:
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            partition=partition,
            timestamp=timestamp,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "messages still undelivered"
    return reports


def ck_consumer(bootstrap: str, **config: Any) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-no-group-protocol",  # required by the client; assign() does not join
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "check.crcs": True,  # the CRC-32C of every fetched batch, incl. ones the broker re-stamped
            **config,
        }
    )


def ck_read(bootstrap: str, topic: str, partition: int, offset: int = 0) -> list[Any]:
    """Every message from ``offset`` to the partition's end (confluent-kafka, assign + EOF)."""
    consumer = ck_consumer(bootstrap)
    try:
        consumer.assign([ck.TopicPartition(topic, partition, offset)])
        messages: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == ck.KafkaError._PARTITION_EOF:
                    return messages
                pytest.fail(f"consumer error: {error}")
            messages.append(message)
        pytest.fail(f"no end of partition within {TIMEOUT}s ({len(messages)} messages read)")
    finally:
        consumer.close()


def ck_as_records(messages: list[Any]) -> list[Record]:
    out = []
    for m in messages:
        kind, timestamp = m.timestamp()
        assert kind == ck.TIMESTAMP_CREATE_TIME
        out.append((m.key(), m.value(), list(m.headers() or []), timestamp))
    return out


def ck_watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = ck_consumer(bootstrap)
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_produce_then_consume_exactly(broker: BrokerProcess, acks: str, codec: str) -> None:
    topic = unique(f"ck-{acks}-{codec}")
    records = compressible_alone(sample_records(120))
    reports = ck_produce(broker.bootstrap, topic, 1, records, acks=acks, **{"compression.type": codec})
    assert [error for error, _ in reports] == [None] * len(records)
    if acks == "0":  # no acknowledgement: wait for the appends to be visible
        wait_for(lambda: ck_watermarks(broker.bootstrap, topic, 1)[1] >= len(records), "the appends", 10)
    else:
        assert [offset for _, offset in reports] == list(range(len(records)))

    messages = ck_read(broker.bootstrap, topic, 1)
    assert [m.offset() for m in messages] == list(range(len(records)))
    assert ck_as_records(messages) == records
    assert ck_watermarks(broker.bootstrap, topic, 1) == (0, len(records))
    assert ck_watermarks(broker.bootstrap, topic, 0) == (0, 0)

    batches = disk_batches(broker, topic, 1)
    assert {b["compression"] for b in batches} == {codec}, batches
    assert sum(b["count"] for b in batches) == len(records)


def test_confluent_idempotent_producer(broker: BrokerProcess) -> None:
    topic = unique("ck-idem")
    records = sample_records(300)
    reports = ck_produce(
        broker.bootstrap, topic, 0, records, **{"enable.idempotence": True, "batch.num.messages": 40}
    )
    assert reports == [(None, i) for i in range(len(records))]
    assert ck_as_records(ck_read(broker.bootstrap, topic, 0)) == records
    batches = disk_batches(broker, topic, 0)
    assert len(batches) > 1
    assert len({b["producer_id"] for b in batches}) == 1 and batches[0]["producer_id"] >= 0
    # sequences continue from batch to batch, as the broker's duplicate detection requires
    assert [b["base_sequence"] for b in batches] == [b["base_offset"] for b in batches]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_confluent_assign_and_seek(broker: BrokerProcess, codec: str) -> None:
    """Seeking lands on the exact offset, also inside a compressed batch (the broker sends the whole
    batch; the client skips the records before the offset)."""
    topic = unique(f"ck-seek-{codec}")
    records = sample_records(50, nullable_headers=False)
    ck_produce(broker.bootstrap, topic, 0, records, acks="all", **{"compression.type": codec})
    assert len(disk_batches(broker, topic, 0)) < 10
    assert [m.offset() for m in ck_read(broker.bootstrap, topic, 0, offset=42)] == list(range(42, 50))

    consumer = ck_consumer(broker.bootstrap)
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 10)])
        first = wait_for(lambda: consumer.poll(1.0), "a message", 10)
        assert first.error() is None and first.offset() == 10
        consumer.seek(ck.TopicPartition(topic, 0, 30))
        after = wait_for(lambda: consumer.poll(1.0), "a message after seek", 10)
        assert after.error() is None and after.offset() == 30
        assert after.value() == records[30][1]
        [position] = consumer.position([ck.TopicPartition(topic, 0)])
        assert position.offset == 31
    finally:
        consumer.close()


def test_confluent_admin_topics_configs_partitions(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("ck-admin")
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"})],
        request_timeout=TIMEOUT,
    )
    assert futures[topic].result(TIMEOUT) is None

    again = admin.create_topics([NewTopic(topic, num_partitions=1)], request_timeout=TIMEOUT)
    with pytest.raises(ck.KafkaException) as raised:
        again[topic].result(TIMEOUT)
    assert raised.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS

    cluster = admin.list_topics(timeout=TIMEOUT)
    assert cluster.controller_id == 0 and list(cluster.brokers) == [0]
    assert cluster.cluster_id
    partitions = cluster.topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(p.leader == 0 and p.replicas == [0] and p.isrs == [0] for p in partitions.values())

    described = admin.describe_topics(ck.TopicCollection([topic]), request_timeout=TIMEOUT)[topic].result(
        TIMEOUT
    )
    assert described.name == topic and not described.is_internal and str(described.topic_id)
    assert [(p.id, p.leader.id, [r.id for r in p.replicas]) for p in described.partitions] == [
        (0, 0, [0]),
        (1, 0, [0]),
        (2, 0, [0]),
    ]
    description = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert (description.cluster_id, description.controller.id) == (cluster.cluster_id, 0)
    assert [(n.id, n.port) for n in description.nodes] == [(0, broker.port)]

    [configs] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entries = configs.result(TIMEOUT)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    [broker_configs] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert broker_configs.result(TIMEOUT)["num.partitions"].value == "2"

    [grown] = admin.create_partitions([NewPartitions(topic, 5)], request_timeout=TIMEOUT).values()
    assert grown.result(TIMEOUT) is None
    assert sorted(admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == [0, 1, 2, 3, 4]
    assert ck_produce(broker.bootstrap, topic, 4, sample_records(3), acks="all") == [
        (None, 0),
        (None, 1),
        (None, 2),
    ]

    [deleted] = admin.delete_topics([topic], request_timeout=TIMEOUT).values()
    assert deleted.result(TIMEOUT) is None
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics


def test_confluent_delete_records_and_list_offsets(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("ck-offsets")
    records = sample_records(30)  # timestamps T0, T0+1000, ...
    ck_produce(broker.bootstrap, topic, 0, records, acks="all")

    def list_offset(spec: OffsetSpec) -> Any:
        tp = ck.TopicPartition(topic, 0)
        [future] = admin.list_offsets({tp: spec}, request_timeout=TIMEOUT).values()
        return future.result(TIMEOUT)

    assert list_offset(OffsetSpec.earliest()).offset == 0
    assert list_offset(OffsetSpec.latest()).offset == 30
    assert list_offset(OffsetSpec.for_timestamp(T0 + 5500)).offset == 6
    assert list_offset(OffsetSpec.for_timestamp(T0)).offset == 0
    assert list_offset(OffsetSpec.for_timestamp(T0 + 10**9)).offset == -1
    newest = list_offset(OffsetSpec.max_timestamp())
    assert (newest.offset, newest.timestamp) == (29, T0 + 29_000)

    consumer = ck_consumer(broker.bootstrap)
    try:
        [found] = consumer.offsets_for_times([ck.TopicPartition(topic, 0, T0 + 12_000)], timeout=TIMEOUT)
        assert found.offset == 12
    finally:
        consumer.close()

    [deleted] = admin.delete_records([ck.TopicPartition(topic, 0, 10)], request_timeout=TIMEOUT).values()
    assert deleted.result(TIMEOUT).low_watermark == 10
    assert list_offset(OffsetSpec.earliest()).offset == 10
    assert ck_watermarks(broker.bootstrap, topic, 0) == (10, 30)
    # reading from the old start: out of range, reset to the earliest offset
    messages = ck_read(broker.bootstrap, topic, 0, offset=0)
    assert [m.offset() for m in messages] == list(range(10, 30))
    assert ck_as_records(messages) == records[10:]


def test_confluent_message_too_large_is_reported_to_the_producer(broker: BrokerProcess) -> None:
    topic = unique("ck-too-large")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 4_000_000})
    reports: list[Any] = []
    producer.produce(topic, value=b"x" * 2_000_000, partition=0, on_delivery=lambda e, m: reports.append(e))
    producer.produce(topic, value=b"small", partition=0, on_delivery=lambda e, m: reports.append(e))
    assert producer.flush(TIMEOUT) == 0
    assert [e.code() if e else None for e in reports] == [ck.KafkaError.MSG_SIZE_TOO_LARGE, None]
    assert [m.value() for m in ck_read(broker.bootstrap, topic, 0)] == [b"small"]


def test_log_append_time_topic(broker: BrokerProcess) -> None:
    """message.timestamp.type=LogAppendTime: the broker stamps the batches (and recomputes their CRC);
    both clients see the broker's time, not the producer's."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("ck-logappend")
    config = {"message.timestamp.type": "LogAppendTime"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=TIMEOUT)[topic].result(
        TIMEOUT
    )
    before = int(time.time() * 1000)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip"})
    reports: list[Any] = []
    for i in range(10):
        producer.produce(
            topic, value=b"v%d" % i, timestamp=T0 + i, on_delivery=lambda e, m: reports.append(m)
        )
    assert producer.flush(TIMEOUT) == 0
    after = int(time.time() * 1000)
    for report in reports:
        kind, stamp = report.timestamp()
        assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= after, report.timestamp()

    stamps = []
    for m in ck_read(broker.bootstrap, topic, 0):
        kind, stamp = m.timestamp()
        assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= after
        stamps.append(stamp)
    for m in kp_read(broker.bootstrap, topic, 0):
        assert m.timestamp_type == 1 and m.timestamp in stamps
    batches = disk_batches(broker, topic, 0)
    assert all(b["timestamp_type"] == "LogAppendTime" and b["valid"] for b in batches), batches


def test_deleted_topic_recreated_is_empty(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("ck-recreate")
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    ck_produce(broker.bootstrap, topic, 0, sample_records(20), acks="all")
    admin.delete_topics([topic], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    admin.create_topics([NewTopic(topic, 2, 1)], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    assert ck_watermarks(broker.bootstrap, topic, 0) == (0, 0)
    assert ck_produce(broker.bootstrap, topic, 0, sample_records(2), acks="all") == [(None, 0), (None, 1)]
    assert ck_as_records(ck_read(broker.bootstrap, topic, 0)) == sample_records(2)


# --------------------------------------------------------------------------------------- kafka-python


def kp_produce(bootstrap: str, topic: str, partition: int, records: list[Record], **config: Any) -> list[Any]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **config)
    try:
        futures = [
            producer.send(topic, value=v, key=k, headers=h, partition=partition, timestamp_ms=ts)
            for k, v, h, ts in records
        ]
        producer.flush(TIMEOUT)
        return [f.get(TIMEOUT) for f in futures]
    finally:
        producer.close(TIMEOUT)


def kp_consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        check_crcs=True,
    )


def kp_read(bootstrap: str, topic: str, partition: int, offset: int = 0) -> list[Any]:
    """Every record from ``offset`` to the partition's end offset (kafka-python, assign + seek)."""
    consumer = kp_consumer(bootstrap)
    try:
        tp = KpTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        end = consumer.end_offsets([tp])[tp]
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(records)} records, position below {end}"
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def kp_as_records(messages: list[Any]) -> list[Record]:
    out = []
    for m in messages:
        assert m.timestamp_type == 0  # CreateTime
        out.append((m.key, m.value, list(m.headers), m.timestamp))
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_produce_then_consume_exactly(broker: BrokerProcess, acks: Any, codec: str) -> None:
    topic = unique(f"kp-{acks}-{codec}")
    records = sample_records(120, nullable_headers=False)  # kafka-python wants bytes header values
    config: dict[str, Any] = {"acks": acks, "compression_type": None if codec == "none" else codec}
    if acks != "all":
        config["enable_idempotence"] = False
    metadata = kp_produce(broker.bootstrap, topic, 1, records, **config)
    if acks == 0:
        consumer = kp_consumer(broker.bootstrap)
        tp = KpTopicPartition(topic, 1)
        try:
            wait_for(lambda: consumer.end_offsets([tp])[tp] >= len(records), "the appends", 10)
        finally:
            consumer.close()
    else:
        assert [m.offset for m in metadata] == list(range(len(records)))

    messages = kp_read(broker.bootstrap, topic, 1)
    assert [m.offset for m in messages] == list(range(len(records)))
    assert kp_as_records(messages) == records

    batches = disk_batches(broker, topic, 1)
    assert {b["compression"] for b in batches} == {codec}, batches
    assert sum(b["count"] for b in batches) == len(records)
    assert all(b["magic"] == 2 for b in batches)


def test_kafka_python_is_idempotent_by_default(broker: BrokerProcess) -> None:
    topic = unique("kp-idem")
    records = sample_records(200, nullable_headers=False)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, batch_size=2048)
    try:
        assert producer.config["enable_idempotence"] is True  # not downgraded from the broker's versions
        assert producer.config["acks"] == -1
        assert producer.config["api_version"] >= (3, 0)  # the release guessed from our ApiVersions
        futures = [
            producer.send(topic, value=v, key=k, headers=h, partition=0, timestamp_ms=ts)
            for k, v, h, ts in records
        ]
        producer.flush(TIMEOUT)
        assert [f.get(TIMEOUT).offset for f in futures] == list(range(len(records)))
    finally:
        producer.close(TIMEOUT)
    assert kp_as_records(kp_read(broker.bootstrap, topic, 0)) == records
    batches = disk_batches(broker, topic, 0)
    assert len(batches) > 1
    assert len({b["producer_id"] for b in batches}) == 1 and batches[0]["producer_id"] >= 0
    assert [b["base_sequence"] for b in batches] == [b["base_offset"] for b in batches]


def test_kafka_python_assign_and_seek(broker: BrokerProcess) -> None:
    topic = unique("kp-seek")
    records = sample_records(40, nullable_headers=False)
    kp_produce(broker.bootstrap, topic, 0, records)
    assert [m.offset for m in kp_read(broker.bootstrap, topic, 0, offset=35)] == list(range(35, 40))

    consumer = kp_consumer(broker.bootstrap)
    tp = KpTopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 40
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        consumer.seek(tp, 17)
        batch = wait_for(lambda: consumer.poll(timeout_ms=1000).get(tp), "records after seek", 10)
        assert batch[0].offset == 17 and batch[0].value == records[17][1]
    finally:
        consumer.close()


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    topic = unique("kp-admin")
    try:
        created = admin.create_topics([KpNewTopic(topic, 3, 1, topic_configs={"segment.bytes": "1048576"})])
        [result] = created["topics"]
        assert (result["name"], result["error_code"], result["num_partitions"]) == (topic, 0, 3), result
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KpNewTopic(topic, 1, 1)], raise_errors=True)

        assert topic in admin.list_topics()
        [described] = admin.describe_topics([topic])
        assert described["error_code"] == 0
        assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
        assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] for p in described["partitions"])

        configs = admin.describe_configs([KpConfigResource(KpConfigResourceType.TOPIC, topic)])
        overrides = configs["topic"][topic]
        assert overrides["segment.bytes"]["value"] == "1048576"
        assert overrides["segment.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        admin.create_partitions({topic: KpNewPartitions(4)})
        [described] = admin.describe_topics([topic])
        assert len(described["partitions"]) == 4

        records = sample_records(20, nullable_headers=False)
        assert [m.offset for m in kp_produce(broker.bootstrap, topic, 3, records)] == list(range(20))
        tp = KpTopicPartition(topic, 3)
        offsets = admin.list_partition_offsets({tp: KpOffsetSpec.EARLIEST})
        assert offsets[tp].offset == 0
        assert admin.list_partition_offsets({tp: KpOffsetSpec.LATEST})[tp].offset == 20
        assert admin.list_partition_offsets({tp: T0 + 7_500})[tp].offset == 8
        newest = admin.list_partition_offsets({tp: KpOffsetSpec.MAX_TIMESTAMP})[tp]
        assert (newest.offset, newest.timestamp) == (19, T0 + 19_000)

        admin.delete_records({tp: 5})
        assert admin.list_partition_offsets({tp: KpOffsetSpec.EARLIEST})[tp].offset == 5
        consumer = kp_consumer(broker.bootstrap)
        try:
            assert consumer.beginning_offsets([tp]) == {tp: 5}
            assert consumer.end_offsets([tp]) == {tp: 20}
            found = consumer.offsets_for_times({tp: T0 + 11_000})[tp]
            assert (found.offset, found.timestamp) == (11, T0 + 11_000)
        finally:
            consumer.close()
        assert kp_as_records(kp_read(broker.bootstrap, topic, 3, offset=5)) == records[5:]

        [described_dirs] = admin.describe_log_dirs({topic: [3, 0]})
        [log_dir] = described_dirs["log_dirs"]
        assert (described_dirs["broker"], log_dir["error_code"]) == (0, 0)
        assert Path(log_dir["log_dir"]) == broker.data_dir.resolve()
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
        [listed] = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in listed["partitions"]}
        partition_dir = broker.data_dir / partition_dir_name(KpTopicPartition(topic, 3))
        on_disk = sum(f.stat().st_size for f in partition_dir.glob("*.log"))
        assert listed["name"] == topic and sizes == {0: 0, 3: on_disk} and on_disk > 0

        admin.delete_topics([topic])
        wait_for(lambda: topic not in admin.list_topics(), "the topic to disappear", 10)
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------- cross-check


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_confluent_produces_kafka_python_consumes(broker: BrokerProcess, codec: str) -> None:
    topic = unique(f"ck-to-kp-{codec}")
    records = sample_records(100, nullable_headers=False, big=True)
    reports = ck_produce(broker.bootstrap, topic, 0, records, acks="all", **{"compression.type": codec})
    assert reports == [(None, i) for i in range(len(records))]
    messages = kp_read(broker.bootstrap, topic, 0)
    assert [m.offset for m in messages] == list(range(len(records)))
    assert kp_as_records(messages) == records


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_kafka_python_produces_confluent_consumes(broker: BrokerProcess, codec: str) -> None:
    topic = unique(f"kp-to-ck-{codec}")
    records = sample_records(100, nullable_headers=False, big=True)
    metadata = kp_produce(
        broker.bootstrap, topic, 0, records, compression_type=None if codec == "none" else codec
    )
    assert [m.offset for m in metadata] == list(range(len(records)))
    messages = ck_read(broker.bootstrap, topic, 0)
    assert [m.offset() for m in messages] == list(range(len(records)))
    assert ck_as_records(messages) == records


def test_consumers_with_tiny_fetch_sizes_still_get_large_records(broker: BrokerProcess) -> None:
    """KIP-74: a fetch returns at least one whole batch, even one larger than the fetch size limits;
    otherwise a consumer would be stuck at a large record forever."""
    topic = unique("tiny-fetch")
    records = [(b"k%d" % i, bytes([65 + i]) * (150_000 if i % 2 else 10), [], T0 + i) for i in range(6)]
    ck_produce(broker.bootstrap, topic, 0, records, acks="all", **{"linger.ms": 0, "batch.num.messages": 1})
    assert len(disk_batches(broker, topic, 0)) == 6

    consumer = ck_consumer(
        broker.bootstrap,
        **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024, "message.max.bytes": 1000},
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < len(records) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message)
        assert ck_as_records(got) == records
    finally:
        consumer.close()

    kp = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_bytes=1024,
        max_partition_fetch_bytes=1024,
    )
    try:
        tp = KpTopicPartition(topic, 0)
        kp.assign([tp])
        kp.seek(tp, 0)
        messages: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(messages) < len(records) and time.monotonic() < deadline:
            for batch in kp.poll(timeout_ms=1000).values():
                messages.extend(batch)
        assert kp_as_records(messages) == records
    finally:
        kp.close()
