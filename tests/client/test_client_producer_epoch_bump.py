"""The idempotent producer's epoch bump (KIP-360) must not write a batch twice: a batch of another
partition whose answer was lost (the broker may have written it) is resent as it was, under the old
epoch, until the broker settles it, and only then are the queued batches renumbered under the new
epoch. Found by the ZooKeeper-cut nemesis (bench_jepsen --nemesis zombie): kctl's producer got
OUT_OF_ORDER_SEQUENCE_NUMBER on one partition while its batch for another partition, already written,
waited for a retry; the bump renumbered it (epoch 1, sequence 0) and the broker wrote it again.

The same outcome had a second cause, found by the isolation nemesis (bench_jepsen --nemesis network
--network-fault isolate, seed 35): a batch went to the old leader, which wrote it (and replicated it)
before it was cut off; the metadata named the new leader, and the later batches went there while the
first was unanswered, were written and acknowledged. More than five followed it, so when the first was
resent the new leader no longer recognised it as a duplicate: it refused it out of order, and the bump
wrote it a second time, after the others. So a partition's batches in flight go to one broker, and a
resent batch goes alone.

The sender's decisions are driven directly (no thread, no broker): ``Sender._plan`` and the response
handling it uses, on a producer id of 7; where a broker's answer matters, ``_Partition`` gives it from
the log's own producer state (kctl.log.producer_state)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from producer_plans import idempotent_producer, queue_batch

from kctl.client.errors import KafkaConnectionError, KafkaTimeoutError
from kctl.client.producer.accumulator import RecordAccumulator
from kctl.client.producer.batch import ProducerBatch
from kctl.client.producer.idempotence import InitProducerIdResult
from kctl.client.producer.sender import Sender
from kctl.log.producer_state import OutOfOrderSequenceError, ProducerStateManager
from kctl.protocol.errors import ErrorCode
from kctl.records.header import parse_header, set_base_offset
from kctl.records.reader import decode_batch

NODE = 1


def _producer() -> tuple[RecordAccumulator, Sender]:
    return idempotent_producer(SimpleNamespace(is_connected=lambda node: True))  # every broker connected


def _queue(accumulator: RecordAccumulator, partition: int, now: float, value: str = "") -> ProducerBatch:
    return queue_batch(accumulator, partition, now, leader=NODE, value=value)


def _answer(code: int, offset: int = -1) -> Any:
    return SimpleNamespace(error_code=code, error_message=None, base_offset=offset, log_append_time_ms=-1)


def _sent(plan: Any, node: int = NODE) -> list[tuple[int, int | None]]:
    return [(batch.partition, batch.sequence) for batch in plan.requests.get(node, [])]


class _Partition:
    """One partition as all its replicas hold it (what a leader wrote was replicated before it was
    cut off), answering a Produce of one batch as a leader does: by the log's producer state."""

    def __init__(self) -> None:
        self.producer_state = ProducerStateManager()
        self.values: list[str] = []

    def produce(self, data: bytes) -> Any:
        header = parse_header(data)
        try:
            original = self.producer_state.check(header)
        except OutOfOrderSequenceError:
            return _answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        if original is not None:
            return _answer(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, original.first_offset)
        written = bytearray(data)
        base_offset = len(self.values)
        set_base_offset(written, 0, base_offset)
        self.producer_state.record(parse_header(written))
        self.values.extend(record.value.decode() for record in decode_batch(bytes(written)).records)
        return _answer(ErrorCode.NONE, base_offset)


def _serve(sender: Sender, partition: _Partition, now: float, leader: int, rounds: int = 20) -> None:
    """Run the sender's plans; ``leader`` answers what is sent to it, a bump of the epoch is granted,
    and what goes to any other broker stays unanswered."""
    accumulator = sender._accumulator
    for _ in range(rounds):
        plan = sender._plan(now)
        if plan.want_producer_id:
            idempotence = accumulator._idempotence
            bump = InitProducerIdResult(idempotence.producer_id, idempotence.producer_epoch + 1)
            idempotence.apply(bump, accumulator._partitions.values(), now)
        for batch in plan.requests.get(leader, []):
            sender._node_in_flight[leader] -= 1
            sender._handle_partition(batch, partition.produce(sender._batch_bytes(batch)), now)


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


def test_an_unanswered_batch_of_the_old_leader_is_not_overtaken_at_the_new_one() -> None:
    accumulator, sender = _producer()
    now = 1000.0
    accumulator._lock.acquire()  # the sender's methods run with the producer's lock held
    partition = _Partition()
    first = _queue(accumulator, 0, now, "first")
    assert _sent(sender._plan(now)) == [(0, 0)]
    partition.produce(sender._batch_bytes(first))  # leader 1 writes it (replicated), then is cut off
    accumulator._partitions[("t", 0)].leader = 2  # the metadata names the new leader
    later = [_queue(accumulator, 0, now, f"later-{index}") for index in range(6)]

    _serve(sender, partition, now, leader=2)  # nothing overtakes the unanswered batch
    assert partition.values == ["first"]
    assert not any(batch.done for batch in later)

    sender._node_in_flight[1] -= 1
    sender._retry_or_fail(first, KafkaTimeoutError("no answer from broker 1"), now)
    _serve(sender, partition, now + 60, leader=2)  # resent, the new leader knows it: its offset
    assert first.done and first.error is None and first.base_offset == 0
    assert partition.values == ["first"] + [f"later-{index}" for index in range(6)]  # each once
    assert all(batch.done and batch.error is None for batch in later)
    assert accumulator._idempotence.producer_epoch == 0  # nothing was refused: no bump


def test_a_resent_batch_goes_alone() -> None:
    accumulator, sender = _producer()
    now = 1000.0
    accumulator._lock.acquire()  # the sender's methods run with the producer's lock held
    first, second = _queue(accumulator, 0, now, "first"), _queue(accumulator, 0, now, "second")
    assert _sent(sender._plan(now)) == [(0, 0)]
    assert _sent(sender._plan(now)) == [(0, 1)]  # up to five of a partition in flight
    for batch in (first, second):  # the connection went: both are unanswered
        sender._node_in_flight[NODE] -= 1
        sender._retry_or_fail(batch, KafkaConnectionError("connection reset"), now)

    assert _sent(sender._plan(now + 60)) == [(0, 0)]  # the first goes again ...
    assert _sent(sender._plan(now + 60)) == []  # ... alone, until it is answered
    sender._node_in_flight[NODE] -= 1
    sender._handle_partition(first, _answer(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, offset=5), now + 60)
    assert first.done and first.base_offset == 5
    assert _sent(sender._plan(now + 60)) == [(0, 1)]
