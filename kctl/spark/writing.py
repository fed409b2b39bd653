"""Writing rows to kctl topics from a Spark task, with a ``kctl.client.Producer``.

Rows are those Spark's Kafka sink takes: ``value`` (binary or string, required), and optionally
``key``, ``topic`` (required unless the ``topic`` option is given, which wins, as in Spark),
``partition`` and ``headers`` (an array of ``(key string, value binary)`` structs). A task ends only
when each of its records is acknowledged; a record that fails to be delivered fails the task (Spark
then retries it or fails the job), so a successful write has every row in the topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kctl.client import Producer, ProducerConfig
from kctl.spark.options import SourceOptionError, SourceOptions

__all__ = ["DeliveryFailedError", "OutgoingRecord", "WriteResult", "producer_config", "write_records"]

MAX_PENDING = 50_000
"""Records sent but not acknowledged before the task waits for the oldest ones (bounded memory)."""


class DeliveryFailedError(RuntimeError):
    """A record could not be delivered (the message says which error)."""


@dataclass(frozen=True)
class OutgoingRecord:
    """One row to produce, as the data source's writers hand it over."""

    value: bytes | str | None
    key: bytes | str | None = None
    topic: str | None = None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None


@dataclass(frozen=True)
class WriteResult:
    """What one task wrote: records per topic."""

    records: Mapping[str, int]


def producer_config(options: SourceOptions) -> ProducerConfig:
    """A ``ProducerConfig`` from the ``kafka.``-prefixed options (consumer-only properties left out)."""
    known = ProducerConfig.known_keys()
    properties = {k: v for k, v in options.client_properties.items() if k in known}
    return ProducerConfig.coerce(properties)


def record_from_row(row: Mapping[str, Any]) -> OutgoingRecord:
    """An ``OutgoingRecord`` from a row's fields (a ``Row.asDict()``; missing columns are None)."""
    headers = row.get("headers")
    pairs = None
    if headers:
        pairs = [(h["key"], h["value"]) if isinstance(h, Mapping) else (h[0], h[1]) for h in headers]
    value = row.get("value")
    key = row.get("key")
    return OutgoingRecord(
        value=bytes(value) if isinstance(value, bytearray | memoryview) else value,
        key=bytes(key) if isinstance(key, bytearray | memoryview) else key,
        topic=row.get("topic"),
        partition=row.get("partition"),
        headers=[(k, bytes(v) if isinstance(v, bytearray | memoryview) else v) for k, v in pairs]
        if pairs
        else None,
    )


def _check(futures: list[Future[Any]]) -> None:
    for future in futures:
        error = future.exception()
        if error is not None:
            raise DeliveryFailedError(f"a record was not delivered: {error}") from error
    futures.clear()


def write_records(options: SourceOptions, records: Iterable[OutgoingRecord]) -> WriteResult:
    """Produce ``records``; returns once all are acknowledged, raises ``DeliveryFailedError`` at the
    first that is not, and ``SourceOptionError`` for a row without a topic."""
    counts: dict[str, int] = {}
    futures: list[Future[Any]] = []
    with Producer(options.bootstrap_servers, producer_config(options)) as producer:
        for record in records:
            topic = options.topic or record.topic
            if not topic:
                raise SourceOptionError("a row has no topic: give the option topic or a topic column")
            futures.append(
                producer.send(
                    topic, record.value, key=record.key, headers=record.headers, partition=record.partition
                )
            )
            counts[topic] = counts.get(topic, 0) + 1
            if len(futures) >= MAX_PENDING:
                _check(futures)
        producer.flush()
        _check(futures)
    return WriteResult(counts)
