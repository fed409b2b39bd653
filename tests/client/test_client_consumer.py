"""kctl.client.Consumer against a real `kctl broker start` subprocess, reading what independent
clients (kcat, confluent-kafka) produced: keys, headers, binary values, every codec, several
partitions; positions, seeks, offsets for times, out-of-range resets, long polls, pause/resume,
leader/topic errors and a broker restart, corrupt batches; the stateless simple-consumer ``fetch``;
and ``decode_partition`` on crafted bytes (control batches, compacted gaps, partial batches)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import kcat, produce, running_broker, unique

from kctl.client import (
    AdminClient,
    BrokerResponseError,
    ClientConfigError,
    ClusterClient,
    NewTopic,
    TopicPartition,
)
from kctl.client.consumer import (
    Consumer,
    ConsumerConfig,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from kctl.client.consumer.fetcher import (
    ConsumerRecord,
    CorruptRecordError,
    TimestampType,
    build_fetch_request,
    decode_partition,
    fetch,
)
from kctl.client.consumer.positions import PartitionState, SubscriptionState
from kctl.protocol import ApiKey, RequestHeader, decode_request, encode_request
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import HEADER_SIZE, InvalidRecordBatch, iter_headers, parse_header, write_crc
from kctl.records.reader import decode_batch
from kctl.records.record import ControlRecord, ControlRecordType
from kctl.testing import BrokerProcess

PARTITIONS = 3
T0 = 1_700_000_000_000
TIMEOUT = 30.0


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (restarted or tampered with)."""
    process = BrokerProcess(tmp_path / "data", {"num.partitions": "1"}).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": str(PARTITIONS)}, "consumer") as process:
        yield process


def create(broker: BrokerProcess, name: str, partitions: int = PARTITIONS, **configs: str) -> str:
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, 1, configs)])
        assert result.ok, result
        admin.cluster.wait_for_topics([name], timeout=TIMEOUT)
    return name


def ck_produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any) -> None:
    """confluent-kafka: each record a dict of produce() arguments; fails unless all are delivered."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    errors: list[Any] = []
    for record in records:
        producer.produce(topic, on_delivery=lambda e, m: errors.append(e) if e else None, **record)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "records still undelivered"
    assert not errors, errors


def consume_all(consumer: Consumer, expected: int, timeout: float = TIMEOUT) -> list[ConsumerRecord]:
    """Poll until ``expected`` records arrived (fails at the deadline), then one more short poll
    that must bring nothing."""
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < expected:
        assert time.monotonic() < deadline, f"got {len(records)} of {expected} records"
        records += consumer.poll(1.0)
    assert consumer.poll(0.2) == []
    return records


def by_partition(records: list[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    out: dict[int, list[ConsumerRecord]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def reader(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS, **config: Any) -> Consumer:
    consumer = Consumer(broker.bootstrap, {"auto.offset.reset": "earliest", **config})
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    return consumer


# ----------------------------------------------------------------------------------------- config


def test_config_uses_kafka_consumer_property_names() -> None:
    config = ConsumerConfig.from_properties(
        {
            "fetch.min.bytes": "10",
            "fetch.max.wait.ms": "100",
            "fetch.max.bytes": "1000000",
            "max.partition.fetch.bytes": "65536",
            "auto.offset.reset": "smallest",
            "check.crcs": "false",
            "isolation.level": "read_committed",
            "client.id": "reader",
            "max.poll.records": "7",
            "something.else": "x",
        }
    )
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms, config.fetch_max_bytes) == (10, 100, 1_000_000)
    assert config.max_partition_fetch_bytes == 65536 and config.max_poll_records == 7
    assert config.auto_offset_reset == "earliest" and config.check_crcs is False
    assert config.isolation_level == "read_committed" and config.client_id == "reader"
    assert config.unknown == ("something.else",)
    defaults = ConsumerConfig()
    assert (defaults.fetch_min_bytes, defaults.fetch_max_wait_ms, defaults.auto_offset_reset) == (
        1,
        500,
        "latest",
    )
    assert (defaults.fetch_max_bytes, defaults.max_partition_fetch_bytes) == (52_428_800, 1_048_576)
    for key, value in [
        ("auto.offset.reset", "sometimes"),
        ("check.crcs", "maybe"),
        ("fetch.max.wait.ms", "-1"),
        ("isolation.level", "dirty"),
    ]:
        with pytest.raises(ClientConfigError, match=key):
            ConsumerConfig.from_properties({key: value})


def test_client_rack_goes_into_fetch_v11_and_a_preferred_replica_lasts_until_an_error_or_expiry() -> None:
    config = ConsumerConfig.from_properties({"client.rack": "r2", "metadata.max.age.ms": "1000"})
    assert config.client_rack == "r2" and ConsumerConfig().client_rack is None
    sizes = {"min_bytes": 1, "max_bytes": 1, "partition_max_bytes": 1}
    request = build_fetch_request([(TopicPartition("t", 0), 5)], max_wait_ms=0, rack_id="r2", **sizes)
    for version in (11, 12):  # the rack goes on the wire from v11 on
        frame = encode_request(RequestHeader(ApiKey.FETCH, version, 1, "t"), request)
        assert decode_request(frame[4:])[1].rack_id == "r2"
    state, positions = PartitionState(), SubscriptionState(0.1, 1.0)
    assert state.read_replica(leader=1, now=0.0) == 1
    state.preferred_replica, state.preferred_until = 3, 10.0
    assert state.read_replica(leader=1, now=9.0) == 3
    assert state.read_replica(leader=1, now=10.0) == 1 and state.preferred_replica is None  # expired
    state.preferred_replica, state.preferred_until = 3, 10.0
    positions.back_off(state, now=1.0)  # an error: back to the leader
    assert state.read_replica(leader=1, now=2.0) == 1


# ----------------------------------------------------------------------------------------- reading
# ----------------------------------------------------------------------------------------- reading


def test_reads_what_confluent_kafka_produced_keys_headers_binary(broker: BrokerProcess) -> None:
    topic = create(broker, unique("ck"))
    sent = []
    for i in range(60):
        record = {
            "partition": i % PARTITIONS,
            "key": None if i % 10 == 0 else bytes([i, 0, 255, 10]) + b"k%d" % i,
            "value": None if i % 15 == 7 else bytes(range(256)) * (i % 3) + b"\n\x00v%d" % i,
            "headers": [("trace", b"t%d" % i), ("bin", b"\xff\x00"), ("trace", b"again"), ("null", None)],
            "timestamp": T0 + i,
        }
        sent.append(record)
    ck_produce(broker.bootstrap, topic, sent)

    with reader(broker, topic) as consumer:
        records = consume_all(consumer, len(sent))
    got = by_partition(records)
    for p in range(PARTITIONS):
        expected = [r for r in sent if r["partition"] == p]
        assert [r.offset for r in got[p]] == list(range(len(expected)))
        for record, want in zip(got[p], expected, strict=True):
            assert (record.topic, record.key, record.value) == (topic, want["key"], want["value"])
            assert record.headers == tuple(want["headers"])
            assert record.timestamp == want["timestamp"]
            assert record.timestamp_type is TimestampType.CREATE_TIME
            assert record.topic_partition == TopicPartition(topic, p)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_reads_every_codec_from_confluent_kafka(broker: BrokerProcess, codec: str) -> None:
    topic = create(broker, unique(f"codec-{codec}"))
    sent = [
        {"partition": i % PARTITIONS, "key": b"key-%d" % i, "value": (b"value %d " % i) * 20}
        for i in range(600)
    ]
    ck_produce(broker.bootstrap, topic, sent, **{"compression.type": codec, "linger.ms": 50})
    with reader(broker, topic) as consumer:
        records = consume_all(consumer, len(sent))
    got = by_partition(records)
    for p in range(PARTITIONS):
        expected = [(r["key"], r["value"]) for r in sent if r["partition"] == p]
        assert [(r.key, r.value) for r in got[p]] == expected
        assert [r.offset for r in got[p]] == list(range(len(expected)))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_reads_what_kcat_produced(broker: BrokerProcess, codec: str) -> None:
    topic = unique(f"kcat-{codec}")
    lines = [b"key-%d\tvalue %d \xc3\xa9" % (i, i) for i in range(200)]
    kcat(
        broker.bootstrap,
        "-P",
        "-t",
        topic,
        "-K",
        "\t",
        "-z",
        codec,
        "-H",
        "source=kcat",
        "-X",
        "message.timeout.ms=20000",
        input=b"\n".join(lines) + b"\n",
    )
    with reader(broker, topic) as consumer:
        records = consume_all(consumer, len(lines))
    assert sorted((r.key, r.value) for r in records) == sorted(
        (b"key-%d" % i, f"value {i} é".encode()) for i in range(200)
    )
    assert all(r.headers == (("source", b"kcat"),) for r in records)
    for rs in by_partition(records).values():  # keyed: each partition in offset order, no gaps
        assert [r.offset for r in rs] == list(range(len(rs)))


def test_seek_inside_a_batch_skips_the_records_below(broker: BrokerProcess) -> None:
    topic = create(broker, unique("seek"), 1)
    for codec in ("none", "zstd"):
        builder = RecordBatchBuilder(compression=codec)
        for i in range(100):
            builder.append(T0 + i, b"k%d" % i, b"v%d" % i)
        assert produce(broker.bootstrap, topic, 0, builder.build()).error_code == 0
    tp = TopicPartition(topic, 0)
    with Consumer(broker.bootstrap) as consumer:
        consumer.assign([tp])
        for start in (0, 37, 99, 100, 150, 199):
            consumer.seek(tp, start)
            records = consume_all(consumer, 200 - start)
            assert [r.offset for r in records] == list(range(start, 200))
            assert records[0].value == b"v%d" % (start % 100)
            assert consumer.position(tp) == 200


def test_positions_beginning_end_and_offsets_for_times(broker: BrokerProcess) -> None:
    topic = create(broker, unique("times"), 2)
    ck_produce(
        broker.bootstrap,
        topic,
        [{"partition": 0, "value": b"%d" % i, "timestamp": T0 + i * 1000} for i in range(10)],
    )
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(broker.bootstrap) as consumer:
        consumer.assign([p0, p1])
        assert consumer.assignment() == {p0, p1}
        assert consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert consumer.end_offsets([p0, p1]) == {p0: 10, p1: 0}
        found = consumer.offsets_for_times({p0: T0 + 3500, p1: T0})
        assert found[p0] is not None and (found[p0].offset, found[p0].timestamp) == (4, T0 + 4000)
        assert found[p1] is None
        assert consumer.offsets_for_times({p0: T0 + 10**9})[p0] is None
        # auto.offset.reset latest (the default): a new partition starts at the end
        assert consumer.position(p0) == 10 and consumer.position(p1) == 0
        consumer.seek_to_beginning([p0])
        assert consumer.position(p0) == 0
        assert [r.value for r in consumer.poll(5.0)] == [b"%d" % i for i in range(10)]
        assert consumer.position(p0) == 10
        assert consumer.positions() == {p0: 10, p1: 0}
        assert consumer.highwater(p0) == 10
        consumer.seek(p0, 4)
        assert consumer.poll(5.0, max_records=2)[0].offset == 4
        assert consumer.position(p0) == 6
        consumer.seek_to_end()
        assert consumer.position(p0) == 10
        with pytest.raises(ValueError, match="not assigned"):
            consumer.seek(TopicPartition(topic, 5), 0)
        with pytest.raises(ValueError):
            consumer.seek(p0, -1)


def test_max_poll_records_and_order(broker: BrokerProcess) -> None:
    topic = create(broker, unique("maxpoll"), 1)
    ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"%d" % i} for i in range(1000)])
    with reader(broker, topic, 1, **{"max.poll.records": "64"}) as consumer:
        offsets: list[int] = []
        while len(offsets) < 1000:
            batch = consumer.poll(5.0)
            assert 0 < len(batch) <= 64
            offsets += [r.offset for r in batch]
        assert offsets == list(range(1000))
        assert len(consumer.poll(5.0, max_records=1000)) == 0


def test_small_fetch_sizes_still_reach_every_partition(broker: BrokerProcess) -> None:
    """Batches larger than max.partition.fetch.bytes: the broker returns a whole batch only for the
    first partition of a request; the consumer rotates the order so every partition progresses."""
    topic = create(broker, unique("bigbatch"))
    sent = [{"partition": i % PARTITIONS, "value": bytes([i % 256]) * 5000} for i in range(90)]
    ck_produce(broker.bootstrap, topic, sent, **{"linger.ms": 200, "batch.size": 1_000_000})
    config = {"max.partition.fetch.bytes": "1024", "fetch.max.bytes": "2048"}
    with reader(broker, topic, **config) as consumer:
        records = consume_all(consumer, len(sent))
    for p, rs in by_partition(records).items():
        assert [r.value for r in rs] == [s["value"] for s in sent if s["partition"] == p]


def test_out_of_range_resets_per_policy(broker: BrokerProcess) -> None:
    topic = create(broker, unique("range"), 1)
    tp = TopicPartition(topic, 0)
    ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"%d" % i} for i in range(10)])
    with Consumer(broker.bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert [r.offset for r in consume_all(consumer, 10)] == list(range(10))
    with Consumer(broker.bootstrap, {"auto.offset.reset": "latest"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert consumer.poll(2.0) == []
        assert consumer.position(tp) == 10
    with Consumer(broker.bootstrap, {"auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.poll(1.0)
        consumer.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError) as info:
            for _ in range(20):
                consumer.poll(1.0)
        assert info.value.offsets == {tp: 1000}
        consumer.seek(tp, 8)
        assert [r.offset for r in consumer.poll(5.0)] == [8, 9]


def test_deleted_records_move_the_position_to_the_log_start(broker: BrokerProcess) -> None:
    topic = create(broker, unique("deleted"), 1)
    tp = TopicPartition(topic, 0)
    ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"%d" % i} for i in range(10)])
    with Consumer(broker.bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        with AdminClient(broker.bootstrap) as admin:
            assert admin.delete_records({tp: 6})[tp].ok
        assert [r.offset for r in consume_all(consumer, 4)] == [6, 7, 8, 9]
        assert consumer.beginning_offsets([tp]) == {tp: 6}


def test_long_poll_gets_a_record_produced_later(broker: BrokerProcess) -> None:
    topic = create(broker, unique("longpoll"), 1)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.bootstrap, {"fetch.max.wait.ms": "10000"}) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 0
        timer = threading.Timer(
            0.5, ck_produce, (broker.bootstrap, topic, [{"partition": 0, "value": b"late"}])
        )
        timer.start()
        try:
            started = time.monotonic()
            records = consumer.poll(20.0)
            assert time.monotonic() - started < 20.0
        finally:
            timer.join()
        assert [r.value for r in records] == [b"late"]


def test_poll_returns_after_its_timeout_on_an_empty_topic(broker: BrokerProcess) -> None:
    topic = create(broker, unique("empty"), 1)
    with reader(broker, topic, 1) as consumer:
        started = time.monotonic()
        assert consumer.poll(0.3) == []
        assert consumer.poll(0) == []
        assert time.monotonic() - started < 10.0  # the deadline of a correct answer, not a benchmark


def test_iterator_blocks_until_records_arrive_and_stops_on_request(broker: BrokerProcess) -> None:
    topic = create(broker, unique("iter"), 2)
    with reader(broker, topic, 2) as consumer:
        got: list[ConsumerRecord] = []

        def produce_later() -> None:
            for i in range(5):
                ck_produce(broker.bootstrap, topic, [{"partition": i % 2, "value": b"%d" % i}])

        thread = threading.Thread(target=produce_later)
        thread.start()
        try:
            for record in consumer.stream(stop=lambda: len(got) >= 5):
                got.append(record)
        finally:
            thread.join()
        assert sorted(r.value for r in got) == [b"%d" % i for i in range(5)]
        assert list(consumer.stream(idle_timeout=0.2)) == []
        ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"x"}])
        assert next(iter(consumer)).value == b"x"


def test_pause_and_resume(broker: BrokerProcess) -> None:
    topic = create(broker, unique("pause"), 2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ck_produce(broker.bootstrap, topic, [{"partition": i % 2, "value": b"%d" % i} for i in range(10)])
    with reader(broker, topic, 2) as consumer:
        consumer.pause([p1])
        assert consumer.paused() == {p1}
        records = consume_all(consumer, 5)
        assert {r.partition for r in records} == {0}
        consumer.resume([p1])
        assert {r.partition for r in consume_all(consumer, 5)} == {1}
        assert consumer.positions() == {p0: 5, p1: 5}


def test_reassign_keeps_positions_of_partitions_that_stay(broker: BrokerProcess) -> None:
    topic = create(broker, unique("reassign"), 2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ck_produce(broker.bootstrap, topic, [{"partition": i % 2, "value": b"%d" % i} for i in range(20)])
    with Consumer(broker.bootstrap, {"auto.offset.reset": "earliest", "max.poll.records": "3"}) as consumer:
        consumer.assign([p0])
        assert [r.offset for r in consumer.poll(5.0)] == [0, 1, 2]
        consumer.assign([p0, p1])
        records = consume_all(consumer, 17)
        assert [r.offset for r in records if r.partition == 0] == list(range(3, 10))
        consumer._set_assignment([p1], {p1: 8})
        assert [r.offset for r in consume_all(consumer, 2)] == [8, 9]
        consumer.unassign()
        assert consumer.assignment() == set() and consumer.poll(0.1) == []


def test_a_topic_created_after_assign_is_read_once_it_exists(broker: BrokerProcess) -> None:
    topic = unique("later")
    tp = TopicPartition(topic, 0)
    with Consumer(broker.bootstrap, {"auto.offset.reset": "earliest", "retry.backoff.ms": "50"}) as consumer:
        consumer.assign([tp])
        assert consumer.poll(0.3) == []  # UNKNOWN_TOPIC_OR_PARTITION: backs off and retries
        create(broker, topic, 1)
        ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"hello"}])
        assert [r.value for r in consume_all(consumer, 1)] == [b"hello"]


def test_membership_hooks_give_committed_positions(broker: BrokerProcess) -> None:
    topic = create(broker, unique("hooks"), 2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ck_produce(broker.bootstrap, topic, [{"partition": i % 2, "value": b"%d" % i} for i in range(10)])
    calls: list[str] = []

    class Hooks:
        def on_poll(self, consumer: Consumer) -> None:
            calls.append("poll")

        def committed_offsets(self, partitions: Any) -> dict[TopicPartition, int]:
            calls.append(f"committed {sorted(partitions)}")
            return {p0: 3}  # p1: nothing committed -> auto.offset.reset

        def on_close(self, consumer: Consumer) -> None:
            calls.append("close")

    consumer = Consumer(broker.bootstrap, {"auto.offset.reset": "earliest"})
    consumer._attach_membership(Hooks())
    consumer.assign([p0, p1])
    records = consume_all(consumer, 7)
    assert [r.offset for r in records if r.partition == 0] == [3, 4]
    assert [r.offset for r in records if r.partition == 1] == [0, 1, 2, 3, 4]
    consumer.close()
    assert calls[0] == "poll" and calls[1] == f"committed {sorted([p0, p1])}" and calls[-1] == "close"
    assert consumer.closed


def test_survives_a_broker_restart(own_broker: BrokerProcess) -> None:
    own = own_broker
    topic = create(own, unique("restart"), 1)
    ck_produce(own.bootstrap, topic, [{"partition": 0, "value": b"a%d" % i} for i in range(5)])
    with reader(own, topic, 1, **{"retry.backoff.ms": "50"}) as consumer:
        assert len(consume_all(consumer, 5)) == 5
        own.restart()
        ck_produce(own.bootstrap, topic, [{"partition": 0, "value": b"b%d" % i} for i in range(5)])
        records = consume_all(consumer, 5)
        assert [(r.offset, r.value) for r in records] == [(5 + i, b"b%d" % i) for i in range(5)]


def test_a_corrupt_batch_raises_until_seeked_past(own_broker: BrokerProcess) -> None:
    own = own_broker
    topic = create(own, unique("corrupt"), 1)
    tp = TopicPartition(topic, 0)
    for i in range(3):
        builder = RecordBatchBuilder()
        builder.append(T0, b"k", b"value-%d-" % i + b"x" * 200)
        assert produce(own.bootstrap, topic, 0, builder.build()).error_code == 0
    segment = own.data_dir / f"{topic}_0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    position = data.index(b"value-1-")
    with open(segment, "r+b") as handle:  # the broker serves the file as is (sendfile)
        handle.seek(position)
        handle.write(b"VALUE")
    with Consumer(own.bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        assert [r.value[:8] for r in consumer.poll(5.0)] == [b"value-0-"]
        with pytest.raises(CorruptRecordError) as info:
            for _ in range(10):
                consumer.poll(2.0)
        assert info.value.partition == tp and info.value.offset == 1
        with pytest.raises(CorruptRecordError):
            consumer.poll(2.0)
        consumer.seek(tp, 2)
        assert [r.value[:8] for r in consumer.poll(5.0)] == [b"value-2-"]
    with Consumer(own.bootstrap, {"auto.offset.reset": "earliest", "check.crcs": "false"}) as consumer:
        consumer.assign([tp])
        assert [r.value[:8] for r in consume_all(consumer, 3)] == [b"value-0-", b"VALUE-1-", b"value-2-"]


def test_close_of_a_consumer_on_a_shared_cluster_client_leaves_it_usable(broker: BrokerProcess) -> None:
    topic = create(broker, unique("shared"), 1)
    tp = TopicPartition(topic, 0)
    with ClusterClient(broker.bootstrap) as cluster:
        consumer = Consumer(cluster, auto_offset_reset="earliest", fetch_max_wait_ms=300)
        consumer.assign([tp])
        assert consumer.poll(0.1) == []  # leaves nothing in flight on a shared connection...
        ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"v"}])
        assert [r.value for r in consume_all(consumer, 1)] == [b"v"]  # ...and this leaves a prefetch
        consumer.close()
        with pytest.raises(Exception, match="closed"):
            consumer.poll(0)
        assert cluster.refresh_metadata([topic]).topic(topic) is not None
        for conn in cluster.connections().values():
            assert conn.in_flight == 0


# ----------------------------------------------------------------------------------------- fetch()


def test_stateless_fetch(broker: BrokerProcess) -> None:
    topic = create(broker, unique("simple"), 1)
    ck_produce(
        broker.bootstrap, topic, [{"partition": 0, "key": b"k", "value": b"%d" % i} for i in range(50)]
    )
    with ClusterClient(broker.bootstrap) as cluster:
        records = fetch(cluster, topic, 0, 10, 1_000_000)
        assert [r.offset for r in records] == list(range(10, 50))
        assert records[0] == ConsumerRecord(
            topic, 0, 10, records[0].timestamp, TimestampType.CREATE_TIME, b"k", b"10", ()
        )
        small = fetch(cluster, topic, 0, 0, 100)  # at least one whole batch comes back
        assert small and small[0].offset == 0
        assert fetch(cluster, topic, 0, 50) == []
        with pytest.raises(BrokerResponseError, match="OFFSET_OUT_OF_RANGE"):
            fetch(cluster, topic, 0, 51)
        with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            fetch(cluster, unique("absent"), 0, 0, timeout=2)
    with Consumer(broker.bootstrap) as consumer:
        assert [r.value for r in consumer.fetch(topic, 0, 48, 10_000)] == [b"48", b"49"]
        assert consumer.assignment() == set()


# ----------------------------------------------------------------------------------------- decoding


def _batch(base_offset: int, records: list[tuple[int, bytes]], **kwargs: Any) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, **kwargs)
    for delta, value in records:
        builder.append(T0 + delta, b"k", value, offset_delta=delta)
    return builder.build()


def test_decode_skips_control_batches_and_steps_over_gaps() -> None:
    marker = ControlRecord(ControlRecordType.COMMIT, coordinator_epoch=0)
    control = RecordBatchBuilder(
        base_offset=3, is_control=True, is_transactional=True, producer_id=7, producer_epoch=0
    )
    control.append(T0, marker.encode_key(), marker.encode_value())
    data = (
        _batch(0, [(0, b"a"), (1, b"b"), (2, b"c")])
        + control.build()
        + _batch(4, [(0, b"d"), (3, b"e")])  # offsets 4 and 7: a compacted gap
        + _batch(8, [(0, b"f")], log_append_time=True)
    )
    decoded = decode_partition("t", 0, data, 1)
    assert [(r.offset, r.value) for r in decoded.records] == [
        (1, b"b"),
        (2, b"c"),
        (4, b"d"),
        (7, b"e"),
        (8, b"f"),
    ]
    assert decoded.records[-1].timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decoded.next_offset == 9 and not decoded.partial
    only_control = decode_partition("t", 0, control.build(), 3)
    assert only_control.records == [] and only_control.next_offset == 4


def test_decode_ignores_a_trailing_partial_batch() -> None:
    first = _batch(0, [(0, b"a"), (1, b"b")])
    second = _batch(2, [(0, b"c")], compression="lz4")
    for cut in (1, 11, 12, 40, len(second) - 1):
        decoded = decode_partition("t", 0, memoryview(first + second[:cut]), 0)
        assert [r.value for r in decoded.records] == [b"a", b"b"] and decoded.next_offset == 2
    partial = decode_partition("t", 0, second[:30], 2)
    assert partial.records == [] and partial.next_offset is None and partial.partial
    assert decode_partition("t", 0, b"", 0) == ([], None, False, None)
    assert decode_partition("t", 0, None, 0) == ([], None, False, None)


def test_decode_reports_corruption_with_the_partition_and_offset() -> None:
    data = bytearray(_batch(0, [(0, b"a")]) + _batch(1, [(0, b"bbbb")]))
    data[-2] ^= 0xFF
    decoded = decode_partition("t", 0, bytes(data), 0)  # the good batch first, the error with it
    assert [r.value for r in decoded.records] == [b"a"] and decoded.next_offset == 1
    assert isinstance(decoded.error, CorruptRecordError)
    with pytest.raises(CorruptRecordError, match="t-0") as info:
        decode_partition("t", 0, bytes(data), 1)
    assert info.value.offset == 1 and info.value.partition == TopicPartition("t", 0)
    assert "at offset 1" in str(info.value)
    unchecked = decode_partition("t", 0, bytes(data), 0, check_crcs=False).records
    assert [r.value for r in unchecked] == [b"a", b"bbb" + bytes([ord("b") ^ 0xFF])]


def _reader_view(data: bytes, fetch_offset: int) -> tuple[list[tuple[Any, ...]], bool]:
    """What kctl.records.reader makes of ``data`` (the reference), as decode_partition reports it:
    the records at or after ``fetch_offset`` of the batches decoded before the first corrupt one
    (batches wholly below the offset are not decoded), and whether a corrupt one was met."""
    out: list[tuple[Any, ...]] = []
    try:
        for position, header in iter_headers(data, check_crc=True):
            if header.next_offset <= fetch_offset or header.is_control:
                continue
            batch = decode_batch(data, position)
            ts_type = TimestampType.LOG_APPEND_TIME if batch.is_log_append_time else TimestampType.CREATE_TIME
            out += [
                ("t", 0, r.offset, r.timestamp, ts_type, r.key, r.value, tuple(r.headers))
                for r in batch.records
                if r.offset >= fetch_offset
            ]
    except InvalidRecordBatch:
        return out, True
    return out, False


def _random_batch(rng: random.Random, base_offset: int) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        compression=rng.choice(["none", "none", "gzip", "snappy", "lz4", "zstd"]),
        log_append_time=rng.random() < 0.1,
    )
    ts = T0 + rng.randrange(-(10**6), 10**6)
    delta = 0
    for _ in range(rng.choice([1, 2, 5, 50, 300])):
        size = rng.choice([0, 1, 50, 50, 63, 64, 100, 200, 8191, 8192, 20000])
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 3, 70, 9000]))
        value = None if rng.random() < 0.1 else rng.randbytes(size)
        headers = (
            [] if rng.random() < 0.85 else [(f"h{j}", rng.choice([None, b"", b"x" * 100])) for j in range(3)]
        )
        delta += rng.choice([1, 1, 1, 1, 1, 40, 9000])  # gaps, as compaction leaves
        builder.append(
            ts + rng.choice([0, 0, 5, -5, 1000, 100_000, -100_000, 10**9]),
            key,
            value,
            headers,
            offset_delta=delta,
        )
    return builder.build()


def test_decoding_agrees_with_the_record_reader() -> None:
    """decode_partition's own loops against kctl.records.reader, on random valid batches (keys,
    headers, long varints, gaps, codecs, LogAppendTime) and on corrupted ones with a valid CRC."""
    rng = random.Random(4)
    for case in range(300):
        data = b""
        offset = 0
        for _ in range(rng.choice([1, 2, 3])):
            batch = _random_batch(rng, offset)
            data += batch
            offset = parse_header(batch).next_offset
        fetch_offset = rng.choice([0, 0, rng.randrange(offset)])
        if case % 2 == 0:  # corrupt a byte of some records sections, then fix the CRC
            mutable = bytearray(data)
            position = 0
            while position < len(mutable):
                size = parse_header(mutable, position).size
                if rng.random() < 0.8 and not parse_header(mutable, position).compression:
                    span = size - HEADER_SIZE if rng.random() < 0.3 else min(size - HEADER_SIZE, 40)
                    at = position + HEADER_SIZE + rng.randrange(span)
                    mutable[at] = rng.randrange(256)
                    write_crc(mutable, position, size)
                position += size
            if rng.random() < 0.2:  # a batch whose header cannot be parsed (magic is outside the CRC)
                starts = [p for p, _ in iter_headers(bytes(mutable))]
                mutable[rng.choice(starts) + 16] = 1
            data = bytes(mutable)
        expected, corrupt = _reader_view(data, fetch_offset)
        try:
            decoded = decode_partition("t", 0, memoryview(data), fetch_offset)
        except CorruptRecordError:
            assert corrupt and not expected, case
            continue
        assert [tuple(r) for r in decoded.records] == expected, case
        assert (decoded.error is not None) == corrupt, case


def test_a_wrong_record_length_alone_is_stepped_over_by_the_fast_loop() -> None:
    """Documented trade-off: the usual-batch loop skips record length fields (the CRC covers them,
    the fields must end at the batch's end); the record reader rejects the same batch."""
    batch = bytearray(_batch(0, [(0, b"abc"), (1, b"defgh")]))
    first_record = HEADER_SIZE
    assert batch[first_record] % 2 == 0
    batch[first_record] += 2  # the length of record 0, one byte too long
    write_crc(batch, 0, len(batch))
    assert [r.value for r in decode_partition("t", 0, bytes(batch), 0).records] == [b"abc", b"defgh"]
    with pytest.raises(InvalidRecordBatch):
        decode_batch(bytes(batch))
