"""Idempotent-producer state of one partition: for each producer id, its epoch and the sequence
numbers and offsets of its last few batches, so a retried batch is recognised (and answered with its
original offsets instead of being written twice) and a gap in sequences is refused.

Works from batch headers only (producer_id, producer_epoch, base_sequence, last_offset_delta). Rebuilt
at load from the active segment; a producer the partition has forgotten (older segments, expired) is
accepted at any sequence, as Kafka does since KIP-360."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kctl.records.header import BatchHeader

RECENT_BATCHES = 5  # Kafka keeps the metadata of a producer's last 5 batches for deduplication
INT32_MAX = 2**31 - 1


class ProducerStateError(ValueError):
    """A batch an idempotent producer must not write."""


class OutOfOrderSequenceError(ProducerStateError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER: the batch does not follow the producer's last sequence."""


class InvalidProducerEpochError(ProducerStateError):
    """INVALID_PRODUCER_EPOCH: the batch's epoch is older than the producer's current epoch."""


@dataclass(frozen=True)
class BatchRecord:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchRecord] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def _last_sequence(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> BatchRecord | None:
        """Validate a batch before it is appended. Returns the original batch if this one is a
        duplicate (already written), None if it may be appended; raises ProducerStateError otherwise."""
        if header.producer_id < 0 or header.is_control:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} new epoch {header.producer_epoch} must start at "
                    f"sequence 0, not {header.base_sequence}"
                )
            return None
        last_sequence = _last_sequence(header)
        for batch in entry.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last_sequence:
                return batch
        expected = (entry.last_sequence + 1) % (INT32_MAX + 1)
        if entry.batches and header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence}, expected {expected}"
            )
        return None

    def record(self, header: BatchHeader) -> None:
        """Remember an appended batch (its header carries the assigned offsets)."""
        if header.producer_id < 0 or header.is_control:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.batches.append(
            BatchRecord(
                header.base_sequence,
                _last_sequence(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (after a log truncation)."""
        for producer_id in list(self.producers):
            entry = self.producers[producer_id]
            kept = [batch for batch in entry.batches if batch.last_offset < offset]
            if kept:
                entry.batches = deque(kept, maxlen=RECENT_BATCHES)
            else:
                del self.producers[producer_id]
