"""The record accumulator: the producer's batches being filled, per partition, and everything a record
goes through between ``send`` and the sender thread.

``send`` (``Producer``, the caller's thread) picks the partition and appends the record to that
partition's open batch (a ``RecordBatchBuilder``); a batch closes when it reaches ``batch.size``
bytes, and is ready to go when it is closed, older than ``linger.ms``, or a flush hurries it
(``_ready_at``). Each partition has a queue of batches (``PartitionState``: oldest first, the last may
still be open). Records to a topic whose metadata is not known yet wait in placeholder batches,
grouped per second of arrival, until the sender has the metadata (``_apply_metadata`` places them).
Batches reserve ``buffer.memory``; ``send`` blocks for it up to ``max.block.ms``.

``RecordAccumulator`` holds that state under one lock (``_lock``), with the conditions the sender
(``_wakeup``), ``flush`` (``_idle``), a blocked ``send`` (``_space``) and the futures (``_done``) wait
on. ``Producer`` extends it with the public API, so that ``send``'s fast path reads this state with no
indirection; the ``Sender`` drains it.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kctl.client.errors import BrokerResponseError, KafkaError, KafkaTimeoutError
from kctl.client.partitioner import DefaultPartitioner, Partitioner, load_partitioner, murmur2
from kctl.client.producer.batch import ProducerBatch, ProducerClosedError, RecordFuture, no_builder
from kctl.client.producer.idempotence import Idempotence
from kctl.client.producer_config import ProducerConfig
from kctl.protocol import ErrorCode
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import HEADER_SIZE

if TYPE_CHECKING:
    from kctl.client.producer.transactions import TransactionManager

__all__ = [
    "HEADER_OVERHEAD",
    "KEY_HASH_CACHE_SIZE",
    "PENDING_CHUNK_SECONDS",
    "RECORD_OVERHEAD",
    "PartitionState",
    "RecordAccumulator",
    "TopicInfo",
    "headers_size",
]

RECORD_OVERHEAD = 16
"""Bytes a record takes beside its key, value and headers (length, attributes, deltas, lengths): an
estimate used to decide when a batch is full."""
HEADER_OVERHEAD = 4
KEY_HASH_CACHE_SIZE = 65_536
"""Keys whose murmur2 the producer remembers (all are forgotten when the table is full)."""
PENDING_CHUNK_SECONDS = 1.0
"""Records waiting for a topic's metadata are grouped per second of arrival; a group fails together
when its first record has waited ``delivery.timeout.ms``."""

_monotonic = time.monotonic

# Metadata errors of a topic that fail its waiting records at once.
_FATAL_TOPIC_ERRORS = frozenset({ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_AUTHORIZATION_FAILED})


class TopicInfo(NamedTuple):
    partitions: tuple[int, ...]
    available: tuple[int, ...]


class PartitionState:
    """A partition's queue of batches (oldest first; the last may still be open), its in-flight
    count, the broker they went to (``sent_to``), and the resent batch in flight, if any."""

    __slots__ = ("blocked", "in_flight", "leader", "next_sequence", "queue", "resend", "sent_to")

    def __init__(self) -> None:
        self.queue: collections.deque[ProducerBatch] = collections.deque()
        self.in_flight = 0
        self.blocked = False  # a batch failed: nothing newer is sent until the in-flight ones return
        self.next_sequence = 0
        self.leader = -1
        self.sent_to = -1  # the broker of the batches in flight (one at a time, with idempotence)
        self.resend: ProducerBatch | None = None  # a resent batch: in flight, it goes alone

    def resend_in_flight(self) -> bool:
        """A resent batch is in flight: nothing else of the partition is sent until it is answered."""
        resend = self.resend
        if resend is not None and not resend.in_flight:
            resend = self.resend = None
        return resend is not None


def headers_size(headers: Iterable[tuple[Any, Any]]) -> int:
    size = 1
    for key, value in headers:
        size += HEADER_OVERHEAD + len(key) + (len(value) if value is not None else 0)
    return size


def _as_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"a record's {what} must be bytes, str or None, not {type(value).__name__}")


def _normalize_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            key, value = item
        except (TypeError, ValueError):
            raise TypeError(f"a header must be a (key, value) pair, not {item!r}") from None
        if isinstance(key, bytes | bytearray):
            key = bytes(key).decode("utf-8")
        elif not isinstance(key, str):
            raise TypeError(f"a header key must be str, not {type(key).__name__}")
        out.append((key, _as_bytes(value, "header value")))
    return out


class RecordAccumulator:
    """The batches of a producer, from ``send`` to their completion; see the module docstring."""

    def __init__(self, config: ProducerConfig) -> None:
        self.config = config
        self._partitioner: Partitioner = load_partitioner(config.partitioner_class)
        # The default partitioner keeps records without a key on one partition until a batch of it
        # is closed (on_new_batch): with it, send finds that partition's open batch in one look-up.
        default = type(self._partitioner).partition is DefaultPartitioner.partition
        self._sticky: dict[str, ProducerBatch] | None = {} if default else None
        # ...and puts a key where murmur2 says: the hash of recent keys is remembered (pure-Python
        # murmur2 costs more than the rest of send).
        self._key_hashes: dict[bytes, int] | None = {} if default else None
        self._codec = config.compression
        self._compression_level = config.compression_level
        # a batch never outgrows a request; a record never outgrows a request or the buffer
        self._batch_size = max(min(config.batch_size, config.max_request_size - HEADER_SIZE), 1)
        self._max_record = min(config.max_request_size - HEADER_SIZE, config.buffer_memory)
        self._linger = config.linger_ms / 1000.0
        self._buffer_memory = config.buffer_memory
        self._max_block = config.max_block_ms / 1000.0
        self._delivery_timeout = config.delivery_timeout_ms / 1000.0

        self._lock = threading.Lock()  # the producer's state: queues, batches, counters
        self._wakeup = threading.Condition(self._lock)  # the sender waits on it
        self._idle = threading.Condition(self._lock)  # flush waits on it
        self._space = threading.Condition(self._lock)  # send waits on it for buffer memory
        # The futures' condition: reentrant (concurrent.futures.wait acquires it once per future).
        # Taken after self._lock, never before it.
        self._done = threading.Condition(threading.RLock())
        self._ids = itertools.count(1)
        self._topics: dict[str, TopicInfo] = {}
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        self._pending: dict[str, list[ProducerBatch]] = {}
        self._incomplete: dict[int, ProducerBatch] = {}
        self._buffer_used = 0
        self._idempotence = Idempotence(config.idempotence)
        self._fatal: BaseException | None = None
        self._transactions: TransactionManager | None = None  # set by a transactional Producer
        self._metadata_wanted = False
        self._metadata_error: dict[str, BaseException] = {}
        self._flushing = 0
        self._closing = False
        self._stopping = False

    def _coerce_record(self, key: Any, value: Any, headers: Any) -> tuple[Any, Any, Any]:
        return (
            _as_bytes(key, "key"),
            _as_bytes(value, "value"),
            _normalize_headers(headers) if headers else (),
        )

    def _batch_for(self, tp: tuple[str, int], size: int, block: bool) -> ProducerBatch | None:
        """The open batch of ``tp`` with room for ``size`` bytes: the current one, or a new one
        (blocking for buffer memory when ``block``). None when the record can never be sent.
        Called with the lock held."""
        if self._closing and block:
            raise ProducerClosedError("the producer is closed")
        if self._fatal is not None:
            raise KafkaError(f"the producer cannot send: {self._fatal}")
        if size > self._max_record:
            return None
        batch = self._open.get(tp)
        if batch is not None:
            if batch.size + size <= self._batch_size:
                return batch
            self._close_open(batch)
        reserve = max(self._batch_size, size + HEADER_SIZE)
        if block and self._buffer_used + reserve > self._buffer_memory:
            self._wait_for_space(reserve)
            batch = self._open.get(tp)  # another thread may have opened one meanwhile
            if batch is not None and batch.size + size <= self._batch_size:
                return batch
            if batch is not None:
                self._close_open(batch)
        now = _monotonic()
        builder = RecordBatchBuilder(compression=self._codec, compression_level=self._compression_level)
        batch = ProducerBatch(next(self._ids), tp[0], tp[1], builder, now, self._done)
        batch.deadline = now + self._delivery_timeout
        batch.reserved = reserve
        self._buffer_used += reserve
        self._open[tp] = batch
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = PartitionState()
        state.queue.append(batch)
        self._incomplete[batch.id] = batch
        self._wakeup.notify()
        return batch

    def _hash_key(self, key: bytes) -> int:
        """murmur2 of ``key`` as Kafka's default partitioner uses it (positive), remembered."""
        hashes = self._key_hashes
        assert hashes is not None
        if len(hashes) >= KEY_HASH_CACHE_SIZE:
            hashes.clear()
        positive = hashes[key] = murmur2(key) & 0x7FFFFFFF
        return positive

    def _sticky_batch(self, topic: str, info: TopicInfo, size: int) -> ProducerBatch:
        """The open batch for a record without a key, with the default partitioner: the sticky
        partition's, remembered per topic until it is closed. Lock held."""
        full = self._sticky.get(topic)  # type: ignore[union-attr]
        if full is not None:
            self._close_open(full)  # the partitioner moves on
        partition = self._partitioner.partition(topic, None, info.partitions, info.available)
        batch = self._batch_for((topic, partition), size, True)
        assert batch is not None
        self._sticky[topic] = batch  # type: ignore[index]
        return batch

    def _wait_for_space(self, reserve: int) -> None:
        deadline = _monotonic() + self._max_block
        while self._buffer_used and self._buffer_used + reserve > self._buffer_memory:
            if self._closing:
                raise ProducerClosedError("the producer is closed")
            remaining = deadline - _monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"buffer.memory ({self._buffer_memory} bytes) stayed full for max.block.ms "
                    f"({self.config.max_block_ms} ms)"
                )
            self._space.wait(remaining)

    def _close_open(self, batch: ProducerBatch) -> None:
        """No more records go to ``batch``; the sticky partitioner moves on. Lock held."""
        if not batch.closed:
            batch.closed = True
            if self._open.get(batch.tp) is batch:
                del self._open[batch.tp]
                self._wakeup.notify()
            self._partitioner.on_new_batch(batch.topic, batch.partition)
            if self._sticky is not None and self._sticky.get(batch.topic) is batch:
                del self._sticky[batch.topic]

    def _reject(self, topic: str, partition: int, size: int, timestamp: int) -> RecordFuture:
        if self._closing:
            raise ProducerClosedError("the producer is closed")
        error = BrokerResponseError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the record is {size} bytes, more than max.request.size and buffer.memory allow "
            f"({self._max_record})",
        )
        return self._failed_future(topic, partition, timestamp, error)

    def _failed_future(
        self, topic: str, partition: int, timestamp: int, error: BaseException
    ) -> RecordFuture:
        batch = ProducerBatch(0, topic, partition, None, _monotonic(), self._done)
        batch.error = error
        batch.done = True
        return RecordFuture(batch, 0, timestamp)

    def _send_slow(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        timestamp: int,
    ) -> RecordFuture:
        """``send`` for a topic without metadata (or a partition beyond the known ones): the record
        waits in a placeholder until the sender has the metadata."""
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, not {topic!r}")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ValueError(f"partition must be an int >= 0, not {partition!r}")
        if type(timestamp) is not int:
            raise TypeError(f"timestamp must be an int (ms since the epoch), not {timestamp!r}")
        key, value, headers = self._coerce_record(key, value, headers)
        size = RECORD_OVERHEAD + len(value or b"") + len(key or b"")
        if headers:
            size += headers_size(headers)
        with self._lock:
            info = self._topics.get(topic)
            if info is not None and (partition is None or partition < len(info.partitions)):
                return self._append_locked(topic, partition, key, value, headers, timestamp, size, None, True)
            if size > self._max_record:
                return self._reject(topic, -1 if partition is None else partition, size, timestamp)
            if self._closing:
                raise ProducerClosedError("the producer is closed")
            if self._buffer_used + size > self._buffer_memory:
                self._wait_for_space(size)
            now = _monotonic()
            waiting = self._pending.setdefault(topic, [])
            if not waiting or now - waiting[-1].created > PENDING_CHUNK_SECONDS:
                placeholder = ProducerBatch(next(self._ids), topic, -1, None, now, self._done)
                placeholder.deadline = now + self._delivery_timeout
                waiting.append(placeholder)
                self._incomplete[placeholder.id] = placeholder
            placeholder = waiting[-1]
            future = RecordFuture(placeholder, len(placeholder.futures), timestamp)
            placeholder.futures.append(future)
            placeholder.pending.append((key, value, headers, partition, size))
            placeholder.reserved += size
            self._buffer_used += size
            self._metadata_wanted = True
            self._wakeup.notify()
            return future

    def _append_locked(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        timestamp: int,
        size: int,
        future: RecordFuture | None,
        block: bool,
    ) -> RecordFuture:
        """Append a record (its arguments already normalized) with the lock held; ``future``: an
        existing future to move onto the batch (a waiting record being placed)."""
        info = self._topics[topic]
        if partition is None:
            partition = self._partitioner.partition(topic, key, info.partitions, info.available)
        tp = (topic, partition)
        batch = self._batch_for(tp, size, block)
        if batch is None:
            if future is None:
                return self._reject(topic, partition, size, timestamp)
            error = BrokerResponseError(ErrorCode.MESSAGE_TOO_LARGE, f"the record is {size} bytes")
            self._fail_future(future, topic, partition, error)
            return future
        batch.append(timestamp, key, value, headers)
        if future is None:
            future = RecordFuture(batch, len(batch.futures), timestamp)
        else:
            self._move_future(future, batch, len(batch.futures))
        batch.futures.append(future)
        batch.size += size
        if batch.size >= self._batch_size:
            self._close_open(batch)
        return future

    def _fail_future(
        self, future: RecordFuture, topic: str, partition: int, error: BaseException
    ) -> ProducerBatch:
        """Move a waiting record's future to a batch of its own and fail it. Lock held; returns the
        batch (for ``run_callbacks``)."""
        batch = ProducerBatch(0, topic, partition, None, _monotonic(), self._done)
        self._move_future(future, batch, 0)
        batch.futures.append(future)
        self._finish(batch, error)
        return batch

    def _move_future(self, future: RecordFuture, batch: ProducerBatch, index: int) -> None:
        with self._done:
            future._batch = batch
            future._index = index
            if ("_waiters" in future.__dict__ or "_done_callbacks" in future.__dict__) and not any(
                f is future for f in batch.watched
            ):
                batch.watched.append(future)

    # ------------------------------------------------------------------------------ completion

    def _finish(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """Complete ``batch`` (its offsets set) or fail it with ``error``. Lock held; the caller runs
        ``run_callbacks`` afterwards, without the lock."""
        if batch.done:
            return
        if error is not None and self._transactions is not None:
            self._transactions.batch_failed(error)
        with self._done:
            batch.error = error
            batch.done = True  # after the outcome: futures read it without the lock
            for future in batch.watched:
                waiters = future.__dict__.get("_waiters")
                for waiter in waiters or ():
                    if error is None:
                        waiter.add_result(future)
                    else:
                        waiter.add_exception(future)
            self._done.notify_all()
        if batch.in_flight:
            batch.in_flight = False
            state = self._partitions.get(batch.tp)
            if state is not None:
                state.in_flight -= 1
        if error is not None:
            self._idempotence.batch_failed(batch, self._partitions.get(batch.tp))
        batch.data = None
        batch.builder = None
        batch.append = no_builder
        batch.pending = []
        batch.futures = []  # no cycle between a done batch and its futures: freed without the GC
        self._release(batch)
        state = self._partitions.get(batch.tp)
        if state is not None and batch in state.queue:
            state.queue.remove(batch)
        if self._open.get(batch.tp) is batch:
            del self._open[batch.tp]
        if self._sticky is not None and self._sticky.get(batch.topic) is batch:
            del self._sticky[batch.topic]
        self._idle.notify_all()
        self._wakeup.notify()

    def _release(self, batch: ProducerBatch) -> None:
        self._incomplete.pop(batch.id, None)
        if batch.reserved:
            self._buffer_used -= batch.reserved
            batch.reserved = 0
            self._space.notify_all()

    @staticmethod
    def _requeue(state: PartitionState, batch: ProducerBatch) -> None:
        """Put a batch back in its partition's queue, in creation order."""
        position = len(state.queue)
        for index, queued in enumerate(state.queue):
            if queued.order > batch.order:
                position = index
                break
        state.queue.insert(position, batch)

    def _ready_at(self, state: PartitionState, hurry: bool) -> float:
        """When the oldest batch of ``state`` may be sent: at once (0.0) when it is closed, being
        retried, has batches behind it or ``hurry`` (flush, close), else ``linger.ms`` after it was
        opened."""
        head = state.queue[0]
        if head.closed or hurry or head.attempts or len(state.queue) > 1:
            return 0.0
        return head.created + self._linger

    # ------------------------------------------------------------------------------ metadata

    def _apply_metadata(
        self, metadata: Any, topics: Iterable[str], failed: list[ProducerBatch] | None = None
    ) -> bool:
        """Update partitions and leaders, place the records waiting for these topics. Lock held.
        Returns whether some topic or leader is still missing."""
        failed = failed if failed is not None else []
        incomplete = False
        for name in topics:
            topic = metadata.topic(name)
            if topic is None or topic.error_code or not topic.partitions:
                code = topic.error_code if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                error = BrokerResponseError(code or ErrorCode.LEADER_NOT_AVAILABLE, context=f"topic {name!r}")
                self._metadata_error[name] = error
                if code in _FATAL_TOPIC_ERRORS:
                    for placeholder in self._pending.pop(name, []):
                        self._finish(placeholder, error)
                        failed.append(placeholder)
                else:
                    incomplete = True
                continue
            self._metadata_error.pop(name, None)
            partitions = tuple(p.partition for p in topic.partitions)
            available = tuple(p.partition for p in topic.partitions if p.leader >= 0)
            if len(available) < len(partitions):
                incomplete = True
            info = TopicInfo(partitions, available)
            if self._topics.get(name) != info and self._sticky is not None:
                self._sticky.pop(name, None)  # choose again among the partitions now available
            self._topics[name] = info
            for p in topic.partitions:
                tp = (name, p.partition)
                state = self._partitions.get(tp)
                if state is None:
                    state = self._partitions[tp] = PartitionState()
                state.leader = p.leader
            waiting = self._pending.pop(name, None)
            if waiting:
                self._place(name, waiting, failed)
        return incomplete

    def _place(self, topic: str, waiting: list[ProducerBatch], failed: list[ProducerBatch]) -> None:
        """Append the records that waited for ``topic``'s metadata, in their order. Lock held."""
        count = len(self._topics[topic].partitions)
        for placeholder in waiting:
            self._release(placeholder)
            # detached (never done): its futures move to real batches
            for future, (key, value, headers, partition, size) in zip(
                placeholder.futures, placeholder.pending, strict=True
            ):
                if partition is not None and partition >= count:
                    error = BrokerResponseError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {topic!r} has no partition {partition} (it has {count})",
                    )
                    failed.append(self._fail_future(future, topic, partition, error))
                    continue
                try:
                    self._append_locked(
                        topic, partition, key, value, headers, future._timestamp, size, future, False
                    )
                except Exception as error:  # a partitioner that raises
                    failed.append(self._fail_future(future, topic, -1, KafkaError(repr(error))))
            placeholder.pending = []
        with self._done:
            self._done.notify_all()  # waiters on a placeholder look at their new batch
