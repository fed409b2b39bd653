"""The idempotent producer's identity: its producer id and epoch (InitProducerId), and the sequence
numbers of each partition's batches.

With idempotence each partition's batches carry consecutive sequence numbers under the producer's id
and epoch: the broker drops a resent batch it already wrote and refuses one that skips ahead. A batch
that fails for good after it was sent leaves a gap: the producer then bumps its epoch (InitProducerId
with its id, KIP-360) once nothing is in flight, and numbers the batches behind the gap from 0 again.

``Idempotence`` holds that state; it is read and changed under the producer's lock, except
``request_producer_id``, which asks the broker (outside the lock) and gives an
``InitProducerIdResult`` for ``apply`` to take in under the lock.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.protocol import ApiKey
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.records.header import ATTRIBUTES_OFFSET, PRODUCER_ID_OFFSET, TRANSACTIONAL_FLAG_MASK, write_crc

if TYPE_CHECKING:
    from kctl.client.producer.accumulator import PartitionState
    from kctl.client.producer.batch import ProducerBatch

__all__ = ["SEQUENCE_MODULUS", "Idempotence", "InitProducerIdResult"]

log = logging.getLogger(__name__)

SEQUENCE_MODULUS = 2**31
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence


@dataclasses.dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    """What InitProducerId answered: a producer id and epoch, that the broker does not support it
    (``unsupported``), or the error that kept it from answering."""

    producer_id: int = -1
    producer_epoch: int = -1
    unsupported: bool = False
    error: KafkaError | None = None

    @property
    def fatal(self) -> bool:
        """The broker refused for good (an error that is not retriable)."""
        return isinstance(self.error, BrokerResponseError) and not self.error.retriable


class Idempotence:
    """Whether batches carry a producer id and sequence numbers (``enabled``: None until the broker
    was asked), the producer id and epoch, and whether the sequence numbers must be reset (a new
    epoch) before anything else is sent. Lock held for everything but ``request_producer_id``."""

    __slots__ = (
        "backoff_until",
        "enabled",
        "producer_epoch",
        "producer_id",
        "reset_sequences",
        "transactional_id",
    )

    def __init__(self, enabled: bool | None) -> None:
        self.enabled = enabled  # None: not decided yet (asks the broker)
        self.producer_id = -1
        self.producer_epoch = -1
        self.reset_sequences = False
        self.backoff_until = 0.0  # InitProducerId failed: not asked again before then
        self.transactional_id: str | None = None  # set: batches carry the transactional flag

    @property
    def wants_producer_id(self) -> bool:
        """Undecided, or idempotent without a producer id yet."""
        return self.enabled is None or (self.enabled and self.producer_id < 0)

    def assign_sequence(self, state: PartitionState, batch: ProducerBatch) -> None:
        """Give ``batch``, about to be sent, the partition's next sequence numbers (a resent batch
        keeps its own)."""
        if batch.sequence is None:
            batch.sequence = state.next_sequence
            state.next_sequence = (state.next_sequence + len(batch.futures)) % SEQUENCE_MODULUS

    def batch_failed(self, batch: ProducerBatch, state: PartitionState | None) -> None:
        """A batch with sequence numbers failed for good: the broker did not write (or may not have
        written) them, so the batches behind it are refused as out of order (and resent), under a new
        epoch from sequence 0; nothing newer of the partition is sent until its in-flight ones return."""
        if batch.sequence is not None and self.enabled:
            self.reset_sequences = True
            if state is not None:
                state.blocked = True

    def stamp(self, batch: ProducerBatch, data: bytes) -> bytes:
        """``data`` (the batch's bytes) with the producer id, epoch and the batch's sequence, its CRC
        rewritten; kept on the batch so that a resend under the same fields reuses it."""
        fields = (self.producer_id, self.producer_epoch, batch.sequence)
        if batch.data_fields != fields:
            buffer = bytearray(data)
            _PRODUCER_FIELDS.pack_into(buffer, PRODUCER_ID_OFFSET, *fields)
            if self.transactional_id is not None:
                buffer[ATTRIBUTES_OFFSET + 1] |= TRANSACTIONAL_FLAG_MASK
            write_crc(buffer, 0, len(buffer))
            data = batch.data = bytes(buffer)
            batch.data_fields = fields  # type: ignore[assignment]
        return data

    def request_producer_id(self, cluster: ClusterClient, timeout: float) -> InitProducerIdResult:
        """Ask for a producer id, or, when the sequence numbers must be reset, for the next epoch of
        ours (InitProducerId v3+). Outside the lock: the fields it reads change only under it."""
        try:
            connection = cluster.any_connection(deadline=Deadline(timeout))
            if not connection.supports(ApiKey.INIT_PRODUCER_ID):
                return InitProducerIdResult(unsupported=True)
            version = connection.version_for(ApiKey.INIT_PRODUCER_ID)
            bump = self.reset_sequences and self.producer_id >= 0 and version >= 3
            body = InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=60_000,
                producer_id=self.producer_id if bump else -1,
                producer_epoch=self.producer_epoch if bump else -1,
            )
            response = connection.request(ApiKey.INIT_PRODUCER_ID, body, version, timeout=timeout)
            if response.error_code:
                raise BrokerResponseError(response.error_code, context="InitProducerId")
        except KafkaError as error:
            log.debug("InitProducerId failed: %s", error)
            return InitProducerIdResult(error=error)
        return InitProducerIdResult(response.producer_id, response.producer_epoch)

    def apply(
        self, result: InitProducerIdResult, partitions: Iterable[PartitionState], retry_at: float
    ) -> BaseException | None:
        """Take in InitProducerId's answer (lock held): a new id or epoch resets every partition's
        sequence numbers. Returns the error that stops the producer, if any; a retriable failure is
        asked again from ``retry_at`` on."""
        if result.unsupported:
            if self.enabled:
                return KafkaError("enable.idempotence=true but the broker does not support InitProducerId")
            self.enabled = False
            self.reset_sequences = False
            return None
        if result.error is not None:
            if result.fatal and self.enabled is None and self.producer_id < 0:
                self.enabled = False  # the broker refuses: produce without
            elif result.fatal:
                return result.error
            else:
                self.backoff_until = retry_at
            return None
        self.producer_id = result.producer_id
        self.producer_epoch = result.producer_epoch
        self.enabled = True
        if self.reset_sequences:
            log.info("producer %d: epoch %d, sequence numbers reset", self.producer_id, self.producer_epoch)
        self.reset_sequences = False
        for state in partitions:
            state.next_sequence = 0
            for batch in state.queue:
                batch.sequence = None
                batch.possibly_written = False
        return None
