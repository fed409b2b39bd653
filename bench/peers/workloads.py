"""The peer harness's measurements, each against one running broker (``brokers.Peer``), answering
``{metric: value}``. The raw load generator is bench_broker's: Produce and Fetch requests encoded once
and replayed over raw sockets, a few in flight per connection, only sizes and correlation ids looked at
(so it costs little per record); the real client is confluent-kafka. Broker CPU is read from /proc
around each measurement (``bench_broker.Meter``); records are counted from the log's end offsets
(produce) or from the known layout of a preloaded log (raw fetch), never from what the load generator
believes it sent.

Every measurement follows the peer's topology: a topic has ``peer.partitions`` partitions and
``peer.replication_factor`` replicas (with ``peer.topic_configs``), raw requests go to each partition's
leader (``peer.leaders``), produce uses ``peer.acks`` (1 on one broker, -1 = all on a cluster), and the
CPU and RSS figures are the peer's ``scope`` ("broker", or "cluster": its brokers summed)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import socket
import time
from collections import defaultdict
from dataclasses import dataclass

import bench_broker as bb

import kctl.protocol as kp

from .brokers import QUIET, Peer

PARTITIONS = bb.PARTITIONS
MB = 1e6
Address = tuple[str, int]


def new_topic(peer: Peer, topic: str) -> None:
    """Create ``topic`` with the peer's partitions, replication factor and topic configs."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": peer.bootstrap, **QUIET})
    spec = NewTopic(topic, peer.partitions, peer.replication_factor, config=dict(peer.topic_configs))
    for future in admin.create_topics([spec], operation_timeout=30).values():
        future.result(60)


def produce_request(topic: str, partition: int, batch: bytes, acks: int) -> object:
    request = bb.produce_request(topic, partition, batch)
    request.acks = acks
    return request


def produce_frame(topic: str, partition: int, batch: bytes, acks: int) -> bytearray:
    header = kp.RequestHeader(0, bb.PRODUCE_VERSION, 0, "bench")
    return bytearray(kp.encode_request(header, produce_request(topic, partition, batch, acks)))


def warm_produce(peer: Peer, topic: str, batch: bytes) -> None:
    """One batch to each partition's leader (``peer.acks``), retried until every partition accepts it."""
    deadline = time.monotonic() + 60
    for partition in range(peer.partitions):
        while True:
            address = peer.leaders(topic)[partition]
            request = produce_request(topic, partition, batch, peer.acks)
            response = bb.round_trip(address, 0, bb.PRODUCE_VERSION, request)
            code = response.responses[0].partition_responses[0].error_code
            if code == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{peer.name}: produce to {topic}/{partition} fails with error {code}")
            time.sleep(0.1)


def create_topic(peer: Peer, topic: str, warm_batch: bytes) -> None:
    """Create ``topic`` and produce one batch to each partition, retrying until every partition has a
    leader that accepts it (what the measurements then add is counted from the end offsets)."""
    new_topic(peer, topic)
    warm_produce(peer, topic, warm_batch)


def end_offsets(peer: Peer, topic: str) -> dict[int, int]:
    """Each partition's end offset (the high watermark) from its leader's ListOffsets answer."""
    offsets: dict[int, int] = {}
    for address in set(peer.leaders(topic).values()):
        offsets.update(bb.end_offsets(address, topic))  # non-leaders' NOT_LEADER answers are left out
    return offsets


def by_leader(peer: Peer, topic: str) -> dict[Address, list[int]]:
    """Partitions grouped by their leader's address."""
    groups: dict[Address, list[int]] = defaultdict(list)
    for partition, address in sorted(peer.leaders(topic).items()):
        groups[address].append(partition)
    return dict(groups)


def check_isr(peer: Peer, topic: str, what: str) -> None:
    """Say so when a replicated topic's ISR shrank (the figures would then be for fewer replicas)."""
    in_sync = getattr(peer, "in_sync", None)
    if in_sync is None or peer.replication_factor == 1:
        return
    sizes = in_sync(topic)
    short = {p: n for p, n in sizes.items() if n < peer.replication_factor}
    if short:
        print(f"#   {peer.name}: after {what}, ISR below {peer.replication_factor} for {short}", flush=True)


def replay(
    peer: Peer,
    connections: list[tuple[Address, list[bytearray]]],
    *,
    window: int,
    seconds: float,
    max_requests: int,
    label: str,
) -> bb.Run:
    """bench_broker's ``replay`` with an address per connection (each partition's leader): one
    ``pipeline`` thread per connection, timed from when all are connected to the last response, with
    the peer's CPU (all its brokers) and this process's over the same span."""
    return bb.replay_to(
        peer, connections, window=window, seconds=seconds, max_requests=max_requests, label=label
    )


def delete_topics(peer: Peer, topics: list[str]) -> None:
    """Delete ``topics`` (best effort: what a round produced is not kept on disk)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": peer.bootstrap, **QUIET})
    for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
        try:
            future.result(60)
        except Exception as error:
            print(f"#   {peer.name}: deleting {topic} failed: {error}", flush=True)


def _figures(peer: Peer, prefix: str, records: int, data_bytes: int, run: bb.Run) -> dict[str, float]:
    cpu = records / run.broker_cpu if run.broker_cpu > 0 else float("nan")
    return {
        f"{prefix} rec/s": records / run.seconds,
        f"{prefix} MB/s": data_bytes / MB / run.seconds,
        f"{prefix} rec/{peer.scope}-CPU-s": cpu,
    }


def produce_raw(peer: Peer, topic: str, record_size: int, seconds: float, max_bytes: int) -> dict[str, float]:
    """Batches of 100 records, one connection per partition to its leader, 4 requests in flight each,
    ``peer.acks``; records counted from the end offsets (high watermarks), so on a cluster only what
    was replicated counts."""
    batch = bb.build_batch(record_size, 100)
    before = sum(end_offsets(peer, topic).values())
    leaders = peer.leaders(topic)
    run = replay(
        peer,
        [(leaders[p], [produce_frame(topic, p, batch, peer.acks)]) for p in range(peer.partitions)],
        window=4,
        seconds=seconds,
        max_requests=max(1, max_bytes // len(batch) // peer.partitions),
        label="produce",
    )
    records = sum(end_offsets(peer, topic).values()) - before
    check_isr(peer, topic, "the raw produce")
    return _figures(peer, f"produce {_size(record_size)}, raw", records, records * record_size, run)


def produce_rdkafka(peer: Peer, topic: str, record_size: int, seconds: float) -> dict[str, float]:
    """confluent-kafka Producer (``peer.acks``, linger.ms=5, batch.size 1 MB) to partition 0 for
    ``seconds``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            "acks": peer.acks,
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
    before = end_offsets(peer, topic)[0]
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
    records = end_offsets(peer, topic)[0] - before
    check_isr(peer, topic, "the confluent-kafka produce")
    label = f"produce {_size(record_size)}, confluent-kafka"
    return _figures(peer, label, records, records * record_size, run)


@dataclass
class Preloaded:
    topic: str
    record_size: int
    records_per_batch: int
    batch_size: int
    batches: int  # per partition
    partitions: int

    @property
    def records(self) -> int:
        return self.batches * self.records_per_batch * self.partitions


def preload(peer: Peer, topic: str, record_size: int, partition_bytes: int) -> Preloaded:
    """``partition_bytes`` of batches of 100 records into each partition of a new topic (not timed),
    each partition's batches sent to its leader with ``peer.acks``."""
    batch = bb.build_batch(record_size, 100)
    batches = max(1, partition_bytes // len(batch))
    create_topic(peer, topic, batch)  # the first batch of each partition
    leaders = peer.leaders(topic)
    done = end_offsets(peer, topic)
    left = batches - min(done.values()) // 100
    if left > 0:
        replay(
            peer,
            [(leaders[p], [produce_frame(topic, p, batch, peer.acks)]) for p in range(peer.partitions)],
            window=4,
            seconds=1e9,
            max_requests=left,
            label="preload",
        )
    offsets = end_offsets(peer, topic)
    if any(offsets.get(p, 0) < batches * 100 for p in range(peer.partitions)):
        raise RuntimeError(f"{peer.name}: preload ended at {offsets}, expected {batches * 100} each")
    if any(offsets[p] != batches * 100 for p in range(peer.partitions)):  # Tansu answers one more
        print(f"#   {peer.name}: after the preload ListOffsets answers {offsets}, {batches * 100} expected")
    if peer.replication_factor > 1:
        spread = {f"{host}:{port}": parts for (host, port), parts in by_leader(peer, topic).items()}
        print(f"#   {peer.name}: {topic}'s partitions by leader: {spread}", flush=True)
        check_isr(peer, topic, "the preload")
    os.sync()
    # a consumer group's first coordinator lookup creates __consumer_offsets: one-time work kept out
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    warm = Consumer({"bootstrap.servers": peer.bootstrap, "group.id": "warm", "log.connection.close": False})
    warm.assign([KafkaTopicPartition(topic, 0, batches * 100)])
    warm.poll(1.0)
    warm.list_topics(timeout=10)
    warm.close()
    return Preloaded(topic, record_size, 100, len(batch), batches, peer.partitions)


def consume_raw(peer: Peer, log: Preloaded, passes: int, partition_max_bytes: int) -> dict[str, float]:
    """The preloaded log read ``passes`` times with pre-encoded Fetch requests, one connection per
    partition leader (each request asks for all the partitions that broker leads,
    ``partition_max_bytes`` per partition, 2 in flight); records = whole batches the responses carry
    by the log's known layout, MB/s = response bytes."""
    step = max(1, partition_max_bytes // log.batch_size)
    connections: list[tuple[Address, list[bytearray]]] = []
    records = 0
    for address, partitions in by_leader(peer, log.topic).items():
        frames = []
        for first in range(0, log.batches, step):
            offsets = {p: first * log.records_per_batch for p in partitions}
            frames.append(bb.fetch_frame(log.topic, offsets, partition_max_bytes))
            records += min(step, log.batches - first) * log.records_per_batch * len(partitions)
        _check_fetch(peer, address, frames[0], min(step, log.batches) * log.batch_size)
        connections.append((address, frames))
    run = replay(
        peer,
        connections,
        window=2,
        seconds=1e9,
        max_requests=passes * len(connections[0][1]),
        label="fetch",
    )
    label = f"fetch {_size(log.record_size)}, raw"
    return _figures(peer, label, passes * records, run.bytes_received, run)


def _check_fetch(peer: Peer, address: Address, frame: bytearray, whole: int) -> None:
    """The first request once, decoded: every partition answers with at least its whole batches."""
    header = kp.RequestHeader(1, bb.FETCH_VERSION, 1, "bench")
    frame = bytearray(frame)
    bb._INT32.pack_into(frame, 8, 1)
    with socket.create_connection(address) as sock:
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
    consumer.assign([KafkaTopicPartition(log.topic, p, 0) for p in range(log.partitions)])
    received = bb.drain_rdkafka(consumer, log.records, f"{peer.name}: the confluent-kafka consumer")
    run = meter.stop()
    consumer.close()
    label = f"fetch {_size(log.record_size)}, confluent-kafka"
    return _figures(peer, label, received, received * log.record_size, run)


def latency(peer: Peer, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """confluent-kafka Producer in another process (linger.ms=0, ``peer.acks``, 100 B records at
    ``rate``/s) to partition 0 of a new topic -> broker -> confluent-kafka Consumer here polling one
    message at a time (fetch.wait.max.ms at its default 500); each record carries its send time
    (time.perf_counter_ns, one host clock). On a cluster a record reaches the consumer once replicated
    (below the high watermark). Also the peer's CPU per record over the run."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    new_topic(peer, topic)
    warm = Producer({"bootstrap.servers": peer.bootstrap, "acks": peer.acks, "linger.ms": 0})
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
        target=bb._latency_producer, args=(peer.bootstrap, topic, rate, seconds, 100, peer.acks), daemon=True
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
        f"{prefix}: {peer.scope} CPU ms/record": 1000 * run.broker_cpu / max(1, len(latencies)),
    }


def _size(record_size: int) -> str:
    return f"{record_size} B" if record_size < 1024 else f"{record_size // 1024} KiB"


def rss(peer: Peer) -> dict[str, float]:
    now, peak = peer.rss()
    return {f"{peer.scope} RSS MB": now, f"{peer.scope} peak RSS MB": peak, **peer.extra_figures()}
