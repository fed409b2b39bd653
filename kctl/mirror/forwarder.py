"""The data path of one source cluster into the target: fetch record batches from the source's
leaders, write them to the target's leaders with the mirror's idempotent producer identity, and
advance each partition's position only once the target acknowledged.

One ``Forwarder`` per source runs two workers, so that fetch latency and produce latency overlap
instead of adding up:

- the **fetch worker** (its own thread, ``start()``/``stop_fetching()``) sends Fetch requests (one
  per source leader), frames the answers into pieces (``kctl.mirror.batches``; records are decoded
  only for batches that cannot travel as they are), stamps each piece with the mirror's producer id
  and the partition's next sequence, and appends it to the partition's queue. The queues are the
  bounded buffer between the workers: a partition with ``max_queued_bytes`` queued is not fetched
  until the target acknowledged some of it;
- the **produce worker** (the caller's thread, ``run_once()``) sends the queued batches
  (``acks=-1``; per target leader pipelined requests, each with one batch of every partition that has
  one queued — Kafka's brokers take one batch per partition in a Produce request — up to
  ``MAX_IN_FLIGHT`` batches of a partition in flight; as each answer comes in, the partitions it
  answered send their next batch at once, so the window slides), takes the acknowledged batches off
  the queues and records offset syncs. The caller commits ``acked`` on the same thread, so source
  positions and offset syncs are only ever stored for what the target acknowledged.

Batches travel as opaque bytes: ``restamp`` rewrites only header fields (base_offset, producer id,
epoch, sequence...) and the CRC-32C. The workers share the queues and counters under one lock, held
only for bookkeeping, never across a network call.

Delivery: each partition's pieces get consecutive sequence numbers of the mirror's producer id
(InitProducerId on the target), so a Produce the target already wrote and the mirror sends again
(after a lost connection, a leader change, ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``) is recognised and
not written twice. ``acked`` is one past the last source offset the target acknowledged; the mirror
commits it (``kctl.mirror.mirror``). After ``OUT_OF_ORDER_SEQUENCE_NUMBER`` or
``UNKNOWN_PRODUCER_ID`` the producer id is renewed and the unacknowledged pieces are numbered again
(they may then be written twice: the duplicates the at-least-once contract allows, bounded by what
was in flight).

Partitions whose target topic has a different partition count (``keyed``) are decoded and produced
through a ``kctl.client.Producer``, partitioned by key.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.client import (
    BrokerResponseError,
    ClusterClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    Producer,
    ProducerConfig,
    TopicPartition,
)
from kctl.client.consumer.fetcher import FETCH_MAX_VERSION, FETCH_MIN_VERSION, build_fetch_request
from kctl.client.producer.idempotence import SEQUENCE_MODULUS
from kctl.mirror.batches import Piece, frame_partition, restamp
from kctl.mirror.offset_syncs import OffsetSync
from kctl.protocol import ApiKey, ErrorCode, error_name
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.header import InvalidRecordBatch, parse_header
from kctl.records.reader import decode_records

__all__ = ["Forwarder", "MirrorError", "PartitionState", "producer_properties"]

log = logging.getLogger(__name__)

PRODUCE_VERSION_MIN = 3
RESEND_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.CORRUPT_MESSAGE,
    }
)
"""Produce errors after which the same bytes (same sequence numbers) are sent again."""
RENUMBER_CODES = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
    }
)
"""Produce errors after which the producer id is renewed and the pieces numbered again."""
MAX_IN_FLIGHT = 5
"""Batches of one partition in flight at once. Kafka's brokers take one batch per partition in a
Produce request (v3+) and keep an idempotent producer's last 5 batches per partition to recognise a
batch sent again, so at most 5 may be unanswered."""
REFETCH_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)


def producer_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties of a producer the mirror writes to a target with (the keyed path, the offset
    syncs): the cluster's producer properties (security settings included), idempotent, acks=all."""
    known = ProducerConfig.known_keys()
    config = {k: v for k, v in properties.items() if k in known}
    config.update({"acks": "all", "enable.idempotence": "true"})
    return config


class MirrorError(KafkaError):
    """Mirroring cannot go on; the message names the cluster and topic."""


@dataclass(slots=True)
class Unit:
    """A piece on its way to the target, numbered ``sequence`` of the producer id it was stamped for."""

    piece: Piece
    sequence: int
    data: bytes | bytearray | memoryview


@dataclass(slots=True)
class PartitionState:
    """One mirrored partition: where fetching is, what the target acknowledged, what is queued."""

    source: TopicPartition
    target: TopicPartition
    position: int
    acked: int
    committed: int = -1
    stop_at: int | None = None
    keyed: bool = False
    queue: collections.deque[Unit] = field(default_factory=collections.deque)
    in_flight: int = 0
    failed: bool = False
    queued_bytes: int = 0
    next_sequence: int = 0
    last_delta: int | None = None
    sync_next: bool = True
    high_watermark: int = -1
    records: int = 0
    bytes: int = 0
    error: str | None = None

    @property
    def lag(self) -> int:
        return max(self.high_watermark - self.acked, 0) if self.high_watermark >= 0 else 0

    @property
    def done(self) -> bool:
        """Caught up with ``stop_at`` (``--once``)."""
        return self.stop_at is not None and self.acked >= self.stop_at and not self.queue


@dataclass
class _InFlight:
    node: int
    connection: Any
    version: int
    request: Any
    partitions: dict[TopicPartition, PartitionState]


def _sendable(state: PartitionState) -> bool:
    """Whether the partition may send its next batch now (produced here, not waiting for the
    answers after a failure, fewer than MAX_IN_FLIGHT batches in flight, one queued unsent)."""
    return (
        not state.keyed
        and not state.failed
        and state.in_flight < MAX_IN_FLIGHT
        and state.in_flight < len(state.queue)
    )


class Forwarder:
    """Moves the records of ``partitions`` from ``source`` to ``target`` (see the module docstring).
    ``on_sync`` receives each offset sync to store; ``alias`` names the source in errors and syncs."""

    def __init__(
        self,
        alias: str,
        source: ClusterClient,
        target: ClusterClient,
        target_alias: str,
        *,
        target_properties: Mapping[str, str],
        target_bootstrap: str,
        on_sync: Callable[[OffsetSync], None],
        fetch_max_bytes: int = 16 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        max_queued_bytes: int = 8 * 1024 * 1024,
        fetch_wait_ms: int = 500,
        produce_timeout_ms: int = 30_000,
    ) -> None:
        self.alias = alias
        self.source = source
        self.target = target
        self.target_alias = target_alias
        self._target_properties = dict(target_properties)
        self._target_bootstrap = target_bootstrap
        self._on_sync = on_sync
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.max_queued_bytes = max_queued_bytes
        self.fetch_wait_ms = fetch_wait_ms
        self.produce_timeout_ms = produce_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._keyed_producer: Producer | None = None
        self._produce_in_flight: list[_InFlight] = []
        self._renumber_pending = False
        self._backoff_until = 0.0  # the produce worker's
        self._fetch_backoff_until = 0.0
        self._lock = threading.Lock()  # queues, queued_bytes, sequences, acked/sync_next between workers
        self._generation = 0  # bumped (under the lock) by every new producer id
        self._fetched = threading.Event()  # set by the fetch worker when it queued pieces
        self._room = threading.Event()  # set by the produce worker when acknowledged bytes left a queue
        self._stopping = threading.Event()
        self._fetch_thread: threading.Thread | None = None
        self._fetch_error: BaseException | None = None

    # ------------------------------------------------------------------------------ producer id

    def init_producer_id(self) -> None:
        """A new producer id from the target (InitProducerId); every queued piece is numbered again."""

        def attempt() -> Any:
            conn = self.target.any_connection()
            version = conn.version_for(ApiKey.INIT_PRODUCER_ID)
            body = InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
            )
            response = conn.request(ApiKey.INIT_PRODUCER_ID, body, version)
            if response.error_code:
                raise BrokerResponseError(
                    response.error_code, context=f"InitProducerId on {self.target_alias}"
                )
            return response

        response = self.target.retry(attempt, description="InitProducerId")
        self._renumber(response.producer_id, response.producer_epoch)

    def _renumber(self, producer_id: int, producer_epoch: int) -> None:
        """Take a new producer id: every queued piece numbered again from sequence 0."""
        with self._lock:  # the fetch worker stamps with what is set here
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self._generation += 1
            for state in list(self.partitions.values()):
                state.next_sequence = 0
                state.sync_next = True
                if state.keyed:
                    continue
                renumbered = [self._stamp(state, unit.piece) for unit in state.queue]
                state.queue.clear()
                state.queue.extend(renumbered)
                state.queued_bytes = sum(len(unit.data) for unit in renumbered)

    def _stamp(self, state: PartitionState, piece: Piece) -> Unit:
        """The piece numbered with the partition's next sequence (under ``_lock`` once the fetch
        worker runs)."""
        sequence = state.next_sequence
        state.next_sequence = (sequence + piece.records_count) % SEQUENCE_MODULUS
        data = restamp(piece, self.producer_id, self.producer_epoch, sequence, in_place=True)
        return Unit(piece, sequence, data)

    def _queue_piece(self, state: PartitionState, piece: Piece) -> None:
        """The fetch worker's side: number the piece (under the lock), restamp it (CRC-32C: outside
        the lock, so the produce worker's bookkeeping never waits for it), queue it (under the lock;
        numbered again if a new producer id came meanwhile)."""
        if state.keyed:
            with self._lock:
                state.queue.append(Unit(piece, -1, piece.data))
                state.queued_bytes += len(piece.data)
            return
        with self._lock:
            generation, producer_id, producer_epoch = self._generation, self.producer_id, self.producer_epoch
            sequence = state.next_sequence
            state.next_sequence = (sequence + piece.records_count) % SEQUENCE_MODULUS
        data = restamp(piece, producer_id, producer_epoch, sequence, in_place=True)
        with self._lock:
            renumbered = generation != self._generation
            unit = self._stamp(state, piece) if renumbered else Unit(piece, sequence, data)
            state.queue.append(unit)
            state.queued_bytes += len(unit.data)

    # ------------------------------------------------------------------------------ partitions

    def add_partition(self, state: PartitionState) -> None:
        self.partitions[state.source] = state

    def remove_partition(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    @property
    def idle(self) -> bool:
        return not self._produce_in_flight and all(not s.queue for s in list(self.partitions.values()))

    # ------------------------------------------------------------------------------ the workers

    def start(self) -> None:
        """Start the fetch worker (after ``init_producer_id``)."""
        if self._fetch_thread is not None:
            return
        self._stopping.clear()
        self._fetch_thread = threading.Thread(
            target=self._fetch_loop, name=f"kctl-mirror-fetch-{self.alias}", daemon=True
        )
        self._fetch_thread.start()

    def stop_fetching(self, timeout: float | None = None) -> None:
        """Stop the fetch worker and wait for it (at most its Fetch's wait and request timeout):
        what it queued stays queued, for ``drain``."""
        self._stopping.set()
        self._room.set()
        thread, self._fetch_thread = self._fetch_thread, None
        if thread is not None and thread is not threading.current_thread():
            if timeout is None:
                timeout = self.fetch_wait_ms / 1000 + self.source.config.request_timeout
            thread.join(timeout)
            if thread.is_alive():
                log.warning("source %s: the fetch worker did not stop in %.0fs", self.alias, timeout)

    def _fetch_loop(self) -> None:
        """The fetch worker: fetch what has room in its queue, queue the pieces; until stopped or
        failed (the error is raised by the produce worker's next ``run_once``)."""
        try:
            while not self._stopping.is_set():
                pause = self._fetch_backoff_until - time.monotonic()
                if pause > 0:
                    self._stopping.wait(min(pause, 0.2))
                    continue
                self._room.clear()
                fetches, held_back = self._fetch_targets()
                if not fetches:
                    self._room.wait(0.1)  # every queue full (or nothing to fetch): until acknowledgements
                    continue
                # a partition held back by a full queue is fetched again soon: no long poll then
                sent = self._send_fetches(fetches, wait_ms=min(self.fetch_wait_ms, 20) if held_back else None)
                if not sent:  # no leader known, no connection: not again at once
                    backoff = self.source.config.retry_backoff_ms / 1000
                    self._fetch_backoff_until = max(self._fetch_backoff_until, time.monotonic() + backoff)
                    continue
                if self._receive_fetches(sent):
                    self._fetched.set()
        except BaseException as error:  # handed to the produce worker
            self._fetch_error = error
            self._fetched.set()

    def _raise_fetch_error(self) -> None:
        error, self._fetch_error = self._fetch_error, None
        if error is not None:
            raise error

    def run_once(self) -> bool:
        """One round of the produce worker (the answers that came in, the batches that can go);
        waits a little for the fetch worker when nothing is in flight. Whether anything was
        acknowledged. Raises the fetch worker's error (MirrorError naming cluster and topic)."""
        self._raise_fetch_error()
        now = time.monotonic()
        if now < self._backoff_until:
            time.sleep(min(self._backoff_until - now, 0.2))
        self._fetched.clear()  # before looking at the queues: a piece queued after this wakes the wait
        progressed = self._receive_produces()
        self._send_produces()
        if not progressed and not self._produce_in_flight:  # (after progress: the caller's turn first,
            self._fetched.wait(0.05)  # e.g. ``--once`` ending as soon as the last batch is acknowledged)
            self._raise_fetch_error()
        return progressed

    def drain(self, timeout: float) -> None:
        """Wait for the Produce requests in flight and send what is queued (at a stop, once the
        fetch worker stopped: nothing more is fetched)."""
        deadline = time.monotonic() + timeout
        while (self._produce_in_flight or any(s.queue for s in self.partitions.values())) and (
            time.monotonic() < deadline
        ):
            self._receive_produces()
            if time.monotonic() >= deadline:
                break
            self._send_produces()
            if not self._produce_in_flight:
                time.sleep(0.05)

    # ------------------------------------------------------------------------------ fetch

    def _fetch_targets(self) -> tuple[list[PartitionState], bool]:
        """The partitions to fetch now, and whether any was held back by a full queue."""
        wanted, held_back = [], False
        for state in list(self.partitions.values()):  # a snapshot: the run thread adds partitions
            if state.error is not None:
                continue
            if state.stop_at is not None and state.position >= state.stop_at:
                continue
            if state.queued_bytes >= self.max_queued_bytes:
                held_back = True
                continue
            wanted.append(state)
        return wanted, held_back

    def _send_fetches(
        self, states: Iterable[PartitionState], wait_ms: int | None = None
    ) -> list[tuple[int, Any, Any, list[PartitionState]]]:
        """A Fetch request to each source leader of ``states`` (sent, not yet answered)."""
        by_leader: dict[int, list[PartitionState]] = {}
        for state in states:
            try:  # from the cached metadata, refreshed once it was marked stale (a leader change)
                leader = self.source.leader_for(state.source, deadline=self.source.deadline(5))
            except KafkaError as error:
                log.debug("no leader for %s on %s: %s", state.source, self.alias, error)
                self.source.mark_stale()
                continue
            by_leader.setdefault(leader, []).append(state)
        sent = []
        for node, states in by_leader.items():
            try:
                conn = self.source.connection(node, deadline=self.source.deadline(10))
                if conn.frame_pool is None:  # Fetch answers into memory used again, once acknowledged
                    conn.use_frame_pool()
                version = conn.version_for(
                    ApiKey.FETCH, min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION
                )
                body = build_fetch_request(
                    [(s.source, s.position) for s in states],
                    max_wait_ms=self.fetch_wait_ms if wait_ms is None else wait_ms,
                    min_bytes=1,
                    max_bytes=self.fetch_max_bytes,
                    partition_max_bytes=self.partition_max_bytes,
                )
                sent.append((node, conn, conn.send(ApiKey.FETCH, body, version), states))
            except KafkaError as error:
                self._source_trouble(error)
        return sent

    def _receive_fetches(self, sent: list[tuple[int, Any, Any, list[PartitionState]]]) -> bool:
        progressed = False
        timeout = self.fetch_wait_ms / 1000 + self.source.config.request_timeout
        for _node, conn, in_flight, states in sent:
            try:
                response = conn.receive(in_flight, timeout=timeout)
            except KafkaError as error:
                self._source_trouble(error)
                continue
            if getattr(response, "error_code", 0):
                self._source_trouble(
                    BrokerResponseError(response.error_code, context=f"fetch from {self.alias}")
                )
                continue
            wanted = {s.source: s for s in states}
            for topic in response.responses:
                for part in topic.partitions:
                    state = wanted.get(TopicPartition(topic.topic, part.partition_index))
                    if state is not None:
                        progressed = self._take_fetched(state, part) or progressed
        return progressed

    def _take_fetched(self, state: PartitionState, part: Any) -> bool:
        code = part.error_code
        if code:
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._reset_out_of_range(state)
            elif code in REFETCH_CODES:
                self.source.mark_stale()
            else:
                state.error = f"{error_name(code)} fetching from {self.alias}"
                raise MirrorError(
                    f"source {self.alias}: topic {state.source}: fetch failed with {error_name(code)}"
                )
            return False
        state.high_watermark = part.high_watermark
        try:
            framed = frame_partition(part.records, state.position)
        except InvalidRecordBatch as error:
            raise MirrorError(
                f"source {self.alias}: topic {state.source}: "
                f"corrupt batch at offset {state.position}: {error}"
            ) from None
        if framed.next_offset is None:
            return False
        for piece in framed.pieces:
            if state.stop_at is not None and piece.source_offset >= state.stop_at:
                break
            self._queue_piece(state, piece)
        state.position = framed.next_offset
        with self._lock:
            if not framed.pieces and state.acked < state.position and not state.queue and not state.in_flight:
                state.acked = state.position  # only control batches or nothing left after a rebuild
                state.sync_next = True
        return True

    def _reset_out_of_range(self, state: PartitionState) -> None:
        from kctl.client.consumer.offsets import list_offsets

        result = list_offsets(self.source, {state.source: "earliest"})
        start = result[state.source].offset if state.source in result else 0
        latest = list_offsets(self.source, {state.source: "latest"})
        end = latest[state.source].offset if state.source in latest else start
        new = start if state.position < start else end
        log.warning(
            "source %s: %s: offset %d is out of range (log %d..%d): going on from %d",
            self.alias,
            state.source,
            state.position,
            start,
            end,
            new,
        )
        state.position = new
        with self._lock:
            if not state.queue and not state.in_flight:
                state.acked = new
            state.sync_next = True

    def _source_trouble(self, error: KafkaError) -> None:
        self.source.mark_stale()
        log.debug("source %s: %s", self.alias, error)
        self._fetch_backoff_until = time.monotonic() + self.source.config.retry_backoff_ms / 1000

    # ------------------------------------------------------------------------------ produce

    def _send_produces(self) -> None:
        """Per target leader, pipelined Produce requests, each with the next unsent batch of every
        partition it leads (one batch per partition and request), until every partition has
        MAX_IN_FLIGHT batches (or all it has) in flight."""
        keyed = [s for s in self.partitions.values() if s.keyed and s.queue]
        if keyed:
            self._send_keyed(keyed)
        if self._renumber_pending:
            return
        by_leader: dict[int, list[PartitionState]] = {}
        for state in self.partitions.values():
            if not _sendable(state):
                continue
            try:
                leader = self.target.leader_for(state.target, deadline=self.target.deadline(5))
            except KafkaError as error:
                log.debug("no leader for %s on %s: %s", state.target, self.target_alias, error)
                self.target.mark_stale()
                continue
            by_leader.setdefault(leader, []).append(state)
        for node, states in by_leader.items():
            try:
                conn = self.target.connection(node, deadline=self.target.deadline(10))
                version = conn.version_for(ApiKey.PRODUCE, min_version=PRODUCE_VERSION_MIN)
            except KafkaError as error:
                self._produce_failed(error)
                continue
            while self._send_one(node, conn, version, states):
                pass

    def _send_one(self, node: int, conn: Any, version: int, states: Iterable[PartitionState]) -> bool:
        """One Produce request to ``node`` with the next unsent batch of each of ``states`` that may
        send one; whether a request went."""
        ready = [s for s in states if _sendable(s)]
        if not ready:
            return False
        topics: dict[str, list[PartitionProduceData]] = {}
        for state in ready:
            topics.setdefault(state.target.topic, []).append(
                PartitionProduceData(index=state.target.partition, records=state.queue[state.in_flight].data)
            )
            state.in_flight += 1
        body = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=self.produce_timeout_ms,
            topic_data=[TopicProduceData(name=n, partition_data=p) for n, p in topics.items()],
        )
        try:
            request = conn.send(ApiKey.PRODUCE, body, version)
        except KafkaError as error:
            for state in ready:
                state.in_flight -= 1
            self._produce_failed(error)
            return False
        self._produce_in_flight.append(_InFlight(node, conn, version, request, {s.target: s for s in ready}))
        return True

    def _produce_failed(self, error: KafkaError) -> None:
        self.target.mark_stale()
        if not isinstance(error, KafkaConnectionError | KafkaTimeoutError) and not getattr(
            error, "retriable", False
        ):
            raise MirrorError(f"target {self.target_alias}: {error}") from None
        log.debug("target %s: %s (sending again)", self.target_alias, error)
        self._backoff_until = time.monotonic() + self.target.config.retry_backoff_ms / 1000

    def _receive_produces(self) -> bool:
        """The answers to the Produce requests in flight, in the order they were sent; after each,
        the partitions it answered send their next batch at once (a sliding window, so the target
        always has work). A batch acknowledged is taken off its partition's queue. After a
        partition's first failure (``failed``) it sends nothing and its answers still to come are
        ignored; once they are all in, its queued batches go again (same producer id and sequences:
        the target recognises any it wrote). A producer id to renew is renewed once nothing is in
        flight."""
        progressed = False
        pending, self._produce_in_flight = self._produce_in_flight, []
        timeout = self.produce_timeout_ms / 1000 + self.target.config.request_timeout
        for flight in pending:
            try:
                wait = flight.request.time_left(timeout)
                response = flight.connection.receive(flight.request, timeout=wait)
            except KafkaError as error:
                for broken in flight.partitions.values():
                    broken.in_flight -= 1
                    broken.failed = True
                self._produce_failed(error)
                continue
            answered = set()
            for topic in response.responses:
                for part in topic.partition_responses:
                    tp = TopicPartition(topic.name, part.index)
                    state = flight.partitions.get(tp)
                    if state is None or tp in answered:
                        continue
                    answered.add(tp)
                    state.in_flight -= 1
                    if state.failed:
                        continue
                    outcome = self._take_produced(state, part)
                    if outcome == "ok":
                        progressed = True
                    else:
                        state.failed = True
                        if outcome == "renumber":
                            self._renumber_pending = True
            for tp, unanswered in flight.partitions.items():
                if tp not in answered:
                    unanswered.in_flight -= 1
                    unanswered.failed = True
            if not self._renumber_pending:
                self._send_one(flight.node, flight.connection, flight.version, flight.partitions.values())
        for done in self.partitions.values():
            if done.failed and not done.in_flight:
                done.failed = False  # every answer is in: what is still queued goes again
        if self._renumber_pending and not self._produce_in_flight:
            self._renumber_pending = False
            log.warning("target %s: sequence numbers rejected: renewing the producer id", self.target_alias)
            self.init_producer_id()
        return progressed

    def _take_produced(self, state: PartitionState, part: Any) -> str:
        """One partition's answer to its batch at the head of its queue: ``ok``, ``resend`` or
        ``renumber`` (MirrorError when it cannot go on)."""
        code = part.error_code
        if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            target_offset = part.base_offset if code == ErrorCode.NONE else -1
            self._acknowledged(state, target_offset)
            return "ok"
        if code in RENUMBER_CODES:
            return "renumber"
        if code in RESEND_CODES:
            self.target.mark_stale()
            return "resend"
        raise MirrorError(
            f"target {self.target_alias}: topic {state.target} (from {self.alias} {state.source}): "
            f"produce failed with {error_name(code)}"
            + (f": {part.error_message}" if getattr(part, "error_message", None) else "")
        )

    def _acknowledged(self, state: PartitionState, target_offset: int) -> None:
        """The batch at the head of the partition's queue was written at ``target_offset`` (-1: a
        duplicate the target had): off the queue, ``acked`` moves, an offset sync when needed."""
        sync = None
        with self._lock:
            unit = state.queue.popleft()
            piece = unit.piece
            state.queued_bytes -= len(unit.data)
            state.records += piece.records_count
            state.bytes += len(unit.data)
            if target_offset < 0:  # a duplicate the target had: where it is is unknown
                state.sync_next = True
            else:
                delta = target_offset - piece.source_offset
                if state.sync_next or delta != state.last_delta or not piece.linear:
                    sync = OffsetSync(
                        self.alias,
                        state.source.topic,
                        state.source.partition,
                        piece.source_offset,
                        state.target.topic,
                        target_offset,
                        piece.linear,
                    )
                state.last_delta = delta
                state.sync_next = not piece.linear
            state.acked = piece.source_next
        self._room.set()
        if sync is not None:
            self._on_sync(sync)

    # ------------------------------------------------------------------------------ keyed

    def _send_keyed(self, states: list[PartitionState]) -> None:
        if self._keyed_producer is None:
            config = producer_properties(self._target_properties)
            self._keyed_producer = Producer(self._target_bootstrap, config)
        producer = self._keyed_producer
        futures = []
        taken: dict[TopicPartition, int] = {}
        for state in states:
            with self._lock:
                units = list(state.queue)
            taken[state.source] = len(units)
            for unit in units:
                header = parse_header(unit.piece.data)
                for record in decode_records(unit.piece.data, 0, header):
                    futures.append(
                        producer.send(
                            state.target.topic,
                            record.value,
                            record.key,
                            headers=list(record.headers),
                            timestamp=record.timestamp,
                        )
                    )
        producer.flush()
        for future in futures:
            error = future.exception(0)
            if error is not None:
                raise MirrorError(f"target {self.target_alias}: {error}")
        for state in states:
            with self._lock:
                for _ in range(taken[state.source]):
                    unit = state.queue.popleft()
                    state.queued_bytes -= len(unit.data)
                    state.records += unit.piece.records_count
                    state.bytes += len(unit.data)
                    state.acked = unit.piece.source_next
        self._room.set()

    def close(self) -> None:
        self.stop_fetching()
        if self._keyed_producer is not None:
            self._keyed_producer.close(5)
            self._keyed_producer = None
