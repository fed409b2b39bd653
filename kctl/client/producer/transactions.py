"""The transactional producer's side of Kafka's transactions (KIP-98): the coordinator of the
``transactional.id``, InitProducerId with that id (which fences any older producer with it),
AddPartitionsToTxn before a partition's first batch of a transaction, AddOffsetsToTxn and
TxnOffsetCommit (``send_offsets_to_transaction``), and EndTxn.

``TransactionManager`` holds the state (READY, IN_TRANSACTION, ABORTABLE_ERROR, FATAL_ERROR) and
talks to the coordinator; the ``Producer`` calls it from ``init_transactions`` and friends, the
sender thread calls ``add_partitions`` before it sends batches of a partition not yet in the
transaction. Fencing errors come back as ``ProducerFencedError`` / ``InvalidProducerEpochError``,
after which the producer is only good for ``close``.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.errors import (
    BrokerResponseError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionStateError,
    response_error,
)
from kctl.client.group.coordinator import find_coordinators
from kctl.client.producer.idempotence import Idempotence
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kctl.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kctl.protocol.messages.end_txn import EndTxnRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TransactionState"]

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
# the coordinator is busy, moving or loading: ask again (after finding it again for NOT_COORDINATOR)
_RETRY = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs of the consumer group (KIP-447): its id, and the
    member's generation, member id and group instance id, so that a zombie member is fenced."""

    __slots__ = ("generation_id", "group_id", "group_instance_id", "member_id")

    def __init__(
        self,
        group_id: str,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


class TransactionManager:
    """The transactional state of one producer. ``producer_ids(pid, epoch)`` hands the producer id
    and epoch live in the producer's ``Idempotence``; ``apply_ids(pid, epoch)`` sets them there under the
    producer's lock (resetting the sequence numbers)."""

    def __init__(
        self,
        cluster: ClusterClient,
        transactional_id: str,
        transaction_timeout_ms: int,
        request_timeout: float,
        idempotence: Idempotence,
        apply_ids: Callable[[int, int], None],
    ) -> None:
        self.transactional_id = transactional_id
        self._cluster = cluster
        self._timeout_ms = transaction_timeout_ms
        self._request_timeout = request_timeout
        self._idempotence = idempotence
        self._apply_ids = apply_ids
        self._lock = threading.Lock()
        self.state = TransactionState.UNINITIALIZED
        self.added: set[tuple[str, int]] = set()
        self.offsets_added = False
        self.error: BaseException | None = None
        self._coordinator: int | None = None

    @property
    def producer_id(self) -> int:
        return self._idempotence.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._idempotence.producer_epoch

    # ------------------------------------------------------------------------ the state machine

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction (and not after a fatal error)."""
        state = self.state
        if state is TransactionState.IN_TRANSACTION:
            return
        if state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortedError("the transaction failed: abort_transaction() first", self.error)
        if state is TransactionState.FATAL_ERROR:
            raise self._fatal()
        raise TransactionStateError(
            f"send outside a transaction (state: {state.value}): begin_transaction() first"
        )

    def _fatal(self) -> BaseException:
        error = self.error
        if isinstance(error, KafkaError):
            return error
        return TransactionStateError(f"the transactional producer failed for good: {error!r}")

    def batch_failed(self, error: BaseException) -> None:
        """A record of the transaction failed: it can only be aborted now (fenced: fatal)."""
        with self._lock:
            if self.state is TransactionState.IN_TRANSACTION:
                self._fail(error)

    def _fail(self, error: BaseException) -> None:
        self.error = error
        fatal = isinstance(error, ProducerFencedError | InvalidProducerEpochError)
        self.state = TransactionState.FATAL_ERROR if fatal else TransactionState.ABORTABLE_ERROR

    def begin(self) -> None:
        if self.state is not TransactionState.READY:
            if self.state is TransactionState.FATAL_ERROR:
                raise self._fatal()
            raise TransactionStateError(f"begin_transaction in state {self.state.value}")
        self.added = set()
        self.offsets_added = False
        self.state = TransactionState.IN_TRANSACTION

    # ------------------------------------------------------------------------ coordinator requests

    def _request(
        self, api: ApiKey, build: Callable[[int], Any], what: str, timeout: float, max_version: int = 99
    ) -> Any:
        """Send a request to the coordinator, retrying its retriable answers (finding the coordinator
        again as needed) until ``timeout``; returns the response (its error checked by ``check``)."""
        deadline = time.monotonic() + timeout
        backoff = 0.02
        while True:
            try:
                node = self._coordinator_node(Deadline(max(deadline - time.monotonic(), 0.1)))
                connection = self._cluster.connection(node, deadline=Deadline(self._request_timeout))
                version = min(connection.version_for(api), max_version)
                response = connection.request(api, build(version), version, timeout=self._request_timeout)
                code = _error_of(response)
                if code in _RETRY:
                    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        self._coordinator = None
                    raise BrokerResponseError(code, context=what)
                if code:
                    raise response_error(
                        code, context=f"{what} for transactional id {self.transactional_id!r}"
                    )
                return response
            except KafkaError as error:
                if not error.retriable or isinstance(error, ProducerFencedError | InvalidProducerEpochError):
                    raise
                if time.monotonic() + backoff >= deadline:
                    raise KafkaTimeoutError(f"{what}: no answer within {timeout:.1f}s ({error})") from error
                log.debug("%s: %s; retrying", what, error)
                if not isinstance(error, BrokerResponseError):
                    self._coordinator = None
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.5)

    def _coordinator_node(self, deadline: Deadline) -> int:
        if self._coordinator is None:
            found = find_coordinators(
                self._cluster, [self.transactional_id], deadline=deadline, key_type=TRANSACTION_KEY_TYPE
            )[self.transactional_id]
            if isinstance(found, BaseException):
                raise found
            self._coordinator = found.node_id
        return self._coordinator

    def init(self, timeout: float) -> None:
        """InitProducerId with the transactional id: the coordinator aborts (or completes) what an
        older producer with it left open and bumps the epoch, fencing that producer."""
        if self.state not in (TransactionState.UNINITIALIZED, TransactionState.READY):
            raise TransactionStateError(f"init_transactions in state {self.state.value}")
        response = self._request(
            ApiKey.INIT_PRODUCER_ID,
            lambda _version: InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self._timeout_ms,
                producer_id=-1,
                producer_epoch=-1,
            ),
            "InitProducerId",
            timeout,
        )
        self._apply_ids(response.producer_id, response.producer_epoch)
        self.state = TransactionState.READY

    def add_partitions(self, tps: Iterable[tuple[str, int]]) -> BaseException | None:
        """AddPartitionsToTxn for the partitions not yet in the transaction (the sender thread,
        before it sends their batches). Returns the error (also recorded: the transaction must be
        aborted) or None."""
        with self._lock:
            new = sorted(set(tps) - self.added)
            if not new or self.state is not TransactionState.IN_TRANSACTION:
                return self.error if self.state is not TransactionState.IN_TRANSACTION else None
        topics: dict[str, list[int]] = {}
        for topic, partition in new:
            topics.setdefault(topic, []).append(partition)
        try:
            response = self._request(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                lambda _version: AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=self.producer_id,
                    v3_and_below_producer_epoch=self.producer_epoch,
                    v3_and_below_topics=[
                        AddPartitionsToTxnTopic(name=name, partitions=parts) for name, parts in topics.items()
                    ],
                ),
                "AddPartitionsToTxn",
                self._timeout_ms / 1000,
                max_version=3,
            )
        except KafkaError as error:
            with self._lock:
                self._fail(error)
            return error
        with self._lock:
            self.added.update(new)
        del response
        return None

    def send_offsets(
        self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata, timeout: float
    ) -> None:
        """AddOffsetsToTxn (the group's offsets partition joins the transaction), then
        TxnOffsetCommit to the group's coordinator: the offsets commit or abort with the records."""
        if self.state is not TransactionState.IN_TRANSACTION:
            self.check_send()
        try:
            self._request(
                ApiKey.ADD_OFFSETS_TO_TXN,
                lambda _version: AddOffsetsToTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    group_id=group.group_id,
                ),
                "AddOffsetsToTxn",
                timeout,
            )
            self.offsets_added = True
            self._commit_offsets(offsets, group, timeout)
        except KafkaError as error:
            with self._lock:
                self._fail(error)
            raise

    def _commit_offsets(
        self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata, timeout: float
    ) -> None:
        deadline = Deadline(timeout)
        found = find_coordinators(self._cluster, [group.group_id], deadline=deadline)[group.group_id]
        if isinstance(found, BaseException):
            raise found
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=int(offset),
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
            )
        body = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[
                TxnOffsetCommitRequestTopic(name=name, partitions=parts) for name, parts in topics.items()
            ],
        )
        connection = self._cluster.connection(found.node_id, deadline=Deadline(self._request_timeout))
        version = connection.version_for(ApiKey.TXN_OFFSET_COMMIT)
        response = connection.request(ApiKey.TXN_OFFSET_COMMIT, body, version, timeout=self._request_timeout)
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code:
                    raise response_error(
                        part.error_code, context=f"TxnOffsetCommit {topic.name}-{part.partition_index}"
                    )

    def end(self, commit: bool, timeout: float) -> None:
        """EndTxn: the coordinator writes the COMMIT (or ABORT) markers. Nothing to end (no partition
        or offsets joined) is a no-op, as in Kafka's client."""
        state = self.state
        if state is TransactionState.FATAL_ERROR:
            raise self._fatal()
        if commit and state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortedError(
                "a record of the transaction failed: abort_transaction()", self.error
            )
        if state not in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            raise TransactionStateError(
                f"{'commit' if commit else 'abort'}_transaction in state {state.value}"
            )
        if self.added or self.offsets_added:
            try:
                self._request(
                    ApiKey.END_TXN,
                    lambda _version: EndTxnRequest(
                        transactional_id=self.transactional_id,
                        producer_id=self.producer_id,
                        producer_epoch=self.producer_epoch,
                        committed=commit,
                    ),
                    "EndTxn",
                    timeout,
                )
            except KafkaError as error:
                with self._lock:
                    self._fail(error)
                raise
        with self._lock:
            self.state = TransactionState.READY
            self.error = None
            self.added = set()
            self.offsets_added = False


def _error_of(response: Any) -> int:
    """The response's error code; for AddPartitionsToTxn the partitions' (OPERATION_NOT_ATTEMPTED
    only when nothing else is named)."""
    code = getattr(response, "error_code", 0) or 0
    if code:
        return int(code)
    codes = [
        int(part.partition_error_code)
        for result in getattr(response, "results_by_topic_v3_and_below", None) or ()
        for part in result.results_by_partition
        if part.partition_error_code
    ]
    named = [c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED]
    return (named or codes or [0])[0]
