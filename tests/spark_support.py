"""Helpers the Spark test modules share: PySpark or a skip (never a skip under CI, where the test
command installs the ``spark`` extra), one SparkSession per module, and topics filled with records
whose every field is known."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kctl.client import AdminClient, NewTopic, Producer


def require_pyspark() -> None:
    """Skip the module without PySpark, except under CI (there a missing extra must fail)."""
    if os.environ.get("CI"):
        import pyspark  # noqa: F401
    else:
        pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[test,spark]'")


def module_session(conf: dict[str, str] | None = None) -> Iterator[Any]:
    """One local[2] SparkSession for a test module (small shuffles, no UI), stopped at its end."""
    from kctl.spark.session import spark_session

    settings = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    spark = spark_session("local[2]", "kctl-tests", settings | (conf or {}))
    yield spark
    spark.stop()


@dataclass(frozen=True)
class Sent:
    """A record the test produced, with where it landed."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]


BASE_TIMESTAMP = 1_700_000_000_000


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    with AdminClient(bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, 1, configs or {})])
        assert result.ok, result


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, *, start: int = 0) -> list[Sent]:
    """``per_partition`` records into each partition, numbered from ``start`` (keys, values,
    timestamps and headers derived from the partition and number)."""
    sent: list[Sent] = []
    with Producer(bootstrap, {"linger.ms": "5"}) as producer:
        futures = []
        for p in range(partitions):
            for i in range(start, start + per_partition):
                key = f"k{p}-{i}".encode()
                value = f"value {p}-{i}".encode()
                ts = BASE_TIMESTAMP + p * 1_000_000 + i * 1000
                headers = (("n", str(i).encode()), ("p", str(p).encode()))
                future = producer.send(
                    topic, value, key=key, partition=p, timestamp=ts, headers=list(headers)
                )
                futures.append((future, key, value, ts, headers))
        producer.flush()
        for future, key, value, ts, headers in futures:
            md = future.result()
            sent.append(Sent(md.topic, md.partition, md.offset, key, value, ts, headers))
    return sent
