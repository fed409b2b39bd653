"""The transaction coordinator's answers to producers: InitProducerId with a transactional id,
AddPartitionsToTxn (and its verify-only form, KIP-890), EndTxn; and what DescribeTransactions and
ListTransactions report. Kafka 3.9's rules (transaction version 1), in the order Kafka checks them:
the coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), the producer id
(INVALID_PRODUCER_ID_MAPPING), its epoch (PRODUCER_FENCED: an older producer of the id), a change in
flight or markers being written (CONCURRENT_TRANSACTIONS, which clients retry), then the state.

Each function raises ApiError for an error of the whole request, or returns the code to answer."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kctl.broker.errors import ApiError
from kctl.broker.transaction.coordinator import TransactionCoordinator
from kctl.broker.transaction.state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TransactionMetadata,
    TransactionState,
)
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


def _retried_bump(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """A producer retrying InitProducerId (KIP-360) after a bump it did not hear of: it names the
    id and epoch from before the bump that gave the current ones."""
    if metadata.state != TransactionState.EMPTY:
        return False
    if producer_id == metadata.producer_id and epoch == metadata.last_producer_epoch:
        return True
    return (
        producer_id == metadata.last_producer_id
        and metadata.producer_epoch == 0
        and (epoch == metadata.last_producer_epoch)
    )


async def init_producer_id(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    timeout_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
) -> ProducerIdAndEpoch:
    """A new epoch (or, on the id's first use or when the epoch is exhausted, a new producer id) for
    ``transactional_id``, fencing every older producer of it. An ongoing transaction is aborted first
    with a bumped epoch and CONCURRENT_TRANSACTIONS answered: the producer retries once it is."""
    if not transactional_id:
        raise ApiError(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
    if not 0 < timeout_ms <= coordinator.max_timeout_ms:
        raise ApiError(
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
            f"transaction.timeout.ms {timeout_ms} is not within 1..{coordinator.max_timeout_ms} "
            "(transaction.max.timeout.ms)",
        )
    partition, epoch = coordinator.check_owner(transactional_id)
    now = coordinator.broker.clock.time_ms()
    metadata = coordinator.transactions.get(transactional_id)
    if metadata is None:  # first use: a new producer id at epoch -1, bumped to 0 below
        metadata = TransactionMetadata(
            transactional_id,
            coordinator.broker.producer_ids.next_id(),
            -1,
            timeout_ms,
            TransactionState.EMPTY,
            last_update_ms=now,
        )
        coordinator.transactions[transactional_id] = metadata
    if metadata.pending is not None:
        raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
    if producer_id != NO_PRODUCER_ID:
        if _retried_bump(metadata, producer_id, producer_epoch):
            return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)
        if (producer_id, producer_epoch) != (metadata.producer_id, metadata.producer_epoch):
            raise ApiError(
                ErrorCode.PRODUCER_FENCED, f"producer {producer_id} epoch {producer_epoch} is fenced"
            )
    if metadata.state in PREPARING:
        raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
    if metadata.state == TransactionState.ONGOING:
        await coordinator.fence_and_abort(metadata, partition, epoch)
        raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS, "the ongoing transaction is being aborted")
    if metadata.producer_epoch >= MAX_PRODUCER_EPOCH - 1:  # exhausted: a new producer id
        changes = {
            "producer_id": coordinator.broker.producer_ids.next_id(),
            "producer_epoch": 0,
            "last_producer_id": metadata.producer_id,
        }
    else:
        changes = {"producer_epoch": metadata.producer_epoch + 1, "last_producer_id": NO_PRODUCER_ID}
    bumped = metadata.next(
        TransactionState.EMPTY,
        now,
        timeout_ms=timeout_ms,
        partitions=frozenset(),
        start_ms=-1,
        last_producer_epoch=metadata.producer_epoch,
        **changes,
    )
    await coordinator.transition(metadata, bumped, partition, epoch)
    return ProducerIdAndEpoch(bumped.producer_id, bumped.producer_epoch)


def _producer(
    coordinator: TransactionCoordinator, transactional_id: str, producer_id: int, producer_epoch: int
) -> tuple[TransactionMetadata, int, int]:
    """The id's metadata if ``producer_id``/``producer_epoch`` are its current ones (raises otherwise)."""
    partition, epoch = coordinator.check_owner(transactional_id)
    metadata = coordinator.transactions.get(transactional_id)
    if metadata is None or metadata.producer_id != producer_id:
        raise ApiError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if metadata.producer_epoch != producer_epoch:
        raise ApiError(ErrorCode.PRODUCER_FENCED, f"epoch {producer_epoch} is fenced")
    if metadata.pending is not None:
        raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
    return metadata, partition, epoch


async def add_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> None:
    """Add ``partitions`` to the producer's transaction (starting one if none is open)."""
    metadata, partition, epoch = _producer(coordinator, transactional_id, producer_id, producer_epoch)
    if metadata.state in PREPARING:
        raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
    adding = frozenset(partitions)
    ongoing = metadata.state == TransactionState.ONGOING
    if ongoing and adding <= metadata.partitions:
        return
    now = coordinator.broker.clock.time_ms()
    updated = metadata.next(
        TransactionState.ONGOING,
        now,
        partitions=metadata.partitions | adding,
        start_ms=metadata.start_ms if ongoing else now,
    )
    await coordinator.transition(metadata, updated, partition, epoch)


def verify_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, int]:
    """KIP-890's verify-only AddPartitionsToTxn: for each partition, NONE if it is in the producer's
    open transaction, INVALID_TXN_STATE otherwise."""
    metadata, _, _ = _producer(coordinator, transactional_id, producer_id, producer_epoch)
    ongoing = metadata.state == TransactionState.ONGOING
    return {
        tp: ErrorCode.NONE if ongoing and tp in metadata.partitions else ErrorCode.INVALID_TXN_STATE
        for tp in partitions
    }


async def end_transaction(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
) -> None:
    """Commit or abort the producer's transaction: PrepareCommit/PrepareAbort is written and
    answered; the markers and CompleteCommit/CompleteAbort follow in the background. A retry of an
    EndTxn already done answers NONE; one still writing markers CONCURRENT_TRANSACTIONS."""
    metadata, partition, epoch = _producer(coordinator, transactional_id, producer_id, producer_epoch)
    state = metadata.state
    committed_states = (TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT)
    aborted_states = (TransactionState.PREPARE_ABORT, TransactionState.COMPLETE_ABORT)
    if state == TransactionState.ONGOING:
        target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        prepared = metadata.next(target, coordinator.broker.clock.time_ms())
        await coordinator.transition(metadata, prepared, partition, epoch)
        coordinator.spawn(coordinator.complete(prepared, partition, epoch), f"end {transactional_id}")
        return
    if state in (committed_states if commit else aborted_states):
        if state in PREPARING:
            raise ApiError(ErrorCode.CONCURRENT_TRANSACTIONS)
        return  # a retry of what is done
    raise ApiError(
        ErrorCode.INVALID_TXN_STATE,
        f"cannot {'commit' if commit else 'abort'}: the transaction is {state.kafka_name}",
    )


def listed(
    coordinator: TransactionCoordinator,
    states: Iterable[str],
    producer_ids: Iterable[int],
    min_duration_ms: int = -1,
    pattern: str | None = None,
) -> list[TransactionMetadata]:
    """The transactional ids this broker coordinates that pass every filter (ListTransactions): a
    state among ``states``, a producer id among ``producer_ids`` (either empty: any), a transaction
    open for at least ``min_duration_ms`` (-1: any), an id matching ``pattern`` (a whole match)."""
    wanted_states = set(states)
    wanted_ids = set(producer_ids)
    regex = re.compile(pattern) if pattern else None
    now = coordinator.broker.clock.time_ms()
    found = []
    for metadata in coordinator.transactions.values():
        if wanted_states and metadata.state.kafka_name not in wanted_states:
            continue
        if wanted_ids and metadata.producer_id not in wanted_ids:
            continue
        if min_duration_ms >= 0 and (metadata.start_ms < 0 or now - metadata.start_ms < min_duration_ms):
            continue
        if regex is not None and regex.fullmatch(metadata.transactional_id) is None:
            continue
        found.append(metadata)
    return sorted(found, key=lambda m: m.transactional_id)
