"""The idempotent producer's epoch bump (KIP-360) must not write a batch twice: a batch of another
partition whose answer was lost (the broker may have written it) is resent as it was, under the old
epoch, until the broker settles it, and only then are the queued batches renumbered under the new
epoch. Found by the ZooKeeper-cut nemesis (bench_jepsen --nemesis zombie): kctl's producer got
OUT_OF_ORDER_SEQUENCE_NUMBER on one partition while its batch for another partition, already written,
waited for a retry; the bump renumbered it (epoch 1, sequence 0) and the broker wrote it again.

The sender's decisions are driven directly (no thread, no broker): ``Sender._plan`` and the response
handling it uses, on a producer id of 7."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from kctl.client.errors import KafkaConnectionError
from kctl.client.producer.accumulator import PartitionState, RecordAccumulator
from kctl.client.producer.batch import ProducerBatch, RecordFuture
from kctl.client.producer.idempotence import InitProducerIdResult
from kctl.client.producer.sender import Sender
from kctl.client.producer_config import ProducerConfig
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder

NODE = 1
_ids = itertools.count(1)


def _producer() -> tuple[RecordAccumulator, Sender]:
    config = ProducerConfig.coerce({"enable.idempotence": "true", "linger.ms": "0"})
    accumulator = RecordAccumulator(config)
    idempotence = accumulator._idempotence
    idempotence.enabled = True
    idempotence.producer_id, idempotence.producer_epoch = 7, 0
    return accumulator, Sender(accumulator, None, config)  # type: ignore[arg-type]  # never connects


def _queue(accumulator: RecordAccumulator, partition: int, now: float) -> ProducerBatch:
    state = accumulator._partitions.setdefault(("t", partition), PartitionState())
    state.leader = NODE
    batch = ProducerBatch(next(_ids), "t", partition, RecordBatchBuilder(), now, accumulator._done)
    batch.append(0, None, f"value-{partition}".encode(), ())
    batch.futures.append(RecordFuture(batch, 0, 0))
    batch.closed = True
    batch.deadline = now + 600
    accumulator._incomplete[batch.id] = batch
    state.queue.append(batch)
    return batch


def _answer(code: int, offset: int = -1) -> Any:
    return SimpleNamespace(error_code=code, error_message=None, base_offset=offset, log_append_time_ms=-1)


def _sent(plan: Any) -> list[tuple[int, int | None]]:
    return [(batch.partition, batch.sequence) for batch in plan.requests.get(NODE, [])]


def test_a_batch_the_broker_may_have_written_is_settled_before_the_epoch_is_bumped() -> None:
    accumulator, sender = _producer()
    now = 1000.0
    accumulator._lock.acquire()  # the sender's methods run with the producer's lock held
    refused, unanswered = _queue(accumulator, 0, now), _queue(accumulator, 1, now)
    assert _sent(sender._plan(now)) == [(0, 0), (1, 0)]  # one request, both under epoch 0

    sender._node_in_flight[NODE] -= 1  # the answer for partition 1 is lost (connection reset) ...
    sender._retry_or_fail(unanswered, KafkaConnectionError("connection reset"), now)
    sender._handle_partition(refused, _answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), now)  # ... 0 refused
    assert accumulator._idempotence.reset_sequences

    plan = sender._plan(now + 60)  # the bump waits: partition 1's batch goes again as it was
    assert not plan.want_producer_id
    assert _sent(plan) == [(1, 0)]
    assert accumulator._idempotence.producer_epoch == 0

    sender._node_in_flight[NODE] -= 1
    sender._handle_partition(unanswered, _answer(ErrorCode.NONE, offset=41), now)  # written: its offset
    assert unanswered.done and unanswered.base_offset == 41

    plan = sender._plan(now + 60)
    assert plan.want_producer_id and not plan.requests  # now the epoch is bumped ...
    accumulator._idempotence.apply(InitProducerIdResult(7, 1), accumulator._partitions.values(), now)
    assert _sent(sender._plan(now + 120)) == [(0, 0)]  # ... and the refused batch goes under epoch 1
    assert accumulator._idempotence.producer_epoch == 1


def test_a_batch_refused_out_of_order_is_not_waited_for() -> None:
    accumulator, sender = _producer()
    now = 1000.0
    accumulator._lock.acquire()  # the sender's methods run with the producer's lock held
    first = _queue(accumulator, 0, now)
    assert _sent(sender._plan(now)) == [(0, 0)]
    sender._node_in_flight[NODE] -= 1
    sender._handle_partition(first, _answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), now)
    assert not first.possibly_written
    assert sender._plan(now + 60).want_producer_id
