"""Producer and transaction admin calls: the active producers of partitions (DescribeProducers, to
each partition's leader, as ``kafka-transactions.sh describe-producers``), the transactions of
the cluster (ListTransactions, to every broker; DescribeTransactions, to each transactional id's
coordinator), and aborting one partition's open transaction (WriteTxnMarkers with an ABORT marker,
to the partition's leader, as Kafka's admin client does for ``kafka-transactions.sh abort``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kctl.client.admin.base import AdminBase, Outcome
from kctl.client.cluster import Deadline
from kctl.client.errors import BrokerResponseError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersTopicRequest
from kctl.protocol.messages.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

TRANSACTION_KEY_TYPE = 1


@dataclass(frozen=True)
class ActiveProducer:
    """One producer of a partition, as its leader's producer state holds it."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int

    def row(self) -> dict[str, Any]:
        return {
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "last_sequence": self.last_sequence,
            "last_timestamp": self.last_timestamp,
            "coordinator_epoch": self.coordinator_epoch,
            "current_txn_start_offset": self.current_txn_start_offset,
        }


@dataclass(frozen=True)
class PartitionProducers:
    """The producers of one partition, or the error its leader answered."""

    topic_partition: TopicPartition
    producers: tuple[ActiveProducer, ...] = ()
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class AbortTransactionSpec:
    """What an ABORT marker for one partition carries (Kafka's ``AbortTransactionSpec``): the
    producer whose transaction it ends, its epoch, and the coordinator epoch to stamp it with (the
    partition refuses one older than the last marker's)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    broker_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    error_code: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    topic_partitions: tuple[TopicPartition, ...] = ()


class TransactionAdmin(AdminBase):
    """Producers and transactions (see the module docstring)."""

    def describe_producers(
        self, topic_partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionProducers]:
        """The active producers of each partition, asked of its leader."""
        items = {TopicPartition(*tp): None for tp in topic_partitions}
        if not items:
            return {}
        deadline = self._deadline(timeout)

        def build(
            group: dict[TopicPartition, None], version: int, deadline: Deadline
        ) -> DescribeProducersRequest:
            by_topic: dict[str, list[int]] = {}
            for tp in group:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            return DescribeProducersRequest(
                topics=[
                    DescribeProducersTopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()
                ]
            )

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            out = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    producers = tuple(
                        ActiveProducer(
                            tp,
                            s.producer_id,
                            s.producer_epoch,
                            s.last_sequence,
                            s.last_timestamp,
                            s.coordinator_epoch,
                            s.current_txn_start_offset,
                        )
                        for s in p.active_producers
                    )
                    out[tp] = Outcome(p.error_code, p.error_message, producers)
            return out

        outcomes = self._per_leader(items, ApiKey.DESCRIBE_PRODUCERS, build, parse, deadline)
        return {
            tp: PartitionProducers(
                tp,
                tuple(outcomes[tp].payload or ()) if not outcomes[tp].error_code else (),
                outcomes[tp].error_code,
                outcomes[tp].error_message,
            )
            for tp in items
        }

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        """The transactions every broker coordinates (ListTransactions, to each broker)."""
        deadline = self._deadline(timeout)
        brokers = sorted(
            b.node_id for b in self.cluster.refresh_metadata([], deadline=deadline).brokers.values()
        )
        request = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids))

        def ask(broker_id: int) -> list[TransactionListing]:
            conn = self.cluster.connection(broker_id, deadline=deadline)
            r = conn.request(
                ApiKey.LIST_TRANSACTIONS, request, timeout=deadline.timeout(self.config.request_timeout)
            )
            if r.error_code:
                raise BrokerResponseError(
                    r.error_code, None, context=f"ListTransactions on broker {broker_id}"
                )
            return [
                TransactionListing(s.transactional_id, s.producer_id, s.transaction_state, broker_id)
                for s in r.transaction_states
            ]

        out: list[TransactionListing] = []
        for broker_id in brokers:
            out += self.cluster.retry(functools.partial(ask, broker_id), deadline=deadline)
        return sorted(out, key=lambda t: t.transactional_id)

    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> list[TransactionDescription]:
        """The state of each transactional id (DescribeTransactions); an unknown one has the error
        TRANSACTIONAL_ID_NOT_FOUND."""
        ids = list(transactional_ids)
        if not ids:
            return []
        from kctl.client.group.coordinator import find_coordinators  # kctl.client.group imports admin

        deadline = self._deadline(timeout)
        found = find_coordinators(self.cluster, ids, deadline=deadline, key_type=TRANSACTION_KEY_TYPE)
        described: dict[str, TransactionDescription] = {}
        by_node: dict[int, list[str]] = {}
        for tid, where in found.items():
            if isinstance(where, BrokerResponseError):
                described[tid] = TransactionDescription(tid, where.code, "", -1, -1, 0, -1)
            else:
                by_node.setdefault(where.node_id, []).append(tid)

        def call(node_id: int, asked: list[str]) -> Any:
            conn = self.cluster.connection(node_id, deadline=deadline)
            r = conn.request(
                ApiKey.DESCRIBE_TRANSACTIONS,
                DescribeTransactionsRequest(transactional_ids=asked),
                timeout=deadline.timeout(self.config.request_timeout),
            )
            for s in r.transaction_states:  # a coordinator still loading: ask again
                if s.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    what = f"transactional id {s.transactional_id!r}"
                    raise BrokerResponseError(s.error_code, context=what)
            return r

        for node_id, asked in by_node.items():
            r = self.cluster.retry(functools.partial(call, node_id, asked), deadline=deadline)
            for s in r.transaction_states:
                described[s.transactional_id] = TransactionDescription(
                    s.transactional_id,
                    s.error_code,
                    s.transaction_state,
                    s.producer_id,
                    s.producer_epoch,
                    s.transaction_timeout_ms,
                    s.transaction_start_time_ms,
                    tuple(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions),
                )
        return [described[tid] for tid in ids if tid in described]

    def abort_transaction(self, spec: AbortTransactionSpec, *, timeout: float | None = None) -> None:
        """End ``spec``'s transaction on its partition with an ABORT marker, written by the partition's
        leader (WriteTxnMarkers, as Kafka's admin client; needs CLUSTER_ACTION on the cluster). The
        coordinator is not asked: this is the way out of a transaction it does not know of. Raises
        ``BrokerResponseError`` with the partition's error (e.g. INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED for an epoch older than the partition's)."""
        tp = TopicPartition(*spec.topic_partition)
        deadline = self._deadline(timeout)

        def build(
            group: dict[TopicPartition, None], version: int, deadline: Deadline
        ) -> WriteTxnMarkersRequest:
            marker = WritableTxnMarker(
                producer_id=spec.producer_id,
                producer_epoch=spec.producer_epoch,
                transaction_result=False,
                topics=[WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
                coordinator_epoch=spec.coordinator_epoch,
            )
            return WriteTxnMarkersRequest(markers=[marker])

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            return {
                TopicPartition(t.name, p.partition_index): Outcome(p.error_code, None)
                for m in response.markers
                for t in m.topics
                for p in t.partitions
            }

        outcome = self._per_leader({tp: None}, ApiKey.WRITE_TXN_MARKERS, build, parse, deadline)[tp]
        if outcome.error_code:
            raise BrokerResponseError(
                outcome.error_code, outcome.error_message, context=f"ABORT marker on {tp}"
            )
