"""Helpers for the tests that drive the producer's sender directly (``Sender._plan`` and the
answers it handles, no thread, no broker): an idempotent producer and batches queued by hand."""

from __future__ import annotations

import itertools
from typing import Any

from kctl.client.producer.accumulator import PartitionState, RecordAccumulator
from kctl.client.producer.batch import ProducerBatch, RecordFuture
from kctl.client.producer.sender import Sender
from kctl.client.producer_config import ProducerConfig
from kctl.records.builder import RecordBatchBuilder

PRODUCER_ID = 7
_ids = itertools.count(1)


def idempotent_producer(cluster: Any) -> tuple[RecordAccumulator, Sender]:
    """An accumulator and its sender, idempotent with producer id 7, epoch 0; ``cluster`` stands
    for the ClusterClient (what the sender asks of it: ``is_connected``, ``connection``)."""
    config = ProducerConfig.coerce({"enable.idempotence": "true", "linger.ms": "0"})
    accumulator = RecordAccumulator(config)
    idempotence = accumulator._idempotence
    idempotence.enabled = True
    idempotence.producer_id, idempotence.producer_epoch = PRODUCER_ID, 0
    return accumulator, Sender(accumulator, cluster, config)


def queue_batch(
    accumulator: RecordAccumulator, partition: int, now: float, *, leader: int, value: str = ""
) -> ProducerBatch:
    """A closed batch of one record queued for partition ``partition`` of topic "t", whose leader
    becomes ``leader`` unless it has one already."""
    state = accumulator._partitions.setdefault(("t", partition), PartitionState())
    if state.leader < 0:
        state.leader = leader
    batch = ProducerBatch(next(_ids), "t", partition, RecordBatchBuilder(), now, accumulator._done)
    batch.append(0, None, (value or f"value-{partition}").encode(), ())
    batch.futures.append(RecordFuture(batch, 0, 0))
    batch.closed = True
    batch.deadline = now + 600
    accumulator._incomplete[batch.id] = batch
    state.queue.append(batch)
    return batch
