"""The sender: the producer's background threads that drain ready batches from the accumulator, send
them to the partitions' leaders, and complete, retry or fail them by the answers.

The sender thread (``Sender._run``) plans under the producer's lock (``_plan``: a ``SendPlan``), then
acts outside it: it asks for a producer id (``Idempotence``) or the metadata when needed, and sends a
partition's oldest batch when it is ready (``RecordAccumulator._ready_at``), grouping the batches by
leader broker into one Produce request per broker (one batch per partition, at most
``max.request.size`` bytes), with up to ``max.in.flight.requests.per.connection`` requests in flight
per connection. One receiver thread per broker reads the responses (in request order) and completes
the batches' futures, or puts a failed batch back at the head of its partition's queue to be resent
after ``retry.backoff.ms`` (doubling up to ``retry.backoff.max.ms``).

Without idempotence a partition has at most one batch in flight when ``retries`` > 0 (several for
other partitions), which keeps the order (a resent batch may be written twice); with it, up to 5,
all to one broker, and a resent batch goes alone: so at most five batches the producer has no answer
for follow any batch it resends, and the broker (which remembers a producer's last five) always
recognises the resend of a batch it wrote.

Connections. The sender thread never connects: a batch whose leader has no open connection waits
in its queue (not in flight) while a thread of its own connects (``_connect``). A leader cut off
hears no connect until the connect timeout; meanwhile, when that broker's last request or connect
failed, the metadata is asked for again (with backoff), and the batch goes to the next leader as
soon as the metadata names one. Other brokers' partitions are never held up. After a failed connect
(refused at once by a broker that is down) the next one waits ``retry.backoff.ms``, doubling up to
``retry.backoff.max.ms``.

Errors. Retriable errors (lost connections, timeouts, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
...) refresh the metadata and resend until ``retries`` or ``delivery.timeout.ms`` runs out
(``DeliveryTimeoutError``, whose ``cause`` is the last error). Others fail the batch's futures at
once with ``BrokerResponseError`` (MESSAGE_TOO_LARGE after a batch of one record, CORRUPT_MESSAGE,
authorization, ...); a batch of several records refused as too large is split in two and resent.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import queue
import threading
import time
from typing import Any, NamedTuple

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    response_error,
)
from kctl.client.producer.accumulator import PartitionState, RecordAccumulator
from kctl.client.producer.batch import DeliveryTimeoutError, ProducerBatch, run_callbacks
from kctl.client.producer.idempotence import SEQUENCE_MODULUS
from kctl.client.producer_config import ProducerConfig
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder
from kctl.records.reader import decode_batch

__all__ = ["InFlightProduce", "SendPlan", "Sender"]

log = logging.getLogger(__name__)

FIRST_RECORD_BATCH_PRODUCE_VERSION = 3

_monotonic = time.monotonic

# A produce error that says an earlier batch of the partition is missing: retried when such a batch
# is being resent, else the sequence numbers are reset.
_SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
# Retriable in Kafka's table, but a batch we built will not get better by being resent.
_NOT_RETRIED = frozenset({ErrorCode.CORRUPT_MESSAGE})


@dataclasses.dataclass(frozen=True, slots=True)
class SendPlan:
    """What the sender thread does next, decided under the lock: ``wait`` seconds when there is
    nothing to do (None: until woken), refresh the metadata, get a producer id, send ``requests``
    (batches per leader broker), run the callbacks of the batches that ``expired``, and start
    connecting to the brokers in ``connect`` (in the background)."""

    wait: float | None
    want_metadata: bool = False
    want_producer_id: bool = False
    requests: dict[int, list[ProducerBatch]] = dataclasses.field(default_factory=dict)
    expired: list[ProducerBatch] = dataclasses.field(default_factory=list)
    connect: list[int] = dataclasses.field(default_factory=list)

    @property
    def idle(self) -> bool:
        return not (
            self.want_metadata or self.want_producer_id or self.requests or self.expired or self.connect
        )


class InFlightProduce(NamedTuple):
    """A Produce request sent to ``node``, for its receiver thread to read the answer of."""

    node: int
    connection: Any
    in_flight: Any
    batches: dict[tuple[str, int], ProducerBatch]


class Sender:
    """The producer's I/O threads over ``accumulator``'s batches (its lock guards everything here
    but the receivers' table, which is also changed under it)."""

    def __init__(
        self, accumulator: RecordAccumulator, cluster: ClusterClient, config: ProducerConfig
    ) -> None:
        self._accumulator = accumulator
        self._idempotence = accumulator._idempotence
        self._cluster = cluster
        self._config = config
        self._acks = config.acks
        self._request_timeout = config.request_timeout
        self._produce_timeout_ms = min(config.request_timeout_ms, config.delivery_timeout_ms)
        self._max_request_size = config.max_request_size
        self._retries = config.retries
        self._backoff = config.retry_backoff_ms / 1000.0
        self._backoff_max = config.retry_backoff_max_ms / 1000.0
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._node_in_flight: dict[int, int] = collections.defaultdict(int)
        self._connecting: set[int] = set()  # brokers a background thread is connecting to
        self._unanswered: set[int] = set()  # brokers whose last request or connect failed
        # broker -> (failed connects in a row, no connect before this time)
        self._connect_backoff: dict[int, tuple[int, float]] = {}
        self._receivers: dict[int, tuple[threading.Thread, queue.SimpleQueue[InFlightProduce | None]]] = {}
        self._metadata_next = 0.0
        self._metadata_backoff = self._backoff
        self._metadata_refreshed = _monotonic()
        self._thread = threading.Thread(target=self._run, name="kctl-producer-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the sender thread, which ends once the accumulator is stopping."""
        self._thread.join(timeout=timeout)

    def stop_receivers(self) -> None:
        """End the receiver threads (after the cluster client closed: none waits for a response)."""
        with self._accumulator._lock:
            receivers = list(self._receivers.values())
        for _thread, work in receivers:
            work.put(None)
        for thread, _work in receivers:
            thread.join(timeout=5.0)

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        """A batch failed with a retriable error: put it back in order, or fail it when out of
        retries or time. Lock held."""
        acc = self._accumulator
        if batch.done:
            return
        batch.last_error = error
        batch.attempts += 1
        if batch.in_flight:
            batch.in_flight = False
            acc._partitions[batch.tp].in_flight -= 1
        if now >= batch.deadline:
            acc._finish(batch, DeliveryTimeoutError(self._timeout_text(batch), error))
            return
        if batch.attempts > self._retries:
            acc._finish(batch, error)
            return
        state = acc._partitions[batch.tp]
        state.blocked = True
        backoff = self._backoff_after(batch.attempts)
        batch.retry_at = now + backoff
        log.debug("retrying %r in %.3fs (attempt %d): %s", batch, backoff, batch.attempts, error)
        acc._requeue(state, batch)
        acc._wakeup.notify()

    def _backoff_after(self, failures: int) -> float:
        """``retry.backoff.ms`` doubled for each failure after the first, up to ``retry.backoff.max.ms``."""
        return min(self._backoff * (2 ** (failures - 1)), self._backoff_max)

    def _timeout_text(self, batch: ProducerBatch) -> str:
        count = len(batch.futures)
        where = f"{batch.topic}-{batch.partition}" if batch.partition >= 0 else f"topic {batch.topic!r}"
        return (
            f"{count} record{'s' if count != 1 else ''} for {where} not delivered within "
            f"delivery.timeout.ms ({self._config.delivery_timeout_ms} ms)"
        )

    def _run(self) -> None:
        acc = self._accumulator
        try:
            while True:
                with acc._lock:
                    if acc._stopping:
                        return
                    plan = self._plan(_monotonic())
                    if plan.idle:
                        acc._wakeup.wait(plan.wait)
                        continue
                run_callbacks(plan.expired)
                for node in plan.connect:
                    threading.Thread(
                        target=self._connect, args=(node,), name=f"kctl-producer-connect-{node}", daemon=True
                    ).start()
                if plan.want_producer_id:
                    self._init_producer_id()
                if plan.want_metadata:
                    self._refresh_metadata()
                for node, batches in plan.requests.items():
                    if acc._transactions is not None:
                        error = acc._transactions.add_partitions(batch.tp for batch in batches)
                        if error is not None:
                            self._request_failed(node, batches, _not_retriable(error))
                            continue
                    self._send_request(node, batches)
        except BaseException as error:  # a bug: fail everything rather than hang the callers
            log.exception("the producer's sender thread failed")
            with acc._lock:
                acc._fatal = error
                leftovers = list(acc._incomplete.values())
                for batch in leftovers:
                    acc._finish(batch, KafkaError(f"the producer's sender thread failed: {error!r}"))
            run_callbacks(leftovers)

    def _plan(self, now: float) -> SendPlan:
        """What the sender does next (lock held): batches to send per broker (taken off their queues,
        in flight from now on), batches failed, whether to refresh metadata or get a producer id."""
        acc = self._accumulator
        idempotence = self._idempotence
        wait: float | None = None
        expired: list[ProducerBatch] = []
        # records waiting for their topic's metadata
        for topic, waiting in list(acc._pending.items()):
            while waiting and waiting[0].deadline <= now:
                placeholder = waiting.pop(0)
                acc._finish(
                    placeholder,
                    DeliveryTimeoutError(self._timeout_text(placeholder), acc._metadata_error.get(topic)),
                )
                expired.append(placeholder)
            if not waiting:
                del acc._pending[topic]
            else:
                wait = _earliest(wait, waiting[0].deadline - now)
        want_metadata = False
        if acc._pending or acc._metadata_wanted:
            if now >= self._metadata_next:
                want_metadata = True
            else:
                wait = _earliest(wait, self._metadata_next - now)
        elif acc._incomplete and now - self._metadata_refreshed >= self._config.metadata_max_age_ms / 1000:
            want_metadata = True
        if acc._fatal is not None:
            for batch in list(acc._incomplete.values()):
                if not batch.in_flight:
                    acc._finish(batch, acc._fatal)
                    expired.append(batch)
            return SendPlan(wait, want_metadata, expired=expired)
        queued = [state for state in acc._partitions.values() if state.queue]
        if not queued:
            return SendPlan(wait, want_metadata, expired=expired)
        if idempotence.wants_producer_id:
            if now >= idempotence.backoff_until:
                return SendPlan(wait, want_metadata, want_producer_id=True, expired=expired)
            wait = _earliest(wait, idempotence.backoff_until - now)
            self._expire(queued, now, expired)
            return SendPlan(wait, want_metadata, expired=expired)
        if idempotence.reset_sequences:
            if any(state.in_flight for state in acc._partitions.values()):
                self._expire(queued, now, expired)
                return SendPlan(wait, want_metadata, expired=expired)
            # Before the new epoch renumbers the queued batches, each one the broker may have
            # written already (sent, its answer lost or a retriable error) is resent as it was, under
            # the old epoch, until the broker settles it: written (it answers the original offset)
            # or refused out of order (not written). Renumbered, it would be written twice.
            unsettled = [state for state in queued if state.queue[0].possibly_written]
            if not unsettled:
                return SendPlan(wait, want_metadata, want_producer_id=True, expired=expired)
            queued = unsettled
        self._expire(queued, now, expired)
        idempotent = bool(idempotence.enabled)
        per_partition = (
            min(self._max_in_flight, 5) if idempotent else (1 if self._retries else self._max_in_flight)
        )
        hurry = acc._flushing > 0 or acc._closing
        requests: dict[int, list[ProducerBatch]] = {}
        connect: list[int] = []
        sizes: dict[int, int] = {}
        for state in queued:
            if not state.queue:
                continue
            if state.blocked:
                if state.in_flight:
                    continue
                state.blocked = False
            if state.in_flight >= per_partition:
                continue
            head = state.queue[0]
            if head.retry_at > now:
                wait = _earliest(wait, head.retry_at - now)
                continue
            ready_at = acc._ready_at(state, hurry)
            if ready_at > now:
                wait = _earliest(wait, ready_at - now)
                continue
            leader = state.leader
            if leader < 0:
                want_metadata = want_metadata or now >= self._metadata_next
                acc._metadata_wanted = True
                if not want_metadata:
                    wait = _earliest(wait, self._metadata_next - now)
                continue
            if idempotent and state.in_flight and (leader != state.sent_to or state.resend_in_flight()):
                # With sequence numbers, a partition's batches in flight go to one broker, and a
                # resent batch goes alone (``blocked`` holds it until the others returned; nothing
                # follows it until it is answered): otherwise later batches can be written (by a new
                # leader) while an earlier one the old leader wrote is unanswered, and once more than
                # five follow it the broker no longer recognises its resend as a duplicate.
                continue
            if leader not in requests and self._node_in_flight[leader] >= self._max_in_flight:
                continue
            if leader not in requests and not self._cluster.is_connected(leader):
                # connected to in the background: the batch waits here, not in flight, so that it
                # goes to another leader as soon as the metadata names one (a leader cut off hears
                # no connect: the sender thread never waits for that)
                if leader not in self._connecting:
                    _, not_before = self._connect_backoff.get(leader, (0, 0.0))
                    if now >= not_before:
                        self._connecting.add(leader)
                        connect.append(leader)
                    else:
                        wait = _earliest(wait, not_before - now)
                if leader in self._unanswered:  # it may have lost its leadership: ask meanwhile
                    acc._metadata_wanted = True
                    want_metadata = want_metadata or now >= self._metadata_next
                    if not want_metadata:
                        wait = _earliest(wait, self._metadata_next - now)
                continue
            size = head.size
            if leader in sizes and sizes[leader] + size > self._max_request_size:
                continue
            state.queue.popleft()
            acc._close_open(head)
            if not head.futures:  # its only record was refused by the builder
                acc._finish(head)
                continue
            if idempotent:
                idempotence.assign_sequence(state, head)
                head.possibly_written = True
                if head.attempts:
                    state.resend = head
            head.in_flight = True
            state.in_flight += 1
            state.sent_to = leader
            if leader not in requests:
                requests[leader] = []
                sizes[leader] = 0
                self._node_in_flight[leader] += 1
            requests[leader].append(head)
            sizes[leader] += size
        if not requests and not want_metadata and not expired and wait is None:
            # batches are queued but none can go: wait for a response, a connection (or a backoff)
            wait = max(self._backoff, 0.01)
        return SendPlan(wait, want_metadata, False, requests, expired, connect)

    def _expire(self, queued: list[PartitionState], now: float, expired: list[ProducerBatch]) -> None:
        acc = self._accumulator
        for state in queued:
            while state.queue and state.queue[0].deadline <= now and not state.queue[0].in_flight:
                batch = state.queue[0]
                acc._finish(batch, DeliveryTimeoutError(self._timeout_text(batch), batch.last_error))
                expired.append(batch)

    def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        """Encode and send one Produce request to ``node`` (outside the lock)."""
        acc = self._accumulator
        by_tp: dict[tuple[str, int], ProducerBatch] = {}
        topics: dict[str, list[PartitionProduceData]] = {}
        try:
            for batch in batches:
                data = self._batch_bytes(batch)
                by_tp[batch.tp] = batch
                topics.setdefault(batch.topic, []).append(
                    PartitionProduceData(index=batch.partition, records=data)
                )
            body = ProduceRequest(
                transactional_id=self._idempotence.transactional_id,
                acks=self._acks,
                timeout_ms=self._produce_timeout_ms,
                topic_data=[
                    TopicProduceData(name=name, partition_data=parts) for name, parts in topics.items()
                ],
            )
            connection = self._cluster.open_connection(node)
            if connection is None:  # closed since the plan: resent once connected again
                raise KafkaConnectionError(f"the connection to broker {node} closed before the send")
            version = connection.version_for(ApiKey.PRODUCE, min_version=FIRST_RECORD_BATCH_PRODUCE_VERSION)
            in_flight = connection.send(ApiKey.PRODUCE, body, version)
        except KafkaError as error:
            self._request_failed(node, batches, error)
            return
        except Exception as error:  # e.g. a codec error building a batch: fail those records
            with acc._lock:
                self._node_in_flight[node] -= 1
                for batch in batches:
                    acc._finish(batch, KafkaError(f"cannot send the batch: {error!r}"))
            run_callbacks(batches)
            return
        if self._acks == 0:
            with acc._lock:
                self._node_in_flight[node] -= 1
                for batch in batches:
                    acc._finish(batch)
            run_callbacks(batches)
            return
        self._receiver(node).put(InFlightProduce(node, connection, in_flight, by_tp))

    def _batch_bytes(self, batch: ProducerBatch) -> bytes:
        """The batch's bytes, built once; with idempotence, its producer id, epoch and sequence."""
        data = batch.data
        if data is None:
            assert batch.builder is not None
            data = batch.data = batch.builder.build()
        if batch.sequence is not None:
            data = self._idempotence.stamp(batch, data)
        return data

    def _receiver(self, node: int) -> queue.SimpleQueue[InFlightProduce | None]:
        acc = self._accumulator
        with acc._lock:
            entry = self._receivers.get(node)
            if entry is None or not entry[0].is_alive():
                work: queue.SimpleQueue[InFlightProduce | None] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._receive_loop,
                    args=(work,),
                    name=f"kctl-producer-receiver-{node}",
                    daemon=True,
                )
                thread.start()
                entry = self._receivers[node] = (thread, work)
            return entry[1]

    def _connect(self, node: int) -> None:
        """Connect to ``node`` (a background thread of its own); then plan again."""
        acc = self._accumulator
        failed = False
        try:
            self._cluster.connection(node, deadline=Deadline(self._request_timeout))
        except KafkaError as error:
            log.debug("cannot connect to broker %d: %s", node, error)
            failed = True
        with acc._lock:
            self._connecting.discard(node)
            if failed:  # a refused connect fails at once: the next one after a backoff
                self._unanswered.add(node)
                acc._metadata_wanted = True
                failures = self._connect_backoff.get(node, (0, 0.0))[0] + 1
                self._connect_backoff[node] = (failures, _monotonic() + self._backoff_after(failures))
            else:
                self._connect_backoff.pop(node, None)
            acc._wakeup.notify()

    def _receive_loop(self, work: queue.SimpleQueue[InFlightProduce | None]) -> None:
        while True:
            request = work.get()
            if request is None:
                return
            try:
                # request.timeout.ms counts from the send: an answer read first (in order, on one
                # connection) must not give the next request a whole timeout more
                timeout = request.in_flight.time_left(self._request_timeout)
                response = request.connection.receive(request.in_flight, timeout=timeout)
            except KafkaError as error:
                self._request_failed(request.node, list(request.batches.values()), error)
                continue
            except Exception as error:
                log.exception("reading a produce response failed")
                self._request_failed(request.node, list(request.batches.values()), KafkaError(repr(error)))
                continue
            try:
                self._handle_response(request, response)
            except Exception:
                log.exception("handling a produce response failed")

    def _request_failed(self, node: int, batches: list[ProducerBatch], error: KafkaError) -> None:
        """The request could not be sent or answered: every batch is retried (or failed)."""
        acc = self._accumulator
        retriable = error.retriable or isinstance(error, KafkaConnectionError | KafkaTimeoutError)
        if isinstance(error, KafkaProtocolError):
            retriable = False
        now = _monotonic()
        with acc._lock:
            self._node_in_flight[node] -= 1
            self._unanswered.add(node)
            acc._metadata_wanted = True
            for batch in batches:
                if retriable:
                    self._retry_or_fail(batch, error, now)
                else:
                    acc._finish(batch, error)
        run_callbacks(batches)

    def _handle_response(self, request: InFlightProduce, response: Any) -> None:
        acc = self._accumulator
        now = _monotonic()
        finished: list[ProducerBatch] = []
        with acc._lock:
            self._node_in_flight[request.node] -= 1
            self._unanswered.discard(request.node)
            answered: set[tuple[str, int]] = set()
            for topic in response.responses:
                for part in topic.partition_responses:
                    tp = (topic.name, part.index)
                    batch = request.batches.get(tp)
                    if batch is None or tp in answered:
                        continue
                    answered.add(tp)
                    finished.append(batch)
                    self._handle_partition(batch, part, now)
            for tp, batch in request.batches.items():
                if tp not in answered:
                    finished.append(batch)
                    self._retry_or_fail(
                        batch,
                        KafkaProtocolError(f"the produce response did not mention {tp[0]}-{tp[1]}"),
                        now,
                    )
        run_callbacks(finished)

    def _handle_partition(self, batch: ProducerBatch, part: Any, now: float) -> None:
        acc = self._accumulator
        code = part.error_code
        if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            batch.base_offset = part.base_offset
            batch.log_append_time = part.log_append_time_ms if part.log_append_time_ms is not None else -1
            acc._finish(batch)
            return
        error = response_error(
            code, part.error_message, context=f"produce to {batch.topic}-{batch.partition}"
        )
        state = acc._partitions.get(batch.tp)
        if code == ErrorCode.MESSAGE_TOO_LARGE and len(batch.futures) > 1:
            self._split(batch, now)
            return
        if code in _SEQUENCE_ERRORS:
            # Not written: an earlier batch is missing (being resent, or refused: then the sequence
            # numbers are reset already), or the broker lost track of the producer (reset them).
            # Neither is this batch nor any later one of the partition (the broker writes a producer's
            # batches in sequence order).
            if self._idempotence.enabled and (state is None or not state.blocked):
                self._idempotence.reset_sequences = True
            batch.possibly_written = False
            if state is not None:
                for queued in state.queue:
                    if queued.order > batch.order:
                        queued.possibly_written = False
            self._retry_or_fail(batch, error, now)
            return
        if code in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE,
            ErrorCode.KAFKA_STORAGE_ERROR,
        ):
            acc._metadata_wanted = True
        if error.retriable and code not in _NOT_RETRIED:
            self._retry_or_fail(batch, error, now)
        else:
            acc._finish(batch, error)

    def _split(self, batch: ProducerBatch, now: float) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: resend them as two batches (which keep
        the original's place in the partition's order and its sequence numbers). Lock held."""
        acc = self._accumulator
        state = acc._partitions[batch.tp]
        if batch.in_flight:
            batch.in_flight = False
            state.in_flight -= 1
        assert batch.data is not None
        records = decode_batch(batch.data).records
        half = len(records) // 2
        acc._release(batch)  # detached (never done): its futures move to the halves
        parts = []
        for number, (start, chunk) in enumerate(((0, records[:half]), (half, records[half:]))):
            builder = RecordBatchBuilder(compression=acc._codec, compression_level=acc._compression_level)
            part = ProducerBatch(
                next(acc._ids), batch.topic, batch.partition, builder, batch.created, acc._done
            )
            part.order = (*batch.order, number)
            part.deadline = batch.deadline
            part.closed = True
            part.attempts = batch.attempts
            part.last_error = batch.last_error
            if batch.sequence is not None:
                part.sequence = (batch.sequence + start) % SEQUENCE_MODULUS
            for index, record in enumerate(chunk):
                builder.append(record.timestamp, record.key, record.value, record.headers)
                future = batch.futures[start + index]
                acc._move_future(future, part, index)
                part.futures.append(future)
            part.size = builder.estimated_size_in_bytes()
            part.reserved = part.size
            acc._buffer_used += part.reserved
            acc._incomplete[part.id] = part
            parts.append(part)
        state.blocked = True
        for part in parts:
            acc._requeue(state, part)
        with acc._done:
            acc._done.notify_all()  # waiters on the old batch look at their new one
        acc._wakeup.notify()

    def _refresh_metadata(self) -> None:
        """Ask for the metadata of every topic the producer uses (outside the lock)."""
        acc = self._accumulator
        with acc._lock:
            topics = sorted({*acc._topics, *acc._pending})
            acc._metadata_wanted = False
        try:
            metadata = self._cluster.refresh_metadata(
                topics, allow_auto_create=True, deadline=Deadline(self._request_timeout)
            )
        except KafkaError as error:
            log.debug("metadata refresh failed: %s", error)
            with acc._lock:
                for topic in acc._pending:
                    acc._metadata_error[topic] = error
                acc._metadata_wanted = True
                self._metadata_next = _monotonic() + self._metadata_backoff
                self._metadata_backoff = min(self._metadata_backoff * 2, self._backoff_max)
            return
        failed: list[ProducerBatch] = []
        with acc._lock:
            incomplete = acc._apply_metadata(metadata, topics, failed)
            self._metadata_refreshed = now = _monotonic()
            if incomplete:
                acc._metadata_wanted = True
                self._metadata_next = now + self._metadata_backoff
                self._metadata_backoff = min(self._metadata_backoff * 2, self._backoff_max)
            else:
                self._metadata_backoff = self._backoff
                self._metadata_next = now + self._backoff
        run_callbacks(failed)

    def _init_producer_id(self) -> None:
        """Get a producer id (or bump the epoch to reset sequences), outside the lock."""
        idempotence = self._idempotence
        result = idempotence.request_producer_id(self._cluster, self._request_timeout)
        acc = self._accumulator
        with acc._lock:
            fatal = idempotence.apply(result, acc._partitions.values(), _monotonic() + self._backoff_max)
            if fatal is not None:
                acc._fatal = fatal
            elif result.error is not None and not result.fatal:
                acc._metadata_wanted = True
            elif result.error is None and not result.unsupported:
                acc._wakeup.notify()


def _not_retriable(error: BaseException) -> KafkaError:
    """AddPartitionsToTxn failed (after its own retries): the batches fail, the transaction aborts."""
    if (
        isinstance(error, KafkaError)
        and not error.retriable
        and not isinstance(error, KafkaConnectionError | KafkaTimeoutError)
    ):
        return error
    return KafkaProtocolError(f"the partition could not join the transaction: {error}")


def _earliest(current: float | None, candidate: float) -> float:
    candidate = max(candidate, 0.0)
    return candidate if current is None else min(current, candidate)
