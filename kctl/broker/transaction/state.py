"""A transactional id's state as the coordinator keeps it: Kafka's transaction states (with the ids
``__transaction_state`` records carry) and the metadata of one transactional id.

The coordinator never changes a ``TransactionMetadata`` in place before the change is written: it
builds the next one (``TransactionMetadata.next``), marks the current one ``pending`` (so other
requests for the id answer CONCURRENT_TRANSACTIONS meanwhile), writes the next one to the log, and
only then takes it as the state."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

from kctl.common.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE: an epoch bump past MAX - 1 takes a new producer id


class TransactionState(IntEnum):
    """Kafka's TransactionState ids (the ``transaction_status`` of a record) and names."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions answer (``PrepareCommit``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def by_kafka_name(cls, name: str) -> TransactionState | None:
        return next((state for state in cls if state.kafka_name == name), None)


#: the states a transaction may move to from each state (Kafka's TransactionState.validPreviousStates,
#: read the other way round)
VALID_TRANSITIONS: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: frozenset(
        {
            TransactionState.EMPTY,
            TransactionState.ONGOING,
            TransactionState.DEAD,
            TransactionState.PREPARE_EPOCH_FENCE,
        }
    ),
    TransactionState.ONGOING: frozenset(
        {
            TransactionState.ONGOING,
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
            TransactionState.PREPARE_EPOCH_FENCE,
        }
    ),
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.COMPLETE_COMMIT}),
    TransactionState.PREPARE_ABORT: frozenset({TransactionState.COMPLETE_ABORT}),
    TransactionState.COMPLETE_COMMIT: frozenset(
        {
            TransactionState.EMPTY,
            TransactionState.ONGOING,
            TransactionState.DEAD,
            TransactionState.PREPARE_EPOCH_FENCE,
        }
    ),
    TransactionState.COMPLETE_ABORT: frozenset(
        {
            TransactionState.EMPTY,
            TransactionState.ONGOING,
            TransactionState.DEAD,
            TransactionState.PREPARE_EPOCH_FENCE,
        }
    ),
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: frozenset(),
}

#: states in which a transaction's markers are being written
PREPARING = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
#: states with no transaction in progress (the id may expire)
COMPLETED = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)


class InvalidTransitionError(Exception):
    """A state change the state machine does not allow (a coordinator bug, never a client's)."""


@dataclass
class TransactionMetadata:
    """One transactional id: its producer id and epoch (and the previous ones, for a producer retrying
    InitProducerId after an epoch bump it did not hear of, KIP-360), its timeout, the state of its
    current transaction and the partitions in it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: the state being written (another request meanwhile answers CONCURRENT_TRANSACTIONS)
    pending: TransactionState | None = field(default=None, compare=False)

    def next(self, state: TransactionState, now_ms: int, **changes: object) -> TransactionMetadata:
        """The metadata after moving to ``state`` (with ``changes``), not yet written."""
        if state not in VALID_TRANSITIONS[self.state]:
            raise InvalidTransitionError(
                f"transactional id {self.transactional_id!r}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        return dataclasses.replace(self, state=state, last_update_ms=now_ms, pending=None, **changes)  # type: ignore[arg-type]

    def topics(self) -> dict[str, list[int]]:
        """The partitions of the transaction by topic, each list sorted."""
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {topic: sorted(partitions) for topic, partitions in sorted(by_topic.items())}
