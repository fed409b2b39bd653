"""kctl.client.Producer: configuration (no broker), then end to end against a real `kctl broker start`
with what it wrote read back by independent clients (confluent-kafka, kcat) and from the segment
files (`kctl log dump`): sync and async sends, order per partition, every codec, acks 0/1/all,
idempotence through broker restarts, keys/headers/timestamps, explicit partitions, errors delivered
to futures, flush/close, back-pressure, callbacks and concurrent.futures helpers."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import dump_batches, kcat, running_broker, unique

from kctl.client import (
    AdminClient,
    BrokerResponseError,
    ClientConfig,
    ClientConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NewTopic,
)
from kctl.client.producer import (
    DeliveryTimeoutError,
    Producer,
    ProducerClosedError,
    ProducerConfig,
    RecordFuture,
    RecordMetadata,
)
from kctl.protocol import ErrorCode
from kctl.testing import BrokerProcess, ZooKeeperServer, create_topic

TIMEOUT = 30.0
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


# ------------------------------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker (3 partitions per auto-created topic) for the tests that do not restart it."""
    with running_broker(tmp_path_factory, {"num.partitions": "3"}, "producer") as process:
        yield process


def read_all(bootstrap: str, topic: str, partitions: int = 1) -> dict[int, list[Any]]:
    """Every message of every partition, with confluent-kafka (assign from the beginning to EOF)."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        messages: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == ck.KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            messages[message.partition()].append(message)
        return messages
    finally:
        consumer.close()


def values(messages: list[Any]) -> list[bytes]:
    return [m.value() for m in messages]


# ------------------------------------------------------------------------------------------ config


def test_config_from_kafka_properties() -> None:
    config = ProducerConfig.from_properties(
        {
            "acks": "all",
            "linger.ms": "20",
            "batch.size": "65536",
            "compression.type": "LZ4",
            "enable.idempotence": "false",
            "max.in.flight.requests.per.connection": "3",
            "client.id": "me",
            "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
            "bogus.key": "1",
        }
    )
    assert config.acks == -1
    assert (config.linger_ms, config.batch_size, config.compression_type) == (20, 65536, "lz4")
    assert config.enable_idempotence is False and config.idempotence is False
    assert config.max_in_flight_requests_per_connection == 3
    assert config.client_id == "me"
    assert config.unknown == ("bogus.key",)
    assert ProducerConfig(acks="1").acks == 1  # type: ignore[arg-type]
    assert ProducerConfig().batch_size >= 64 * 1024


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"acks": "2"}, "acks"),
        ({"compression.type": "brotli"}, "compression"),
        ({"linger.ms": "-1"}, "linger.ms"),
        ({"enable.idempotence": "yes"}, "enable.idempotence"),
        ({"enable.idempotence": "true", "acks": "0"}, "acks must not be 0"),
        ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"}, "at most 5"),
    ],
)
def test_config_rejects_bad_values(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ClientConfigError, match=message):
        ProducerConfig.from_properties(properties)


def test_idempotence_default_follows_the_other_settings() -> None:
    assert ProducerConfig().idempotence is None  # on if the broker supports it
    assert ProducerConfig(acks=1).idempotence is None
    assert ProducerConfig(acks=0).idempotence is False
    assert ProducerConfig(retries=0).idempotence is False
    assert ProducerConfig(max_in_flight_requests_per_connection=10).idempotence is False
    assert ProducerConfig(enable_idempotence=True).idempotence is True


def test_coerce_keeps_a_client_config() -> None:
    base = ClientConfig(client_id="tool", request_timeout_ms=1234)
    config = ProducerConfig.coerce(base, linger_ms=7)
    assert (config.client_id, config.request_timeout_ms, config.linger_ms) == ("tool", 1234, 7)


def test_send_arguments_are_checked_without_a_broker() -> None:
    producer = Producer("127.0.0.1:1", delivery_timeout_ms=300, request_timeout_ms=200)
    try:
        with pytest.raises(TypeError):
            producer.send("t", 12345)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            producer.send("t", b"v", headers=[("k", 5)])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            producer.send("t", b"v", partition=-1)
        future = producer.send("t", b"v")
        assert isinstance(future, concurrent.futures.Future) and not future.cancel()
        error = future.exception(timeout=10)
        assert isinstance(error, DeliveryTimeoutError)  # nobody listens on port 1
    finally:
        producer.close(timeout=1)
    with pytest.raises(ProducerClosedError):
        producer.send("t", b"v")


# ------------------------------------------------------------------------------------------ sending


def test_sync_and_async_sends(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("sync"), 1)
    with Producer(shared.bootstrap) as producer:
        first = producer.produce_sync(topic, b"one", key=b"k", timestamp=T0, timeout=TIMEOUT)
        assert first == RecordMetadata(topic, 0, 0, T0)
        futures = [producer.send(topic, b"v%d" % i) for i in range(1000)]
        assert producer.flush(TIMEOUT) == 0
        assert all(f.done() for f in futures)
        assert [f.result().offset for f in futures] == list(range(1, 1001))
        assert producer.send(topic, b"last").result(TIMEOUT).offset == 1001
        assert producer.idempotent is True and producer.producer_id >= 0
    expected = [b"one", *(b"v%d" % i for i in range(1000)), b"last"]
    assert values(read_all(shared.bootstrap, topic)[0]) == expected


def test_order_per_partition_with_keys_many_batches_and_threads(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("order"), 3)
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    with Producer(shared.bootstrap, batch_size=4096, linger_ms=1) as producer:
        futures = [producer.send(topic, b"%06d" % i, key=b"key-%d" % (i % 17)) for i in range(20_000)]
        producer.flush(TIMEOUT)
        for i, future in enumerate(futures):
            metadata = future.result(0)
            sent[metadata.partition].append(b"%06d" % i)
        offsets = {p: [f.result().offset for f in futures if f.result().partition == p] for p in sent}
        assert all(offsets[p] == list(range(len(offsets[p]))) for p in sent)

        # several threads at once: each thread's records stay in order within a partition
        def run(name: bytes) -> list[RecordFuture]:
            return [producer.send(topic, name + b"-%05d" % i, partition=1) for i in range(3000)]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            threaded = list(pool.map(run, [b"a", b"b", b"c", b"d"]))
        producer.flush(TIMEOUT)
        assert all(f.exception() is None for fs in threaded for f in fs)
    got = read_all(shared.bootstrap, topic, 3)
    for p in (0, 2):
        assert values(got[p]) == sent[p]
    assert values(got[1])[: len(sent[1])] == sent[1]
    rest = values(got[1])[len(sent[1]) :]
    for name in (b"a", b"b", b"c", b"d"):
        assert [v for v in rest if v.startswith(name)] == [name + b"-%05d" % i for i in range(3000)]
    assert len(rest) == 12_000
    assert all(sent[p] for p in sent), "keys should spread over every partition"


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_is_really_used(shared: BrokerProcess, codec: str) -> None:
    topic = create_topic(shared.bootstrap, unique(f"codec-{codec}"), 1)
    records = [(b"k%d" % i, b"value %d " % i + b"abcdefgh" * 20) for i in range(2000)]
    with Producer(shared.bootstrap, {"compression.type": codec, "linger.ms": "50"}) as producer:
        for key, value in records:
            producer.send(topic, value, key=key, headers=[("h", b"%d" % len(value))])
    batches = dump_batches(shared.data_dir / f"{topic}_0")
    assert batches and {b["compression"] for b in batches} == {codec}
    assert sum(b["count"] for b in batches) == len(records)
    if codec != "none":
        assert sum(b["size"] for b in batches) < sum(len(v) for _, v in records) / 3
    got = read_all(shared.bootstrap, topic)[0]
    assert [(m.key(), m.value()) for m in got] == records
    assert [m.headers() for m in got[:2]] == [[("h", b"%d" % len(records[i][1]))] for i in range(2)]
    # kcat (librdkafka 2.0) reads the batches too
    out = kcat(shared.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\n").stdout
    assert out.decode().splitlines()[:3] == [f"{k.decode()}={v.decode()}" for k, v in records[:3]]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(shared: BrokerProcess, acks: str) -> None:
    topic = create_topic(shared.bootstrap, unique(f"acks{acks}"), 1)
    with Producer(shared.bootstrap, {"acks": acks}) as producer:
        futures = [producer.send(topic, b"%d" % i) for i in range(500)]
        producer.flush(TIMEOUT)
        offsets = [f.result(0).offset for f in futures]
        assert producer.idempotent is (acks != "0")
    if acks == "0":
        assert offsets == [-1] * 500  # the broker does not answer: offsets unknown
    else:
        assert offsets == list(range(500))
    assert values(read_all(shared.bootstrap, topic)[0]) == [b"%d" % i for i in range(500)]


def test_keys_headers_timestamps_and_explicit_partitions(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("fields"), 3)
    with Producer(shared.bootstrap) as producer:
        futures = [
            producer.send(
                topic,
                b"\x00\xff binary",
                key=b"\x01key",
                partition=2,
                timestamp=T0,
                headers=[("a", b"1"), ("a", b"2"), ("null", None), ("bin", b"\xff\x00")],
            ),
            producer.send(topic, None, key=b"tombstone", partition=2, timestamp=T0 + 1),
            producer.send(
                topic, "text é", key="str key", partition=0, timestamp=T0 + 2, headers={"map": "value"}
            ),
            producer.send(topic, b"", key=None, partition=1, timestamp=T0 + 3),
        ]
        metadata = [f.result(TIMEOUT) for f in futures]
    assert [(m.partition, m.offset, m.timestamp) for m in metadata] == [
        (2, 0, T0),
        (2, 1, T0 + 1),
        (0, 0, T0 + 2),
        (1, 0, T0 + 3),
    ]
    got = read_all(shared.bootstrap, topic, 3)
    first, tombstone = got[2]
    assert (first.key(), first.value(), first.timestamp()) == (b"\x01key", b"\x00\xff binary", (1, T0))
    assert first.headers() == [("a", b"1"), ("a", b"2"), ("null", None), ("bin", b"\xff\x00")]
    assert (tombstone.key(), tombstone.value()) == (b"tombstone", None)
    [text] = got[0]
    assert (text.key(), text.value(), text.headers()) == (b"str key", "text é".encode(), [("map", b"value")])
    [empty] = got[1]
    assert (empty.key(), empty.value(), empty.timestamp()[1]) == (None, b"", T0 + 3)


def test_str_key_without_a_partition_is_partitioned_like_its_utf8_bytes(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("strkey"), 3)
    with Producer(shared.bootstrap) as producer:
        producer.partitions_for(topic, timeout=TIMEOUT)  # metadata known: send takes its fast path
        keys = ["ключ", "key-1", "key-2", "key-3"]
        as_bytes = [producer.send(topic, "é" * 10, key=k.encode()).result(TIMEOUT) for k in keys]
        as_str = [producer.send(topic, "é" * 10, key=k).result(TIMEOUT) for k in keys]
    assert [m.partition for m in as_str] == [m.partition for m in as_bytes]
    got = read_all(shared.bootstrap, topic, 3)
    records = [r for partition in got.values() for r in partition]
    assert sorted(r.key() for r in records) == sorted(k.encode() for k in keys * 2)
    assert {r.value() for r in records} == {("é" * 10).encode()}


def test_log_append_time_topic_reports_the_broker_time(shared: BrokerProcess) -> None:
    configs = {"message.timestamp.type": "LogAppendTime"}
    topic = create_topic(shared.bootstrap, unique("lat"), 1, configs=configs)
    before = int(time.time() * 1000)
    with Producer(shared.bootstrap) as producer:
        metadata = producer.send(topic, b"v", timestamp=T0).result(TIMEOUT)
    assert metadata.timestamp != T0 and metadata.timestamp >= before - 1000


def test_partition_beyond_the_topic_fails_the_record(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("nopart"), 2)
    with Producer(shared.bootstrap) as producer:
        future = producer.send(topic, b"v", partition=5)
        with pytest.raises(BrokerResponseError) as raised:
            future.result(TIMEOUT)
        assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert producer.send(topic, b"ok", partition=1).result(TIMEOUT).partition == 1


def test_callbacks_and_concurrent_futures_helpers(shared: BrokerProcess) -> None:
    topic = unique("callbacks")  # auto-created on the first send
    reports: list[tuple[Any, Any]] = []
    done = threading.Event()
    with Producer(shared.bootstrap, max_request_size=10_000) as producer:
        futures = [
            producer.send(topic, b"%d" % i, on_delivery=lambda e, m: reports.append((e, m)))
            for i in range(100)
        ]
        too_big = producer.send(topic, b"x" * 20_000, on_delivery=lambda e, m: reports.append((e, m)))
        futures[-1].add_done_callback(lambda f: done.set())
        finished, not_done = concurrent.futures.wait(futures, timeout=TIMEOUT)
        assert not not_done and len(finished) == 100
        assert len(list(concurrent.futures.as_completed(futures, timeout=TIMEOUT))) == 100
        assert done.wait(TIMEOUT)
        waited = producer.send(topic, b"late")
        assert concurrent.futures.wait([waited], timeout=TIMEOUT).done == {waited}
    assert len(reports) == 101
    ok = [m for e, m in reports if e is None]
    assert sorted(m.offset for m in ok) == list(range(100)) and {m.topic for m in ok} == {topic}
    [(error, metadata)] = [(e, m) for e, m in reports if e is not None]
    assert metadata is None and isinstance(error, BrokerResponseError)
    assert error.code == ErrorCode.MESSAGE_TOO_LARGE
    assert too_big.exception(0) is error


def test_one_callback_for_many_records_runs_once_per_record_in_order(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("many-callbacks"), 3)
    reports: list[tuple[Any, Any]] = []
    waited: list[Any] = []

    def on_delivery(error: Any, metadata: Any) -> None:
        reports.append((error, metadata))

    with Producer(shared.bootstrap, linger_ms=20) as producer:
        futures = [
            producer.send(topic, b"%d" % i, b"k%d" % (i % 7), on_delivery=on_delivery) for i in range(20_000)
        ]
        for future in futures[::1000]:  # some also get a done-callback and a waiter of their own
            future.add_done_callback(waited.append)
        assert not concurrent.futures.wait(futures[::500], timeout=TIMEOUT).not_done
        assert producer.flush(TIMEOUT) == 0
    assert len(reports) == 20_000 and all(error is None for error, _ in reports)
    by_partition: dict[int, list[int]] = {}
    for _, metadata in reports:
        by_partition.setdefault(metadata.partition, []).append(metadata.offset)
    assert len(by_partition) == 3
    for offsets in by_partition.values():  # each partition's callbacks in offset order, none twice
        assert offsets == list(range(len(offsets)))
    results = {(r.partition, r.offset) for r in (f.result(0) for f in futures)}
    assert results == {(m.partition, m.offset) for _, m in reports} and len(results) == 20_000
    assert sorted(waited, key=futures.index) == futures[::1000]


def test_flush_and_close(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("flush"), 1)
    producer = Producer(shared.bootstrap, linger_ms=60_000)
    futures = [producer.send(topic, b"%d" % i) for i in range(10)]
    time.sleep(0.2)
    assert not any(f.done() for f in futures)  # lingering: nothing sent yet
    assert len(producer) == 10
    started = time.monotonic()
    assert producer.flush(TIMEOUT) == 0  # flush sends at once
    assert time.monotonic() - started < 10 and all(f.result(0).offset >= 0 for f in futures)
    more = [producer.send(topic, b"more%d" % i) for i in range(10)]
    producer.close()  # close delivers what is buffered
    assert [f.result(0).offset for f in more] == list(range(10, 20))
    with pytest.raises(ProducerClosedError):
        producer.send(topic, b"after close")
    producer.close()  # twice is fine


def test_large_batches_split_when_the_topic_limit_is_smaller(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("split"), 1, configs={"max.message.bytes": "20000"})
    with Producer(shared.bootstrap, linger_ms=100) as producer:
        futures = [producer.send(topic, b"%05d" % i + b"." * 200) for i in range(1000)]
        single = producer.send(topic, b"y" * 30_000)
        producer.flush(TIMEOUT)
        assert [f.result(0).offset for f in futures] == list(range(1000))
        with pytest.raises(BrokerResponseError) as raised:
            single.result(0)
        assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE
    batches = dump_batches(shared.data_dir / f"{topic}_0")
    assert len(batches) > 10 and all(b["size"] <= 20_000 for b in batches)
    assert [v[:5] for v in values(read_all(shared.bootstrap, topic)[0])] == [b"%05d" % i for i in range(1000)]


def test_custom_partitioner_by_import_path(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("custom"), 3)
    with Producer(shared.bootstrap, {"partitioner.class": "test_partitioner:LastPartitioner"}) as producer:
        assert {producer.send(topic, b"v", key=b"%d" % i).result(TIMEOUT).partition for i in range(20)} == {2}


# ------------------------------------------------------------------------------------------ failures


def test_unknown_topic_without_auto_create_fails_after_the_delivery_timeout(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    with Producer(broker.bootstrap, delivery_timeout_ms=1500, request_timeout_ms=1000) as producer:
        started = time.monotonic()
        future = producer.send("missing", b"v")
        assert not future.done()  # send does not block on metadata
        error = future.exception(TIMEOUT)
        assert 1.2 < time.monotonic() - started < 10
        assert isinstance(error, DeliveryTimeoutError)
        assert isinstance(error.cause, BrokerResponseError)
        assert error.cause.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(BrokerResponseError):
            producer.partitions_for("missing", timeout=1)


def read_values(bootstrap: str, topic: str) -> list[int]:
    return [int(v) for v in values(read_all(bootstrap, topic)[0])]


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "sigkill"])
def test_idempotent_producer_survives_broker_restarts_exactly_once(
    broker_factory: Any, clean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kctl.client.producer")
    broker: BrokerProcess = broker_factory({"num.partitions": "1"})
    topic = create_topic(broker.bootstrap, unique("exactly-once"), 1)
    total = 60_000
    progress = threading.Event()
    futures: list[RecordFuture] = []

    def produce(producer: Producer) -> None:
        for i in range(total):
            futures.append(producer.send(topic, b"%d" % i))
            if i == total // 4:
                progress.set()
            if i % 2000 == 0:
                time.sleep(0.01)  # spread the records over the restarts

    with Producer(broker.bootstrap, batch_size=16_384, retry_backoff_ms=50, linger_ms=2) as producer:
        thread = threading.Thread(target=produce, args=(producer,))
        thread.start()
        assert progress.wait(TIMEOUT)
        producer_id = producer.producer_id
        for _ in range(2):
            broker.restart(clean=clean)
            time.sleep(0.3)
        thread.join(TIMEOUT)
        assert producer.flush(60) == 0
        assert producer.producer_id == producer_id >= 0
    assert all(f.exception(0) is None for f in futures)
    offsets = [f.result(0).offset for f in futures]
    assert offsets == list(range(total))
    assert read_values(broker.bootstrap, topic) == list(range(total))
    batches = dump_batches(broker.data_dir / f"{topic}_0")
    assert {b["producer_id"] for b in batches} == {producer_id}
    assert any(r.message.startswith("retrying") for r in caplog.records), "no batch was ever resent"


def test_records_wait_for_a_broker_that_is_down(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory()
    topic = create_topic(broker.bootstrap, unique("down"), 1)
    with Producer(broker.bootstrap, retry_backoff_ms=50) as producer:
        assert producer.send(topic, b"0").result(TIMEOUT).offset == 0
        broker.stop()
        futures = [producer.send(topic, b"%d" % i) for i in range(1, 200)]
        time.sleep(1.0)
        assert not any(f.done() for f in futures)
        broker.start()
        assert producer.flush(TIMEOUT) == 0
        assert [f.result(0).offset for f in futures] == list(range(1, 200))


def test_close_with_a_timeout_fails_what_is_left(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory()
    topic = create_topic(broker.bootstrap, unique("abandon"), 1)
    producer = Producer(broker.bootstrap)
    producer.send(topic, b"first").result(TIMEOUT)
    broker.stop()
    future = producer.send(topic, b"never")
    started = time.monotonic()
    producer.close(timeout=0.5)
    assert time.monotonic() - started < 10
    assert isinstance(future.exception(0), ProducerClosedError)


def test_send_blocks_when_the_buffer_is_full(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory()
    topic = create_topic(broker.bootstrap, unique("backpressure"), 1)
    settings = {"batch_size": 16_384, "buffer_memory": 65_536, "max_block_ms": 500}
    with Producer(broker.bootstrap, **settings) as producer:
        # flowing: the buffer is reused as batches are acknowledged
        futures = [producer.send(topic, b"x" * 1000) for _ in range(3000)]
        assert producer.flush(TIMEOUT) == 0 and all(f.exception(0) is None for f in futures)
        broker.stop()
        sent = 0
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
            while sent < 1000:
                producer.send(topic, b"y" * 1000)
                sent += 1
        assert time.monotonic() - started >= 0.5
        assert 50 <= sent <= 80  # about buffer.memory / record size
        broker.start()
        assert producer.flush(TIMEOUT) == 0


def test_non_idempotent_producer_keeps_order(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory()
    topic = create_topic(broker.bootstrap, unique("plain"), 1)
    with Producer(
        broker.bootstrap, enable_idempotence=False, batch_size=8192, retry_backoff_ms=50
    ) as producer:
        futures = [producer.send(topic, b"%d" % i) for i in range(20_000)]
        broker.restart()
        assert producer.flush(TIMEOUT) == 0
        assert producer.idempotent is False and producer.producer_id == -1
    assert all(f.exception(0) is None for f in futures)
    got = read_values(broker.bootstrap, topic)
    # a batch in flight when the broker stopped may be written twice, never out of order
    first_seen = list(dict.fromkeys(got))
    assert first_seen == list(range(20_000))
    batches = dump_batches(broker.data_dir / f"{topic}_0")
    assert {b["producer_id"] for b in batches} == {-1}


def test_unreachable_bootstrap_server() -> None:
    with Producer("127.0.0.1:1") as producer, pytest.raises(KafkaConnectionError):
        producer.partitions_for("t", timeout=0.5)


def test_a_refused_batch_does_not_take_the_following_ones_with_it(shared: BrokerProcess) -> None:
    """Idempotence: a batch the broker refuses leaves a gap in the sequence numbers; the batches
    already in flight behind it are refused as out of order and must be resent (with a new epoch),
    not failed."""
    topic = create_topic(shared.bootstrap, unique("gap"), 1, configs={"max.message.bytes": "20000"})
    with Producer(shared.bootstrap, batch_size=4096, linger_ms=0) as producer:
        futures = []
        for i in range(3000):
            futures.append(producer.send(topic, b"%05d" % i + b"." * 200))
            if i == 1500:
                big = producer.send(topic, b"B" * 30_000)
        assert producer.flush(TIMEOUT) == 0
        epoch = producer.producer_epoch
    with pytest.raises(BrokerResponseError) as raised:
        big.result(0)
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert [f.exception(0) for f in futures] == [None] * 3000
    assert [v[:5] for v in values(read_all(shared.bootstrap, topic)[0])] == [b"%05d" % i for i in range(3000)]
    assert epoch >= 1  # the sequence numbers were reset


def test_partitions_led_by_different_brokers(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    """Two brokers (ZooKeeper mode): each Produce request goes to the leader of its partitions."""
    chroot = zookeeper.hosts + f"/kctl-producer-{uuid.uuid4().hex[:8]}"
    brokers = [
        BrokerProcess(tmp_path / f"b{i}", {"zookeeper.connect": chroot, "broker.id": str(i)}).start()
        for i in (1, 2)
    ]
    try:
        topic = unique("two-brokers")
        with AdminClient(brokers[0].bootstrap) as admin:
            [result] = admin.create_topics([NewTopic(topic, assignment={0: [1], 1: [2], 2: [1], 3: [2]})])
            assert result.ok, result
        with Producer(brokers[1].bootstrap) as producer:  # bootstraps from the second broker
            futures = [producer.send(topic, b"%d" % i, key=b"k%d" % i) for i in range(4000)]
            assert producer.flush(TIMEOUT) == 0
        placed: dict[int, list[bytes]] = {p: [] for p in range(4)}
        for i, future in enumerate(futures):
            placed[future.result(0).partition].append(b"%d" % i)
        got = read_all(brokers[0].bootstrap, topic, 4)
        assert {p: values(got[p]) for p in range(4)} == placed
        for partition, broker in ((0, brokers[0]), (1, brokers[1]), (2, brokers[0]), (3, brokers[1])):
            assert (broker.data_dir / f"{topic}_{partition}").is_dir()
            assert sum(b["count"] for b in dump_batches(broker.data_dir / f"{topic}_{partition}")) == len(
                placed[partition]
            )
    finally:
        for broker in brokers:
            broker.stop()


def test_a_record_over_max_request_size_fails_even_with_room_in_the_batch(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("toolarge"), 1)
    with Producer(shared.bootstrap, max_request_size=5000, linger_ms=1000) as producer:
        small = producer.send(topic, b"small")  # opens a batch with plenty of batch.size left
        big = producer.send(topic, b"x" * 6000)
        assert isinstance(big.exception(0), BrokerResponseError)
        assert big.exception(0).code == ErrorCode.MESSAGE_TOO_LARGE
        assert producer.flush(TIMEOUT) == 0
        assert small.result(0).offset == 0


def test_records_without_a_key_stick_to_a_partition_per_batch(shared: BrokerProcess) -> None:
    topic = create_topic(shared.bootstrap, unique("sticky"), 3)
    with Producer(shared.bootstrap, batch_size=2000, linger_ms=1000) as producer:
        futures = [producer.send(topic, b"%04d" % i + b"-" * 80) for i in range(600)]
        producer.flush(TIMEOUT)
    partitions = [f.result(0).partition for f in futures]
    runs = [p for i, p in enumerate(partitions) if i == 0 or p != partitions[i - 1]]
    assert len(runs) >= 10 and set(partitions) == {0, 1, 2}  # a new partition after each full batch
    assert min(partitions.count(p) for p in range(3)) > 30
    batches = [b for p in range(3) for b in dump_batches(shared.data_dir / f"{topic}_{p}")]
    assert all(b["count"] <= 20 for b in batches)  # ~2000-byte batches
