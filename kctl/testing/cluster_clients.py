"""Real clients against a `LocalCluster`, for fault-injection tests and cluster benchmarks.

- `create_topic`: CreateTopics through confluent-kafka's AdminClient (partitions, replication
  factor, topic configs), waited for.
- `SequencedProducer`: a confluent-kafka producer thread sending ``seq-<n>`` values and recording
  every delivery report (partition, offset, value) or error, until stopped.
- `kcat_produce`: one kcat run producing given values to one partition; True when kcat exited 0.
- `raw_produce`: one Produce request sent to one broker chosen by the test (not by metadata), with
  kctl's blocking connection: how a test asks a zombie leader to acknowledge a write.
- `read_partitions`: every record of a topic's partitions from the beginning to the high watermark,
  through a confluent-kafka consumer.
- `replica_batches`: a broker's copy of a partition, read with ``kctl log dump --deep -f jsonl``
  (the same tool users run), as comparable batch rows up to a given offset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.client.connection import BrokerConnection, parse_address
from kctl.protocol import ApiKey
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import encode_batch


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None = None,
    *,
    timeout: float = 30.0,
) -> None:
    """Create ``name``; raises the broker's error (confluent_kafka.KafkaException) if it refuses."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=dict(configs or {}))],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    futures[name].result(timeout=timeout)


@dataclass
class Delivery:
    partition: int
    offset: int
    value: str


@dataclass
class SequencedProducer:
    """Produce ``<prefix>-<n>`` (n = 0, 1, ...) to ``topic`` from a background thread."""

    bootstrap: str
    topic: str
    prefix: str = "seq"
    config: dict[str, Any] = field(default_factory=dict)
    partition: int | None = None
    rate_per_s: float = 400.0
    acked: list[Delivery] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.prefix}", daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "topic.metadata.refresh.interval.ms": 1000,
                **self.config,
            }
        )

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        # no lock: list.append is atomic, and a lock taken here could be left held by a test
        # timeout (pytest-timeout's signal) raised inside the callback, hanging the next one
        if error is not None:
            self.errors.append(f"{message.value().decode()}: {error}")
        else:
            self.acked.append(Delivery(message.partition(), message.offset(), message.value().decode()))

    def _run(self) -> None:
        interval = 1.0 / self.rate_per_s if self.rate_per_s > 0 else 0.0
        next_send = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.prefix}-{self.sent}".encode()
            kwargs: dict[str, Any] = {"value": value, "key": value, "on_delivery": self._on_delivery}
            if self.partition is not None:
                kwargs["partition"] = self.partition
            try:
                self.producer.produce(self.topic, **kwargs)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent += 1
            self.producer.poll(0)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> SequencedProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return len(self.acked)

    def wait_for_acks(self, count: int, timeout: float = 30.0) -> None:
        """Wait until ``count`` deliveries are acknowledged in all (polling, with a deadline)."""
        deadline = time.monotonic() + timeout
        while self.acked_count() < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"only {self.acked_count()} of {count} deliveries acknowledged after {timeout:.0f}s; "
                    f"errors: {self.errors[-5:]}"
                )
            time.sleep(0.05)

    def stop(self, flush_timeout: float = 120.0) -> None:
        """Stop producing and wait for every outstanding delivery report (again: a no-op)."""
        self._stop.set()
        self._thread.join()
        remaining = self.producer.flush(flush_timeout)
        if remaining:
            self.errors.append(f"{remaining} deliveries still outstanding after {flush_timeout:.0f}s")


def kcat_produce(
    bootstrap: str, topic: str, partition: int, values: list[str], *, rate_per_s: float = 500.0
) -> tuple[bool, str]:
    """Produce ``values`` (one per line, written to kcat's stdin at ``rate_per_s``) to one partition
    with kcat (acks=all, idempotent); (kcat exited 0 and reported no failed delivery, its stderr)."""
    process = subprocess.Popen(
        [
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-X",
            "acks=all",
            "-X",
            "enable.idempotence=true",
            "-X",
            "message.timeout.ms=120000",
            "-X",
            "topic.metadata.refresh.interval.ms=1000",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    chunk = max(1, int(rate_per_s / 20))
    next_write = time.monotonic()
    for start in range(0, len(values), chunk):
        process.stdin.write("".join(value + "\n" for value in values[start : start + chunk]))
        process.stdin.flush()
        next_write += chunk / rate_per_s
        time.sleep(max(0.0, next_write - time.monotonic()))  # pacing the input, not waiting for a state
    _, stderr = process.communicate(timeout=180)
    return process.returncode == 0 and "delivery failed" not in stderr.lower(), stderr


def read_partitions(
    bootstrap: str, topic: str, partitions: list[int], *, timeout: float = 60.0
) -> dict[int, list[tuple[int, str]]]:
    """Every record (offset, value) of each partition from offset 0 to the high watermark."""
    found = read_records(bootstrap, topic, partitions, timeout=timeout)
    return {
        partition: [(offset, (value or b"").decode()) for offset, _key, value in rows]
        for partition, rows in found.items()
    }


def read_records(
    bootstrap: str, topic: str, partitions: list[int], *, timeout: float = 60.0
) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Every record (offset, key, value) of each partition from offset 0 to the high watermark, as
    stored (an internal topic such as ``__consumer_offsets`` too)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{os.getpid()}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        ends = {p: _high_watermark(consumer, topic, p, timeout) for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        found: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {p: [] for p in partitions}
        positions = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to {positions} of {ends} in {timeout:.0f}s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {error}")
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            found[partition].append((offset, message.key(), message.value()))
            positions[partition] = offset + 1
        return found
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, topic: str, partition: int, timeout: float) -> int:
    return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)[1])


def high_watermarks(
    bootstrap: str, topic: str, partitions: list[int], timeout: float = 30.0
) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{os.getpid()}"})
    try:
        return {p: _high_watermark(consumer, topic, p, timeout) for p in partitions}
    finally:
        consumer.close()


BATCH_FIELDS = ("base_offset", "last_offset", "leader_epoch", "producer_id", "base_sequence", "crc")


def replica_batches(data_dir: Path, topic: str, partition: int, up_to: int) -> list[dict[str, Any]]:
    """The batches of ``data_dir/<topic>_<partition>`` that end below ``up_to`` (a high watermark),
    read with ``kctl log dump --deep -f jsonl``: offsets, leader epoch, producer, CRC and records."""
    directory = Path(data_dir) / f"{topic}_{partition}"
    if not directory.is_dir():
        return []
    result = subprocess.run(
        [sys.executable, "-m", "kctl", "log", "dump", str(directory), "--deep", "-f", "jsonl"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = []
    for line in result.stdout.splitlines():
        document = json.loads(line)
        if document.get("type") != "batch" or document["last_offset"] >= up_to:
            continue
        rows.append(
            {
                **{name: document[name] for name in BATCH_FIELDS},
                "records": [(r["offset"], r["key"], r["value"]) for r in document.get("records") or []],
            }
        )
    return rows


def raw_produce(
    address: str, topic: str, partition: int, values: list[str], *, acks: int = -1, timeout_ms: int = 5000
) -> tuple[int, int]:
    """Send one Produce request with ``values`` in one batch to the broker at ``address``;
    return the partition's (error_code, base_offset)."""
    host, port = parse_address(address)
    now_ms = int(time.time() * 1000)
    data = encode_batch([(now_ms, None, value.encode(), []) for value in values])
    body = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=data)])
        ],
    )
    with BrokerConnection(host, port, timeout=timeout_ms / 1000 + 10) as connection:
        version = connection.version_for(ApiKey.PRODUCE, min_version=3)
        response = connection.request(ApiKey.PRODUCE, body, version)
    assert response is not None, "a Produce with acks != 0 is answered"
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset
