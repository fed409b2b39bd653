"""Hanging transactions, as ``kafka-transactions.sh`` finds and ends them.

A transaction *hangs* on a partition when the partition's leader holds it open (its producer has a
current transaction start offset, so the last stable offset cannot pass it) but no coordinator will
ever write its marker: no transactional id has its producer id any more, or the id's coordinator
does not count the partition in its transaction (a produce that reached the partition after the
transaction ended, or a partition never added). read_committed consumers of the partition are stuck
at its start offset until someone writes the ABORT marker by hand.

* ``find_hanging_transactions`` — the search of ``kafka-transactions.sh find-hanging``: the
  partitions of a topic (or one partition), or those with a replica on a broker; their producers
  with a transaction open longer than the longest transaction timeout (DescribeProducers); those
  whose producer id no coordinator lists (ListTransactions) or whose transaction does not name the
  partition (DescribeTransactions).
* ``abort_plan`` — the ABORT marker that ends the transaction starting at an offset of a partition
  (``kafka-transactions.sh abort --start-offset``), from the leader's producer state; written with
  ``AdminClient.abort_transaction``.

::

    found = find_hanging_transactions(admin, topic="orders", max_transaction_timeout_ms=0)
    for hanging in found.hanging:
        admin.abort_transaction(hanging.abort_spec)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kctl.client.admin.transactions import AbortTransactionSpec, ActiveProducer, PartitionProducers
from kctl.client.errors import BrokerResponseError
from kctl.client.types import TopicPartition
from kctl.protocol.errors import ErrorCode, error_name

if TYPE_CHECKING:
    from kctl.client.admin.client import AdminClient

__all__ = [
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "HangingSearch",
    "HangingTransaction",
    "NoSuchPartitionError",
    "NoTransactionError",
    "abort_plan",
    "check_partition",
    "find_hanging_transactions",
    "spec_of",
    "spec_of_ids",
]

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60_000
"""Kafka's default ``transaction.max.timeout.ms`` (and the tool's --max-transaction-timeout, 15 min)."""


class NoSuchPartitionError(Exception):
    """A topic or partition to search or abort on does not exist."""


class NoTransactionError(Exception):
    """No producer of the partition has an open transaction starting at the offset named."""


@dataclasses.dataclass(frozen=True)
class HangingTransaction:
    """An open transaction on a partition that no coordinator will end, and how long its producer
    has been silent there (``duration_ms``: now minus the timestamp of its last batch)."""

    producer: ActiveProducer
    duration_ms: int

    @property
    def abort_spec(self) -> AbortTransactionSpec:
        return spec_of(self.producer)

    def row(self) -> dict[str, Any]:
        p = self.producer
        return {
            "topic": p.topic_partition.topic,
            "partition": p.topic_partition.partition,
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch,
            "start_offset": p.current_txn_start_offset,
            "last_timestamp": p.last_timestamp,
            "duration_min": self.duration_ms // 60_000,
        }


@dataclasses.dataclass(frozen=True)
class HangingSearch:
    """What ``find_hanging_transactions`` found, and the partitions whose leader could not say
    (their ``PartitionProducers`` with the error): the search is incomplete when there are any."""

    hanging: tuple[HangingTransaction, ...]
    searched: tuple[TopicPartition, ...]
    failed: tuple[PartitionProducers, ...] = ()


def spec_of(producer: ActiveProducer) -> AbortTransactionSpec:
    """The ABORT marker for ``producer``'s open transaction."""
    return spec_of_ids(
        producer.topic_partition, producer.producer_id, producer.producer_epoch, producer.coordinator_epoch
    )


def spec_of_ids(
    topic_partition: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> AbortTransactionSpec:
    """The ABORT marker for a producer's transaction on a partition. A producer whose transaction
    hung before any marker was written to the partition has coordinator epoch -1: it is stamped 0,
    which no partition refuses (as Kafka's tool does)."""
    return AbortTransactionSpec(topic_partition, producer_id, producer_epoch, max(coordinator_epoch, 0))


def check_partition(admin: AdminClient, topic_partition: TopicPartition) -> None:
    """Raise ``NoSuchPartitionError`` unless the partition exists."""
    tp = topic_partition
    [description] = admin.describe_topics([tp.topic])
    if description.error_code:
        raise NoSuchPartitionError(f"topic {tp.topic!r}: {error_name(description.error_code)}")
    if tp.partition not in {p.partition for p in description.partitions}:
        raise NoSuchPartitionError(f"topic {tp.topic!r} has no partition {tp.partition}")


def _partitions(
    admin: AdminClient, topic: str | None, partition: int | None, broker_id: int | None
) -> list[TopicPartition]:
    """The partitions to search: ``topic``'s (or only ``partition`` of it), or every topic's, keeping
    those with a replica on ``broker_id`` when given."""
    if topic is not None:
        [description] = admin.describe_topics([topic])
        if description.error_code:
            raise NoSuchPartitionError(f"topic {topic!r}: {error_name(description.error_code)}")
        infos = list(description.partitions)
        if partition is not None:
            infos = [p for p in infos if p.partition == partition]
            if not infos:
                raise NoSuchPartitionError(f"topic {topic!r} has no partition {partition}")
        by_topic = {topic: infos}
    else:
        by_topic = {t.name: list(t.partitions) for t in admin.list_topics()}
    return [
        TopicPartition(name, p.partition)
        for name, infos in sorted(by_topic.items())
        for p in infos
        if broker_id is None or broker_id in p.replicas
    ]


def find_hanging_transactions(
    admin: AdminClient,
    *,
    topic: str | None = None,
    partition: int | None = None,
    broker_id: int | None = None,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> HangingSearch:
    """The hanging transactions of ``topic`` (or its ``partition``), or of the partitions with a
    replica on ``broker_id`` (at least one of the two is needed). Only transactions whose producer
    wrote its last batch more than ``max_transaction_timeout_ms`` before ``now_ms`` are candidates:
    a younger one may still be ended by its coordinator. Raises ``NoSuchPartitionError`` for a
    topic or partition that does not exist, ``ValueError`` for a search without a scope."""
    if topic is None and broker_id is None:
        raise ValueError("the search needs a topic or a broker id")
    if partition is not None and topic is None:
        raise ValueError("a partition needs its topic")
    searched = _partitions(admin, topic, partition, broker_id)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    described = admin.describe_producers(searched) if searched else {}
    failed = tuple(r for r in described.values() if r.error_code)
    candidates = [
        producer
        for result in described.values()
        for producer in result.producers
        if producer.current_txn_start_offset >= 0
        and now - producer.last_timestamp > max_transaction_timeout_ms
    ]
    hanging = [HangingTransaction(p, now - p.last_timestamp) for p in _without_coordinator(admin, candidates)]
    hanging.sort(key=lambda h: (h.producer.topic_partition, h.producer.producer_id))
    return HangingSearch(tuple(hanging), tuple(searched), failed)


def _without_coordinator(admin: AdminClient, candidates: Sequence[ActiveProducer]) -> list[ActiveProducer]:
    """The open transactions among ``candidates`` that no coordinator will end: their producer id
    is no transactional id's, or its transaction does not name their partition."""
    if not candidates:
        return []
    producer_ids = {p.producer_id for p in candidates}
    listings = admin.list_transactions(producer_ids=sorted(producer_ids))
    transactional_ids = {t.producer_id: t.transactional_id for t in listings if t.producer_id in producer_ids}
    partitions_of: dict[str, set[TopicPartition] | None] = {}
    for d in admin.describe_transactions(sorted(set(transactional_ids.values()))):
        if d.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            partitions_of[d.transactional_id] = None
        elif d.error_code:
            raise BrokerResponseError(d.error_code, context=f"transactional id {d.transactional_id!r}")
        else:
            partitions_of[d.transactional_id] = set(d.topic_partitions)
    out = []
    for producer in candidates:
        tid = transactional_ids.get(producer.producer_id)
        in_transaction = partitions_of.get(tid) if tid is not None else None
        if in_transaction is None or producer.topic_partition not in in_transaction:
            out.append(producer)
    return out


def abort_plan(
    admin: AdminClient, topic_partition: TopicPartition, start_offset: int
) -> AbortTransactionSpec:
    """The ABORT marker ending the open transaction that starts at ``start_offset`` of the
    partition, from its leader's producer state (DescribeProducers). Raises
    ``NoSuchPartitionError``, ``NoTransactionError``, or ``BrokerResponseError`` for the leader's
    error."""
    tp = TopicPartition(*topic_partition)
    check_partition(admin, tp)
    result = admin.describe_producers([tp])[tp]
    if result.error_code:
        raise BrokerResponseError(result.error_code, result.error_message, context=f"producers of {tp}")
    for producer in result.producers:
        if producer.current_txn_start_offset == start_offset:
            return spec_of(producer)
    raise NoTransactionError(f"no open transaction starts at offset {start_offset} of {tp}")
