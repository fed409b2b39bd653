"""The peer harness's measurements, each against one running broker (``brokers.Peer``), answering
``{metric: value}``. The raw load generator is bench_broker's: Produce and Fetch requests encoded once
and replayed over raw sockets, a few in flight per connection, only sizes and correlation ids looked at
(so it costs little per record); the real client is confluent-kafka. Broker CPU is read from /proc
around each measurement (``bench_broker.Meter``); records are counted from the log's end offsets
(produce) or from the known layout of a preloaded log (raw fetch), never from what the load generator
believes it sent."""

from __future__ import annotations

import gc
import multiprocessing
import os
import socket
import time
from dataclasses import dataclass

import bench_broker as bb

import kctl.protocol as kp

from .brokers import Peer

PARTITIONS = bb.PARTITIONS
MB = 1e6


def create_topic(peer: Peer, topic: str, warm_batch: bytes) -> None:
    """Create ``topic`` (PARTITIONS partitions, RF 1) and produce one batch to each partition, retrying
    until every partition has a leader that accepts it (what the measurements then add is counted from
    the end offsets)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30).values():
        future.result(60)
    deadline = time.monotonic() + 60
    for partition in range(PARTITIONS):
        while True:
            request = bb.produce_request(topic, partition, warm_batch)
            response = bb.round_trip(peer.address, 0, bb.PRODUCE_VERSION, request)
            code = response.responses[0].partition_responses[0].error_code
            if code == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{peer.name}: produce to {topic}/{partition} fails with error {code}")
            time.sleep(0.1)


def delete_topics(peer: Peer, topics: list[str]) -> None:
    """Delete ``topics`` (best effort: what a round produced is not kept on disk)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
        try:
            future.result(60)
        except Exception as error:
            print(f"#   {peer.name}: deleting {topic} failed: {error}", flush=True)


def _figures(prefix: str, records: int, data_bytes: int, run: bb.Run) -> dict[str, float]:
    return {
        f"{prefix} rec/s": records / run.seconds,
        f"{prefix} MB/s": data_bytes / MB / run.seconds,
        f"{prefix} rec/broker-CPU-s": records / run.broker_cpu if run.broker_cpu > 0 else float("nan"),
    }


def produce_raw(peer: Peer, topic: str, record_size: int, seconds: float, max_bytes: int) -> dict[str, float]:
    """Batches of 100 records, one connection per partition, 4 requests in flight each, acks=1."""
    batch = bb.build_batch(record_size, 100)
    before = sum(bb.end_offsets(peer.address, topic).values())
    run = bb.replay(
        peer,  # type: ignore[arg-type]
        [[bb.produce_frame(topic, p, batch)] for p in range(PARTITIONS)],
        window=4,
        seconds=seconds,
        max_requests=max(1, max_bytes // len(batch) // PARTITIONS),
        label="produce",
    )
    records = sum(bb.end_offsets(peer.address, topic).values()) - before
    return _figures(f"produce {_size(record_size)}, raw", records, records * record_size, run)


def produce_rdkafka(peer: Peer, topic: str, record_size: int, seconds: float) -> dict[str, float]:
    """confluent-kafka Producer (acks=1, linger.ms=5, batch.size 1 MB) to partition 0 for ``seconds``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1000000,
            "queue.buffering.max.messages": 2000000,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024,
            "log.connection.close": False,
        }
    )
    value = os.urandom(record_size)
    producer.produce(topic, value, partition=0)
    producer.flush(30)
    before = bb.end_offsets(peer.address, topic)[0]
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    meter = bb.Meter(peer, "rdkafka")  # type: ignore[arg-type]
    deadline = clock() + seconds
    sent = 0
    while True:
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.001)
            continue
        sent += 1
        if not sent & 1023:
            poll(0)
            if clock() >= deadline:
                break
    producer.flush(60)
    run = meter.stop()
    del producer, produce, poll
    gc.collect()
    records = bb.end_offsets(peer.address, topic)[0] - before
    return _figures(f"produce {_size(record_size)}, confluent-kafka", records, records * record_size, run)


@dataclass
class Preloaded:
    topic: str
    record_size: int
    records_per_batch: int
    batch_size: int
    batches: int  # per partition

    @property
    def records(self) -> int:
        return self.batches * self.records_per_batch * PARTITIONS


def preload(peer: Peer, topic: str, record_size: int, partition_bytes: int) -> Preloaded:
    """``partition_bytes`` of batches of 100 records into each partition of a new topic (not timed)."""
    batch = bb.build_batch(record_size, 100)
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30).values():
        future.result(60)
    batches = max(1, partition_bytes // len(batch))
    deadline = time.monotonic() + 60
    while sum(bb.end_offsets(peer.address, topic).values()) == 0:  # the first batch needs leaders
        for p in range(PARTITIONS):
            request = bb.produce_request(topic, p, batch)
            if (
                bb.round_trip(peer.address, 0, bb.PRODUCE_VERSION, request)
                .responses[0]
                .partition_responses[0]
                .error_code
            ):
                break
        else:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{peer.name}: cannot produce to {topic}")
        time.sleep(0.1)
    done = bb.end_offsets(peer.address, topic)
    left = batches - min(done.values()) // 100
    if left > 0:
        bb.replay(
            peer,  # type: ignore[arg-type]
            [[bb.produce_frame(topic, p, batch)] for p in range(PARTITIONS)],
            window=4,
            seconds=1e9,
            max_requests=left,
            label="preload",
        )
    offsets = bb.end_offsets(peer.address, topic)
    if any(offsets.get(p, 0) < batches * 100 for p in range(PARTITIONS)):
        raise RuntimeError(f"{peer.name}: preload ended at {offsets}, expected {batches * 100} each")
    if any(offsets[p] != batches * 100 for p in range(PARTITIONS)):  # Tansu answers one more
        print(f"#   {peer.name}: after the preload ListOffsets answers {offsets}, {batches * 100} expected")
    os.sync()
    # a consumer group's first coordinator lookup creates __consumer_offsets: one-time work kept out
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    warm = Consumer({"bootstrap.servers": peer.bootstrap, "group.id": "warm", "log.connection.close": False})
    warm.assign([KafkaTopicPartition(topic, 0, batches * 100)])
    warm.poll(1.0)
    warm.list_topics(timeout=10)
    warm.close()
    return Preloaded(topic, record_size, 100, len(batch), batches)


def consume_raw(peer: Peer, log: Preloaded, passes: int, partition_max_bytes: int) -> dict[str, float]:
    """The preloaded log read ``passes`` times with pre-encoded Fetch requests (every partition in each,
    ``partition_max_bytes`` per partition, 2 in flight on one connection); records = whole batches the
    responses carry by the log's known layout, MB/s = response bytes."""
    step = max(1, partition_max_bytes // log.batch_size)
    frames, records = [], 0
    for first in range(0, log.batches, step):
        offsets = {p: first * log.records_per_batch for p in range(PARTITIONS)}
        frames.append(bb.fetch_frame(log.topic, offsets, partition_max_bytes))
        records += min(step, log.batches - first) * log.records_per_batch * PARTITIONS
    _check_fetch(peer, frames[0], min(step, log.batches) * log.batch_size)
    run = bb.replay(
        peer,  # type: ignore[arg-type]
        [frames],
        window=2,
        seconds=1e9,
        max_requests=passes * len(frames),
        label="fetch",
    )
    figures = _figures(f"fetch {_size(log.record_size)}, raw", passes * records, run.bytes_received, run)
    return figures


def _check_fetch(peer: Peer, frame: bytearray, whole: int) -> None:
    """The first request once, decoded: every partition answers with at least its whole batches."""
    header = kp.RequestHeader(1, bb.FETCH_VERSION, 1, "bench")
    frame = bytearray(frame)
    bb._INT32.pack_into(frame, 8, 1)
    with socket.create_connection(peer.address) as sock:
        sock.sendall(frame)
        size = bb._INT32.unpack(bb.recv_exactly(sock, 4))[0]
        response = kp.decode_response(header, bb.recv_exactly(sock, size))[1]
    for topic in response.responses:
        for part in topic.partitions:
            got = len(part.records or b"")
            if part.error_code or got < whole:
                raise RuntimeError(
                    f"{peer.name}: fetch check: partition {part.partition_index}: error "
                    f"{part.error_code}, {got} bytes, expected {whole}"
                )


def consume_rdkafka(peer: Peer, log: Preloaded, group: str) -> dict[str, float]:
    """confluent-kafka Consumer, assign() at offset 0 of every partition, ``queued.min.messages`` raised
    so its prefetch is not the limit; the whole preloaded log, messages counted."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    config = {
        "bootstrap.servers": peer.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": bb.FETCH_MAX_BYTES,
        "max.partition.fetch.bytes": bb.PARTITION_MAX_BYTES,
        "receive.message.max.bytes": bb.FETCH_MAX_BYTES + 10 * bb.MIB,
        "queued.min.messages": 1000000,
        "queued.max.messages.kbytes": 512 * 1024,
        "log.connection.close": False,
    }
    consumer = Consumer(config)
    meter = bb.Meter(peer, "rdkafka-fetch")  # type: ignore[arg-type]
    consumer.assign([KafkaTopicPartition(log.topic, p, 0) for p in range(PARTITIONS)])
    received = bb.drain_rdkafka(consumer, log.records, f"{peer.name}: the confluent-kafka consumer")
    run = meter.stop()
    consumer.close()
    return _figures(
        f"fetch {_size(log.record_size)}, confluent-kafka", received, received * log.record_size, run
    )


def latency(peer: Peer, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """confluent-kafka Producer in another process (linger.ms=0, acks=1, 100 B records at ``rate``/s)
    -> broker -> confluent-kafka Consumer here polling one message at a time (fetch.wait.max.ms at its
    default 500); each record carries its send time (time.perf_counter_ns, one host clock). Also the
    broker's CPU per record over the run."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    warm = Producer({"bootstrap.servers": peer.bootstrap, "acks": 1, "linger.ms": 0})
    warm.produce(topic, bb._STAMP.pack(-2, 0), partition=0)
    warm.flush(30)
    del warm
    consumer = Consumer(
        {
            "bootstrap.servers": peer.bootstrap,
            "group.id": f"latency-{topic}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "log.connection.close": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    message = consumer.poll(30)
    if message is None or message.error():
        raise RuntimeError(f"{peer.name}: latency warm-up record did not arrive")
    latencies: list[float] = []
    child = multiprocessing.get_context("spawn").Process(
        target=bb._latency_producer, args=(peer.bootstrap, topic, rate, seconds, 100), daemon=True
    )
    meter = bb.Meter(peer, "latency")  # type: ignore[arg-type]
    child.start()
    deadline = time.perf_counter() + seconds + 60
    poll = consumer.poll
    while time.perf_counter() < deadline:
        message = poll(1.0)
        now = time.perf_counter_ns()
        if message is None or message.error():
            continue
        sequence, sent = bb._STAMP.unpack_from(message.value())
        if sequence == -1:
            break
        if sequence >= 0:
            latencies.append((now - sent) / 1e6)
    run = meter.stop()
    consumer.close()
    child.join(30)
    latencies.sort()
    expected = int(rate * seconds)
    if len(latencies) != expected:
        print(f"#   {peer.name}: latency: received {len(latencies)} of {expected} records")
    prefix = f"e2e latency at {rate} rec/s"
    return {
        f"{prefix}: p50 ms": bb.percentile(latencies, 0.5),
        f"{prefix}: p99 ms": bb.percentile(latencies, 0.99),
        f"{prefix}: p99.9 ms": bb.percentile(latencies, 0.999),
        f"{prefix}: broker CPU ms/record": 1000 * run.broker_cpu / max(1, len(latencies)),
    }


def _size(record_size: int) -> str:
    return f"{record_size} B" if record_size < 1024 else f"{record_size // 1024} KiB"


def rss(peer: Peer) -> dict[str, float]:
    now, peak = peer.rss()
    return {"broker RSS MB": now, "broker peak RSS MB": peak}
