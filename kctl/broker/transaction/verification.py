"""KIP-890 part 1 on the partition leader: a transactional Produce is appended only if the
coordinator has the partition in the producer's open transaction.

A hanging transaction is born when a transactional batch reaches a partition's leader after its
transaction ended (a produce delayed past the abort, a retry that arrives late) or without its
partition ever being added: the leader opens a transaction there that no coordinator will end, and
the last stable offset stops at it. So when a transactional batch comes for a partition where its
producer (id and epoch) has no ongoing transaction, the leader first asks the transactional id's
coordinator (AddPartitionsToTxn v4 with ``verify_only``). The produce waits for the answer without
blocking the loop; one that is not NONE refuses the partition: INVALID_TXN_STATE (what Kafka 3.9
answers producers that predate KIP-890), INVALID_PRODUCER_EPOCH for a fenced producer, and the
retriable NOT_ENOUGH_REPLICAS while the coordinator cannot answer (moving, loading, unreachable).

Verification guard (Kafka's ``VerificationGuard``): the leader remembers, per partition and
producer id, a guard created when the verification starts; a COMMIT or ABORT marker for that
producer on the partition drops it (``on_marker``), and the append goes ahead only if the guard
that was verified is still there, in the same leadership of the partition (``admit``, checked with
no await before the append). A marker written while the answer was on its way — the transaction
ended meanwhile — so refuses the batch; so does a leadership lost and regained (markers written
elsewhere meanwhile were never seen here).
The guard also caches the answer: later batches of the producer (same epoch) skip the coordinator,
and once the first batch is appended the ongoing transaction on the log answers for them.

Requests to one coordinator are batched: one AddPartitionsToTxn in flight per coordinator broker,
carrying every verification that queued meanwhile (one transaction entry per transactional id).
A coordinator on this broker is asked directly. ``transaction.partition.verification.enable``
(default true, as Kafka 3.9) switches it all off."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kctl.broker.errors import ApiError
from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.broker.transaction.operations import verify_partitions
from kctl.common.ratelimit import RepeatedFailures
from kctl.log.naming import TopicPartition
from kctl.protocol.errors import ErrorCode, error_name
from kctl.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kctl.protocol.registry import ApiKey
from kctl.records.header import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
)

if TYPE_CHECKING:
    from kctl.broker.transaction.coordinator import TransactionBroker, TransactionCoordinator
    from kctl.protocol.messages.produce import ProduceRequest

log = logging.getLogger("kctl.broker.transaction")

VERIFY_VERSION = 4
REQUEST_TIMEOUT_S = 30.0
_PRODUCER = struct.Struct(">qh")  # producer id, producer epoch
#: coordinator answers that mean "not now": the producer retries (Kafka 3.9 answers these so)
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    }
)
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})


def produce_error(code: int) -> ErrorCode:
    """The Produce error for a coordinator's verification answer (NONE stays NONE)."""
    if code == ErrorCode.NONE:
        return ErrorCode.NONE
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code in _FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return ErrorCode.INVALID_TXN_STATE


@dataclass(eq=False)
class _Guard:
    """One verification of a producer on a partition: its epoch and the coordinator's answer."""

    producer_epoch: int
    leader_epoch: int  # the partition's, when asked: a guard of an earlier leadership is stale
    answer: asyncio.Future[int]

    @property
    def verified(self) -> bool:
        return self.answer.done() and self.answer.result() == ErrorCode.NONE

    @property
    def refused(self) -> bool:
        return self.answer.done() and self.answer.result() != ErrorCode.NONE


@dataclass
class _Ask:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    guards: dict[TopicPartition, _Guard] = field(default_factory=dict)


@dataclass
class Verdicts:
    """The verifications one Produce request waited for: ``admit`` before each partition's append."""

    verifier: TransactionVerifier
    guards: dict[TopicPartition, tuple[int, _Guard]]

    def admit(self, tp: TopicPartition) -> None:
        """Raise the ApiError refusing ``tp``'s batch, if it was verified and not admitted (or its
        guard was dropped by a marker since); nothing for a partition that needed no verification."""
        entry = self.guards.get(tp)
        if entry is None:
            return
        producer_id, guard = entry
        code = produce_error(guard.answer.result())
        if code == ErrorCode.NONE and not self.verifier.holds(tp, producer_id, guard):
            code = ErrorCode.INVALID_TXN_STATE
            reason = "its transaction ended while the coordinator was asked"
        else:
            reason = f"the coordinator answered {error_name(guard.answer.result())}"
        if code != ErrorCode.NONE:
            raise ApiError(
                code, f"{tp} is not in an ongoing transaction of producer {producer_id} ({reason})"
            )


class TransactionVerifier:
    """The leader's side of KIP-890 part 1 for ``broker`` (see the module docstring); ``channel_to``
    opens an inter-broker channel to a coordinator's broker."""

    def __init__(
        self,
        broker: TransactionBroker,
        coordinator: TransactionCoordinator,
        channel_to: Callable[[int], BrokerChannel | None],
    ) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.enabled: bool = broker.config["transaction.partition.verification.enable"]
        self._channel_to = channel_to
        self._channels: dict[int, BrokerChannel] = {}
        self._guards: dict[tuple[TopicPartition, int], _Guard] = {}
        self._queues: dict[int, list[_Ask]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._failures = RepeatedFailures(log)

    def holds(self, tp: TopicPartition, producer_id: int, guard: _Guard) -> bool:
        """Whether ``guard`` is still the producer's on ``tp``, in the same leadership (no marker
        of the producer there since it was created)."""
        if self._guards.get((tp, producer_id)) is not guard:
            return False
        try:
            return self.broker.replicas.leader_partition(tp).leader_epoch == guard.leader_epoch
        except ApiError:
            return False

    def on_marker(self, tp: TopicPartition, producer_id: int) -> None:
        """A marker ended ``producer_id``'s transaction on ``tp``: its next batch is verified anew."""
        self._guards.pop((tp, producer_id), None)

    # -- what needs verifying ------------------------------------------------------------------
    def _needs(
        self, tp: TopicPartition, records: bytes | memoryview | None
    ) -> tuple[int, int, int, _Guard | None] | None:
        """For a batch that opens a transaction the coordinator must confirm — a transactional
        batch of a producer with no ongoing transaction in that epoch on the partition — its
        producer id and epoch, the partition's leader epoch, and the guard of this leadership
        already asked for (verified, or its answer on the way) if any. None otherwise."""
        if records is None or len(records) < HEADER_SIZE or records[MAGIC_OFFSET] < 2:
            return None
        if not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK:
            return None
        producer_id, epoch = _PRODUCER.unpack_from(records, PRODUCER_ID_OFFSET)
        try:
            partition = self.broker.replicas.leader_partition(tp)
        except ApiError:
            return None  # the append answers it
        entry = partition.log.producer_state.producers.get(producer_id)
        if entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0:
            return None
        guard = self._guards.get((tp, producer_id))
        if (
            guard is None
            or guard.producer_epoch != epoch
            or guard.leader_epoch != partition.leader_epoch
            or guard.refused
        ):
            guard = None
        return producer_id, epoch, partition.leader_epoch, guard

    async def verify_produce(self, transactional_id: str, request: ProduceRequest) -> Verdicts | None:
        """Verify the partitions of ``request`` whose batch opens a transaction on this leader;
        None when there are none (the common case: only the first batch of a transaction pays).
        A partition whose guard is already verified is not asked again, but its guard is checked
        at the append like the others."""
        guards: dict[TopicPartition, tuple[int, _Guard]] = {}
        asks: dict[tuple[int, int], _Ask] = {}
        for topic in request.topic_data:
            for data in topic.partition_data:
                tp = TopicPartition(topic.name, data.index)
                needed = self._needs(tp, data.records)
                if needed is None:
                    continue
                producer_id, epoch, leader_epoch, guard = needed
                if guard is None:
                    guard = _Guard(epoch, leader_epoch, asyncio.get_running_loop().create_future())
                    self._guards[(tp, producer_id)] = guard
                    ask = asks.setdefault((producer_id, epoch), _Ask(transactional_id, producer_id, epoch))
                    ask.guards[tp] = guard
                guards[tp] = (producer_id, guard)
        if not guards:
            return None
        for ask in asks.values():
            self._ask(ask)
        pending = [asyncio.shield(g.answer) for _, g in guards.values() if not g.answer.done()]
        if pending:
            await asyncio.gather(*pending)
        for tp, (producer_id, guard) in guards.items():
            if guard.refused and self._guards.get((tp, producer_id)) is guard:
                del self._guards[(tp, producer_id)]  # the next batch asks again
        return Verdicts(self, guards)

    # -- asking the coordinator ----------------------------------------------------------------
    def _ask(self, ask: _Ask) -> None:
        try:
            node = self.coordinator.coordinator_for(ask.transactional_id)
        except ApiError as error:
            self._answer(ask, dict.fromkeys(ask.guards, error.code))
            return
        if node == self.broker.broker_id:
            try:
                codes = verify_partitions(
                    self.coordinator, ask.transactional_id, ask.producer_id, ask.producer_epoch, ask.guards
                )
            except ApiError as error:
                codes = dict.fromkeys(ask.guards, error.code)
            self._answer(ask, codes)
            return
        self._queues.setdefault(node, []).append(ask)
        if node not in self._senders:
            self._senders[node] = asyncio.create_task(self._send_loop(node), name=f"txn-verify-{node}")

    @staticmethod
    def _answer(ask: _Ask, codes: dict[TopicPartition, int]) -> None:
        for tp, guard in ask.guards.items():
            if not guard.answer.done():
                guard.answer.set_result(codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))

    async def _send_loop(self, node: int) -> None:
        """Send what queued for ``node``, one request in flight; what queues meanwhile goes next.
        A request carries one entry per transactional id: asks of another producer id or epoch of
        an id already in it wait for the next one."""
        try:
            while queue := self._queues.pop(node, None):
                batch: dict[str, list[_Ask]] = {}
                later: list[_Ask] = []
                for ask in queue:
                    same = batch.setdefault(ask.transactional_id, [ask])
                    if same[0] is ask:
                        continue
                    if (same[0].producer_id, same[0].producer_epoch) == (ask.producer_id, ask.producer_epoch):
                        same.append(ask)
                    else:
                        later.append(ask)
                if later:
                    self._queues.setdefault(node, []).extend(later)
                codes = await self._request(node, batch)
                for tid, asks in batch.items():
                    answered = codes.get(tid, {})
                    for ask in asks:
                        self._answer(
                            ask, {tp: answered.get(tp, ErrorCode.NETWORK_EXCEPTION) for tp in ask.guards}
                        )
        finally:
            self._senders.pop(node, None)
            for ask in self._queues.pop(node, []):  # closing: nothing will send them
                self._answer(ask, dict.fromkeys(ask.guards, ErrorCode.NETWORK_EXCEPTION))

    async def _request(self, node: int, batch: dict[str, list[_Ask]]) -> dict[str, dict[TopicPartition, int]]:
        """The coordinator's code per transactional id and partition (empty: no answer)."""
        channel = self._channels.get(node)
        if channel is None:
            channel = self._channel_to(node)
            if channel is None:
                return {}
            self._channels[node] = channel
        transactions = []
        for tid, asks in batch.items():
            topics: dict[str, list[int]] = {}
            for tp in sorted({tp for ask in asks for tp in ask.guards}):
                topics.setdefault(tp.topic, []).append(tp.partition)
            transactions.append(
                AddPartitionsToTxnTransaction(
                    transactional_id=tid,
                    producer_id=asks[0].producer_id,
                    producer_epoch=asks[0].producer_epoch,
                    verify_only=True,
                    topics=[AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in topics.items()],
                )
            )
        key = f"broker {node}"
        try:
            response: Any = await channel.request(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                VERIFY_VERSION,
                AddPartitionsToTxnRequest(transactions=transactions),
                timeout=REQUEST_TIMEOUT_S,
            )
        except ChannelError as error:
            self._failures.failed(key, f"cannot verify transactions with the coordinator on {key}", error)
            self._channels.pop(node, None)
            await channel.close()
            return {}
        self._failures.recovered(key, f"transactions are verified with the coordinator on {key}")
        if response.error_code:
            return {
                tid: {tp: response.error_code for ask in asks for tp in ask.guards}
                for tid, asks in batch.items()
            }
        return {
            result.transactional_id: {
                TopicPartition(topic.name, p.partition_index): p.partition_error_code
                for topic in result.topic_results
                for p in topic.results_by_partition
            }
            for result in response.results_by_transaction
        }

    async def close(self) -> None:
        for task in list(self._senders.values()):
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()
