"""Helpers the mirror's end-to-end tests share (tests/mirror/test_mirror_e2e.py, test_mirror_cluster.py):
`kctl` as a subprocess, a running `kctl mirror`, records read back with `kctl consume -f jsonl`,
confluent-kafka producing with keys, headers and timestamps, topics created and listed with
kctl.client. A cluster is given as a BrokerProcess or a bootstrap list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import confluent_kafka as ck

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.testing import BrokerProcess

T0 = 1_700_000_000_000
TIMEOUT = 120.0

Cluster = BrokerProcess | str


def bootstrap(cluster: Cluster) -> str:
    return cluster if isinstance(cluster, str) else cluster.bootstrap


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KCTL_BOOTSTRAP_SERVER", "KCTL_CLUSTERS")}
    return {**env, "COLUMNS": "200"}


def kctl(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(),
    )


def start_mirror(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kctl", "mirror", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )


def records(cluster: Cluster, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    """Per partition, in order: (key, value, headers, timestamp) read with `kctl consume -f jsonl`."""
    result = kctl(
        "consume", topic, "-b", bootstrap(cluster), "-o", "beginning", "--until", "end", "-f", "jsonl"
    )
    assert result.returncode == 0, result.stderr
    out: dict[int, list[tuple[Any, ...]]] = {}
    for line in result.stdout.splitlines():
        r = json.loads(line)
        out.setdefault(r["partition"], []).append(
            (r["key"], r["value"], tuple(map(tuple, r["headers"])), r["timestamp"], r["timestamp_type"])
        )
    return out


def produce(
    cluster: Cluster, topic: str, count: int, partitions: int, *, tag: str = "", compression: str = "lz4"
) -> None:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap(cluster), "compression.type": compression, "linger.ms": 5}
    )
    for i in range(count):
        producer.produce(
            topic,
            value=f"{tag}value-{i}".encode(),
            key=None if i % 7 == 0 else f"key-{i % 13}".encode(),
            partition=i % partitions,
            timestamp=T0 + i,
            headers=[("n", str(i).encode()), ("empty", b"")] if i % 3 == 0 else None,
        )
    assert producer.flush(30) == 0


def create(
    cluster: Cluster,
    topic: str,
    partitions: int,
    configs: dict[str, str] | None = None,
    replication_factor: int = 1,
) -> None:
    with AdminClient(bootstrap(cluster)) as admin:
        (result,) = admin.create_topics([NewTopic(topic, partitions, replication_factor, configs or {})])
        assert result.ok, result
        admin.cluster.wait_for_topics([topic])


def topics(cluster: Cluster) -> set[str]:
    with AdminClient(bootstrap(cluster)) as admin:
        return {t.name for t in admin.list_topics()}


def end_offsets(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    with AdminClient(bootstrap(cluster)) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: r.offset for tp, r in admin.list_offsets(tps, "latest").items()}
