"""The producer: ``send`` records to topics; they are batched per partition, compressed, sent to each
partition's leader by a background thread, retried in order, and acknowledged through futures.

::

    with Producer("127.0.0.1:9092", {"acks": "all", "linger.ms": "5"}) as producer:
        future = producer.send("orders", b"value", key=b"k1", headers=[("origin", b"web")])
        metadata = future.result()                       # RecordMetadata(topic, partition, offset, timestamp)
        producer.send("orders", b"v2", on_delivery=lambda error, metadata: ...)
        producer.flush()

Life of a record. ``send`` (the caller's thread) picks the partition (``partitioner.class``), appends
the record to that partition's open batch (a ``RecordBatchBuilder``) and returns a
``concurrent.futures.Future``; that is all the per-record work. A batch closes when it reaches
``batch.size`` bytes. The sender thread sends a partition's oldest batch when it is closed, older than
``linger.ms``, or when ``flush``/``close`` asks; it groups the batches by leader broker into one
Produce request per broker (one batch per partition, at most ``max.request.size`` bytes) and keeps up
to ``max.in.flight.requests.per.connection`` requests in flight per connection. One receiver thread
per broker reads the responses (in request order) and completes the batches' futures, or puts a
failed batch back at the head of its partition's queue to be resent after ``retry.backoff.ms``
(doubling up to ``retry.backoff.max.ms``).

Ordering and duplicates. With idempotence (the default when the broker supports InitProducerId and
acks is not 0) the producer has a producer id and epoch, and each partition's batches carry
consecutive sequence numbers: the broker drops a resent batch it already wrote (answering with its
original offsets) and refuses one that skips ahead, so up to 5 batches per partition may be in flight
and a retry never reorders or duplicates records. A batch that fails for good after it was sent
leaves a gap in a partition's sequence numbers: the producer bumps its epoch (InitProducerId with its
id, KIP-360) once nothing is in flight, and the batches behind the gap are resent from sequence 0.
Without idempotence a partition has at most one batch in flight when ``retries`` > 0 (several for
other partitions), which keeps the order too (a resent batch may be written twice).

Errors. Retriable errors (lost connections, timeouts, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
...) refresh the metadata and resend until ``retries`` or ``delivery.timeout.ms`` runs out
(``DeliveryTimeoutError``, whose ``cause`` is the last error). Others fail the batch's futures at
once with ``BrokerResponseError`` (MESSAGE_TOO_LARGE after a batch of one record, CORRUPT_MESSAGE,
authorization, ...); a batch of several records refused as too large is split in two and resent.
Records to a topic whose metadata is not known yet wait (without blocking ``send``) until the
metadata arrives, or fail after ``delivery.timeout.ms``. ``send`` itself raises only for arguments
of the wrong type, after ``close``, and with ``KafkaTimeoutError`` when ``buffer.memory`` stayed full
for ``max.block.ms`` (back-pressure: it blocks meanwhile).

Futures. Each record's future is a ``RecordFuture`` (a ``concurrent.futures.Future``): ``result()``,
``exception()``, ``add_done_callback``, ``concurrent.futures.wait``/``as_completed`` all work. To keep
``send`` cheap, a batch's futures share their state with the batch and one condition per producer;
they cannot be cancelled (``cancel()`` returns False: the record is already on its way).
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig
from kctl.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kctl.client.partitioner import DefaultPartitioner, Partitioner, load_partitioner, murmur2
from kctl.client.producer_config import ProducerConfig
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import HEADER_SIZE, PRODUCER_ID_OFFSET, write_crc
from kctl.records.reader import decode_batch

__all__ = [
    "DeliveryTimeoutError",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "RecordFuture",
    "RecordMetadata",
]

log = logging.getLogger(__name__)

HeadersInput = Sequence[tuple[str | bytes, bytes | str | None]] | Mapping[str, bytes | str | None]
DeliveryCallback = Callable[[BaseException | None, "RecordMetadata | None"], object]

RECORD_OVERHEAD = 16
"""Bytes a record takes beside its key, value and headers (length, attributes, deltas, lengths): an
estimate used to decide when a batch is full."""
HEADER_OVERHEAD = 4
FIRST_RECORD_BATCH_PRODUCE_VERSION = 3
SEQUENCE_MODULUS = 2**31
KEY_HASH_CACHE_SIZE = 65_536
"""Keys whose murmur2 the producer remembers (all are forgotten when the table is full)."""
PENDING_CHUNK_SECONDS = 1.0
"""Records waiting for a topic's metadata are grouped per second of arrival; a group fails together
when its first record has waited ``delivery.timeout.ms``."""

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_RUNNING = "RUNNING"  # concurrent.futures' state names
_FINISHED = "FINISHED"
_time = time.time
_monotonic = time.monotonic

# A produce error that says an earlier batch of the partition is missing: retried when such a batch
# is being resent, else the sequence numbers are reset.
_SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
# Retriable in Kafka's table, but a batch we built will not get better by being resent.
_NOT_RETRIED = frozenset({ErrorCode.CORRUPT_MESSAGE})
# Metadata errors of a topic that fail its waiting records at once.
_FATAL_TOPIC_ERRORS = frozenset({ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_AUTHORIZATION_FAILED})


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 with acks=0 (the broker does not answer);
    ``timestamp`` is the record's (CreateTime) or the broker's (LogAppendTime topics)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerClosedError(KafkaError):
    """The producer was closed: ``send`` after ``close``, or a record not delivered when ``close``
    gave up waiting."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within ``delivery.timeout.ms`` (or ``retries`` ran out).
    ``cause`` is the last error seen while trying, if any."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        if cause is not None:
            message = f"{message}: {cause}"
        super().__init__(message)
        self.cause = cause


# ------------------------------------------------------------------------------------------ futures


class _Batch:
    """One partition's batch of records, from the first ``send`` to the broker's answer. Records of a
    topic that has no metadata yet wait in a placeholder batch (``builder`` None, ``partition`` -1)."""

    __slots__ = (
        "append",
        "attempts",
        "base_offset",
        "builder",
        "closed",
        "condition",
        "created",
        "data",
        "data_fields",
        "deadline",
        "done",
        "error",
        "futures",
        "id",
        "in_flight",
        "last_error",
        "log_append_time",
        "order",
        "partition",
        "pending",
        "reserved",
        "retry_at",
        "sequence",
        "size",
        "topic",
        "tp",
        "watched",
    )

    def __init__(
        self,
        batch_id: int,
        topic: str,
        partition: int,
        builder: RecordBatchBuilder | None,
        now: float,
        condition: threading.Condition,
    ) -> None:
        self.id = batch_id
        self.condition = condition  # the producer's: every future and batch of a producer shares it
        self.order: tuple[int, ...] = (batch_id,)  # position among the partition's batches
        self.topic = topic
        self.partition = partition
        self.tp = (topic, partition)
        self.builder = builder
        self.append = builder.append if builder is not None else None
        self.futures: list[RecordFuture] = []
        self.pending: list[tuple[Any, ...]] = []  # placeholder: (key, value, headers, partition, size)
        self.size = HEADER_SIZE
        self.created = now
        self.deadline = now
        self.done = False
        self.closed = False
        self.in_flight = False
        self.error: BaseException | None = None
        self.last_error: BaseException | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.watched: list[RecordFuture] = []
        self.sequence: int | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.data: bytes | None = None
        self.data_fields: tuple[int, int, int] | None = None
        self.reserved = 0

    def __repr__(self) -> str:
        state = "done" if self.done else "in flight" if self.in_flight else "queued"
        return f"<batch {self.id} {self.topic}-{self.partition} {len(self.futures)} records {state}>"


class RecordFuture(Future):  # type: ignore[type-arg]
    """The future of one record: its ``RecordMetadata``, or the error that kept it from the broker.

    A ``concurrent.futures.Future`` whose state lives in its batch (``Future.__init__`` is not run:
    the per-record cost of ``send`` stays a few attribute stores). It is completed by the producer
    only: ``set_result``/``set_exception`` raise, ``cancel`` returns False."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: _Batch, index: int, timestamp: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp

    # the attributes Future's methods (and concurrent.futures.wait/as_completed) use
    @property
    def _condition(self) -> threading.Condition:
        return self._batch.condition

    @property
    def _state(self) -> str:
        return _FINISHED if self._batch.done else _RUNNING

    @property
    def _exception(self) -> BaseException | None:
        batch = self._batch
        return batch.error if batch.done else None

    @property
    def _result(self) -> RecordMetadata | None:
        batch = self._batch
        if not batch.done or batch.error is not None:
            return None
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, timestamp)

    def __getattr__(self, name: str) -> Any:
        # _waiters and _done_callbacks are created on first use (always under the condition's lock),
        # and the batch remembers the future so that completing the batch visits only these.
        if name in ("_waiters", "_done_callbacks"):
            value: list[Any] = []
            attributes = self.__dict__
            if "_waiters" not in attributes and "_done_callbacks" not in attributes:
                self._batch.watched.append(self)  # the first of the two: not watched yet
            attributes[name] = value
            return value
        raise AttributeError(name)

    @property
    def topic(self) -> str:
        return self._batch.topic

    def done(self) -> bool:
        return self._batch.done  # no lock: a flag set once, under the lock, after everything else

    def running(self) -> bool:
        return not self._batch.done

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def _wait(self, timeout: float | None) -> None:
        if self._batch.done:
            return
        condition = self._batch.condition
        with condition:
            if self._batch.done:
                return
            deadline = None if timeout is None else _monotonic() + timeout
            while not self._batch.done:
                if deadline is None:
                    condition.wait()
                    continue
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    raise TimeoutError()
                condition.wait(remaining)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's ``RecordMetadata``; raises its error, or ``TimeoutError`` after ``timeout`` s."""
        self._wait(timeout)
        error = self._batch.error
        if error is not None:
            raise error.with_traceback(None)
        result = self._result
        assert result is not None
        return result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error

    def set_result(self, result: Any) -> None:
        raise RuntimeError("a record's future is completed by its producer")

    def set_exception(self, exception: BaseException | None) -> None:
        raise RuntimeError("a record's future is completed by its producer")

    def set_running_or_notify_cancel(self) -> bool:
        return True


def _delivery_adapter(callback: DeliveryCallback) -> Callable[[RecordFuture], None]:
    def invoke(future: RecordFuture) -> None:
        # called once the future is done: its outcome is final and read without the lock
        error = future._exception
        callback(error, None if error is not None else future._result)

    return invoke


# ------------------------------------------------------------------------------------------ state


class _TopicInfo(NamedTuple):
    partitions: tuple[int, ...]
    available: tuple[int, ...]


class _PartitionState:
    """A partition's queue of batches (oldest first; the last may still be open) and in-flight count."""

    __slots__ = ("blocked", "in_flight", "leader", "next_sequence", "queue")

    def __init__(self) -> None:
        self.queue: collections.deque[_Batch] = collections.deque()
        self.in_flight = 0
        self.blocked = False  # a batch failed: nothing newer is sent until the in-flight ones return
        self.next_sequence = 0
        self.leader = -1


class _Request(NamedTuple):
    node: int
    connection: Any
    in_flight: Any
    batches: dict[tuple[str, int], _Batch]


def _headers_size(headers: Iterable[tuple[Any, Any]]) -> int:
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


# ------------------------------------------------------------------------------------------ producer


class Producer:
    """A thread-safe Kafka producer. ``config``: a ``ProducerConfig``, a ``ClientConfig`` or Kafka
    producer properties (``{"acks": "all", "linger.ms": "5"}``); ``overrides`` are ``ProducerConfig``
    field names (``acks=1, linger_ms=10``) and win. Nothing is connected until the first record."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        config: ClientConfig | Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        self.config = config = ProducerConfig.coerce(config, **overrides)
        self._partitioner: Partitioner = load_partitioner(config.partitioner_class)
        # The default partitioner keeps records without a key on one partition until a batch of it
        # is closed (on_new_batch): with it, send finds that partition's open batch in one look-up.
        default = type(self._partitioner).partition is DefaultPartitioner.partition
        self._sticky: dict[str, _Batch] | None = {} if default else None
        # ...and puts a key where murmur2 says: the hash of recent keys is remembered (pure-Python
        # murmur2 costs more than the rest of send).
        self._key_hashes: dict[bytes, int] | None = {} if default else None
        self._cluster = ClusterClient(bootstrap_servers, config, retry_bootstrap=True)
        self._codec = config.compression
        self._compression_level = config.compression_level
        # a batch never outgrows a request; a record never outgrows a request or the buffer
        self._batch_size = max(min(config.batch_size, config.max_request_size - HEADER_SIZE), 1)
        self._max_record = min(config.max_request_size - HEADER_SIZE, config.buffer_memory)
        self._linger = config.linger_ms / 1000.0
        self._max_request_size = config.max_request_size
        self._buffer_memory = config.buffer_memory
        self._max_block = config.max_block_ms / 1000.0
        self._delivery_timeout = config.delivery_timeout_ms / 1000.0
        self._acks = config.acks
        self._request_timeout = config.request_timeout
        self._produce_timeout_ms = min(config.request_timeout_ms, config.delivery_timeout_ms)
        self._retries = config.retries
        self._backoff = config.retry_backoff_ms / 1000.0
        self._backoff_max = config.retry_backoff_max_ms / 1000.0
        self._max_in_flight = config.max_in_flight_requests_per_connection

        self._lock = threading.Lock()  # the producer's state: queues, batches, counters
        self._wakeup = threading.Condition(self._lock)  # the sender waits on it
        self._idle = threading.Condition(self._lock)  # flush waits on it
        self._space = threading.Condition(self._lock)  # send waits on it for buffer memory
        # The futures' condition: reentrant (concurrent.futures.wait acquires it once per future).
        # Taken after self._lock, never before it.
        self._done = threading.Condition(threading.RLock())
        # the last on_delivery callback given to send and its adapter (reused while it is the same)
        self._last_adapter: tuple[Any, Any] = (None, None)
        self._ids = itertools.count(1)
        self._topics: dict[str, _TopicInfo] = {}
        self._open: dict[tuple[str, int], _Batch] = {}
        self._partitions: dict[tuple[str, int], _PartitionState] = {}
        self._pending: dict[str, list[_Batch]] = {}
        self._incomplete: dict[int, _Batch] = {}
        self._buffer_used = 0
        self._node_in_flight: dict[int, int] = collections.defaultdict(int)
        self._receivers: dict[int, tuple[threading.Thread, queue.SimpleQueue[_Request | None]]] = {}

        self._idempotence = config.idempotence  # None: not decided yet (asks the broker)
        self._producer_id = -1
        self._producer_epoch = -1
        self._reset_sequences = False
        self._idempotence_backoff_until = 0.0
        self._fatal: BaseException | None = None

        self._metadata_wanted = False
        self._metadata_next = 0.0
        self._metadata_backoff = self._backoff
        self._metadata_refreshed = _monotonic()
        self._metadata_error: dict[str, BaseException] = {}

        self._flushing = 0
        self._closing = False
        self._stopping = False
        self._sender = threading.Thread(target=self._run, name="kctl-producer-sender", daemon=True)
        self._sender.start()

    # ------------------------------------------------------------------------------ public API

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        """Records sent but not yet acknowledged (or failed)."""
        with self._lock:
            return sum(len(batch.futures) for batch in self._incomplete.values())

    def __repr__(self) -> str:
        return f"<Producer {self._cluster!r} {len(self)} records pending>"

    @property
    def producer_id(self) -> int:
        """The idempotent producer's id (-1 before the first batch, or without idempotence)."""
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def idempotent(self) -> bool | None:
        """Whether batches carry a producer id and sequence numbers (None: not decided yet)."""
        return self._idempotence

    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: HeadersInput | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its future (``RecordMetadata`` once the broker acknowledged it).

        ``value``/``key``: bytes (str is encoded as UTF-8; None is null). ``headers``: ``(key, value)``
        pairs or a mapping. ``partition``: explicit, else the partitioner's choice. ``timestamp``: ms
        since the epoch, default now. ``on_delivery(error, metadata)`` is called from the producer's
        I/O thread when the record is acknowledged or fails (at once, in this thread, for a record
        refused on the spot, e.g. larger than max.request.size); it must not block."""
        if timestamp is None:
            timestamp = int(_time() * 1000)
        info = self._topics.get(topic)
        future = None
        if info is not None and (partition is None or 0 <= partition < len(info.partitions)):
            size = RECORD_OVERHEAD
            try:
                if value is not None:
                    size += len(value)
                if key is not None:
                    size += len(key)
                if headers:
                    if isinstance(headers, Mapping):
                        headers = list(headers.items())
                    size += _headers_size(headers)
            except (TypeError, ValueError):  # not bytes: normalized (or refused) on the slow path
                size = -1
            if size > self._max_record:
                future = self._reject(topic, -1 if partition is None else partition, size, timestamp)
            elif size >= 0:
                sticky = self._sticky if partition is None and key is None else None
                if sticky is None and partition is None:
                    hashes = self._key_hashes
                    if hashes is not None and type(key) is bytes:  # the default partitioner's murmur2
                        positive = hashes.get(key)
                        if positive is None:
                            positive = self._hash_key(key)
                        partition = info.partitions[positive % len(info.partitions)]
                    else:
                        partition = self._partitioner.partition(topic, key, info.partitions, info.available)
                with self._lock:
                    if sticky is not None:  # the open batch of the partition records without a key go to
                        batch = sticky.get(topic)
                        if batch is None or batch.size + size > self._batch_size:
                            batch = self._sticky_batch(topic, info, size)
                    else:
                        tp = (topic, partition)
                        batch = self._open.get(tp)
                        if batch is None or batch.size + size > self._batch_size:
                            batch = self._batch_for(tp, size, True)
                    futures = batch.futures  # type: ignore[union-attr]
                    future = RecordFuture(batch, len(futures), timestamp)
                    try:
                        batch.append(timestamp, key, value, headers or ())  # type: ignore[union-attr]
                    except TypeError:
                        key, value, headers = self._coerce_record(key, value, headers)
                        batch.append(timestamp, key, value, headers)  # type: ignore[union-attr]
                    futures.append(future)
                    if on_delivery is not None:
                        # the batch cannot complete while the lock is held: no need for the
                        # future's own condition (add_done_callback) on this path
                        adapter = self._last_adapter
                        if adapter[0] is not on_delivery:  # most senders pass one callback
                            adapter = self._last_adapter = (on_delivery, _delivery_adapter(on_delivery))
                        future.__dict__["_done_callbacks"] = [adapter[1]]
                        batch.watched.append(future)  # type: ignore[union-attr]
                        on_delivery = None
                    batch.size += size  # type: ignore[union-attr]
                    if batch.size >= self._batch_size:  # type: ignore[union-attr]
                        self._close_open(batch)  # type: ignore[arg-type]
        if future is None:
            future = self._send_slow(topic, value, key, headers, partition, timestamp)
        if on_delivery is not None:
            future.add_done_callback(_delivery_adapter(on_delivery))
        return future

    def produce_sync(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: HeadersInput | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """``send`` one record, make it leave at once (no linger) and wait for its metadata."""
        future = self.send(topic, value, key, headers, partition, timestamp)
        with self._lock:
            self._flushing += 1
            self._wakeup.notify()
        try:
            return future.result(timeout)
        finally:
            with self._lock:
                self._flushing -= 1

    def flush(self, timeout: float | None = None) -> int:
        """Send every buffered record now and wait until all are acknowledged or failed (also those
        sent by other threads meanwhile), at most ``timeout`` seconds. Returns the number of records
        still not done (0 when everything was delivered or failed)."""
        deadline = None if timeout is None else _monotonic() + timeout
        with self._lock:
            self._flushing += 1
            self._wakeup.notify()
            try:
                while self._incomplete:
                    if deadline is None:
                        self._idle.wait()
                        continue
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        break
                    self._idle.wait(remaining)
                return sum(len(batch.futures) for batch in self._incomplete.values())
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (waiting at most ``timeout`` seconds; None: as long as it takes,
        within delivery.timeout.ms), fail what is left with ``ProducerClosedError``, and stop."""
        with self._lock:
            if self._stopping:
                return
            self._closing = True
            self._space.notify_all()
        self.flush(timeout)
        with self._lock:
            self._stopping = True
            leftovers = list(self._incomplete.values())
            for batch in leftovers:
                self._finish(
                    batch, ProducerClosedError("the producer was closed before the record was delivered")
                )
            self._wakeup.notify_all()
        self._run_callbacks(leftovers)
        self._sender.join(timeout=max(self._request_timeout, 1.0))
        self._cluster.close()  # unblocks receivers waiting for responses
        with self._lock:
            receivers = list(self._receivers.values())
        for _thread, work in receivers:
            work.put(None)
        for thread, _work in receivers:
            thread.join(timeout=5.0)

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The partitions of ``topic`` (asking the cluster, which may auto-create it). Raises
        ``BrokerResponseError`` (e.g. UNKNOWN_TOPIC_OR_PARTITION) or ``KafkaConnectionError``."""
        deadline = Deadline(timeout if timeout is not None else self._max_block)
        metadata = self._cluster.retry(
            lambda: self._cluster.refresh_metadata([topic], allow_auto_create=True, deadline=deadline),
            deadline=deadline,
        )
        found = metadata.topic(topic)
        if found is None:
            raise BrokerResponseError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"topic {topic!r}")
        if found.error_code:
            raise BrokerResponseError(found.error_code, context=f"topic {topic!r}")
        with self._lock:
            self._apply_metadata(metadata, [topic])
        return [p.partition for p in found.partitions]

    # ------------------------------------------------------------------------------ appending

    def _coerce_record(self, key: Any, value: Any, headers: Any) -> tuple[Any, Any, Any]:
        return (
            _as_bytes(key, "key"),
            _as_bytes(value, "value"),
            _normalize_headers(headers) if headers else (),
        )

    def _batch_for(self, tp: tuple[str, int], size: int, block: bool) -> _Batch | None:
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
        batch = _Batch(next(self._ids), tp[0], tp[1], builder, now, self._done)
        batch.deadline = now + self._delivery_timeout
        batch.reserved = reserve
        self._buffer_used += reserve
        self._open[tp] = batch
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionState()
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

    def _sticky_batch(self, topic: str, info: _TopicInfo, size: int) -> _Batch:
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

    def _close_open(self, batch: _Batch) -> None:
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
        batch = _Batch(0, topic, partition, None, _monotonic(), self._done)
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
            size += _headers_size(headers)
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
                placeholder = _Batch(next(self._ids), topic, -1, None, now, self._done)
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

    def _fail_future(self, future: RecordFuture, topic: str, partition: int, error: BaseException) -> _Batch:
        """Move a waiting record's future to a batch of its own and fail it. Lock held; returns the
        batch (for ``_run_callbacks``)."""
        batch = _Batch(0, topic, partition, None, _monotonic(), self._done)
        self._move_future(future, batch, 0)
        batch.futures.append(future)
        self._finish(batch, error)
        return batch

    def _move_future(self, future: RecordFuture, batch: _Batch, index: int) -> None:
        with self._done:
            future._batch = batch
            future._index = index
            if ("_waiters" in future.__dict__ or "_done_callbacks" in future.__dict__) and not any(
                f is future for f in batch.watched
            ):
                batch.watched.append(future)

    # ------------------------------------------------------------------------------ completion

    def _finish(self, batch: _Batch, error: BaseException | None = None) -> None:
        """Complete ``batch`` (its offsets set) or fail it with ``error``. Lock held; the caller runs
        ``_run_callbacks`` afterwards, without the lock."""
        if batch.done:
            return
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
        if error is not None and batch.sequence is not None and self._idempotence:
            # The broker did not write (or may not have written) these sequence numbers: the batches
            # behind it are refused as out of order (and resent), under a new epoch from sequence 0.
            self._reset_sequences = True
            state = self._partitions.get(batch.tp)
            if state is not None:
                state.blocked = True
        batch.data = None
        batch.builder = None
        batch.append = None
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

    def _release(self, batch: _Batch) -> None:
        self._incomplete.pop(batch.id, None)
        if batch.reserved:
            self._buffer_used -= batch.reserved
            batch.reserved = 0
            self._space.notify_all()

    @staticmethod
    def _run_callbacks(batches: Iterable[_Batch]) -> None:
        """Run the done-callbacks of finished batches' futures, each once, without the lock."""
        for batch in batches:
            if not batch.done:
                continue
            for future in batch.watched:
                if future._batch is not batch:
                    continue  # moved to another batch
                callbacks = future.__dict__.get("_done_callbacks")
                if callbacks:
                    future.__dict__["_done_callbacks"] = []
                    for callback in callbacks:
                        try:
                            callback(future)
                        except Exception:
                            log.exception("exception calling callback for %r", future)
            batch.watched = []

    def _retry_or_fail(self, batch: _Batch, error: BaseException, now: float) -> None:
        """A batch failed with a retriable error: put it back in order, or fail it when out of
        retries or time. Lock held."""
        if batch.done:
            return
        batch.last_error = error
        batch.attempts += 1
        if batch.in_flight:
            batch.in_flight = False
            self._partitions[batch.tp].in_flight -= 1
        if now >= batch.deadline:
            self._finish(batch, DeliveryTimeoutError(self._timeout_text(batch), error))
            return
        if batch.attempts > self._retries:
            self._finish(batch, error)
            return
        state = self._partitions[batch.tp]
        state.blocked = True
        backoff = min(self._backoff * (2 ** (batch.attempts - 1)), self._backoff_max)
        batch.retry_at = now + backoff
        log.debug("retrying %r in %.3fs (attempt %d): %s", batch, backoff, batch.attempts, error)
        self._requeue(state, batch)
        self._wakeup.notify()

    @staticmethod
    def _requeue(state: _PartitionState, batch: _Batch) -> None:
        """Put a batch back in its partition's queue, in creation order."""
        position = len(state.queue)
        for index, queued in enumerate(state.queue):
            if queued.order > batch.order:
                position = index
                break
        state.queue.insert(position, batch)

    def _timeout_text(self, batch: _Batch) -> str:
        count = len(batch.futures)
        where = f"{batch.topic}-{batch.partition}" if batch.partition >= 0 else f"topic {batch.topic!r}"
        return (
            f"{count} record{'s' if count != 1 else ''} for {where} not delivered within "
            f"delivery.timeout.ms ({self.config.delivery_timeout_ms} ms)"
        )

    # ------------------------------------------------------------------------------ sender thread

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    work = self._plan(_monotonic())
                    wait, want_metadata, want_producer_id, requests, expired = work
                    if not (want_metadata or want_producer_id or requests or expired):
                        self._wakeup.wait(wait)
                        continue
                self._run_callbacks(expired)
                if want_producer_id:
                    self._init_producer_id()
                if want_metadata:
                    self._refresh_metadata()
                for node, batches in requests.items():
                    self._send_request(node, batches)
        except BaseException as error:  # a bug: fail everything rather than hang the callers
            log.exception("the producer's sender thread failed")
            with self._lock:
                self._fatal = error
                leftovers = list(self._incomplete.values())
                for batch in leftovers:
                    self._finish(batch, KafkaError(f"the producer's sender thread failed: {error!r}"))
            self._run_callbacks(leftovers)

    def _plan(
        self, now: float
    ) -> tuple[float | None, bool, bool, dict[int, list[_Batch]], list[_Batch]] | None:
        """What the sender does next (lock held): (seconds to wait when there is nothing to do,
        refresh metadata?, get a producer id?, batches to send per broker, batches failed)."""
        wait: float | None = None
        expired: list[_Batch] = []
        # records waiting for their topic's metadata
        for topic, waiting in list(self._pending.items()):
            while waiting and waiting[0].deadline <= now:
                placeholder = waiting.pop(0)
                self._finish(
                    placeholder,
                    DeliveryTimeoutError(self._timeout_text(placeholder), self._metadata_error.get(topic)),
                )
                expired.append(placeholder)
            if not waiting:
                del self._pending[topic]
            else:
                wait = _earliest(wait, waiting[0].deadline - now)
        want_metadata = False
        if self._pending or self._metadata_wanted:
            if now >= self._metadata_next:
                want_metadata = True
            else:
                wait = _earliest(wait, self._metadata_next - now)
        elif self._incomplete and now - self._metadata_refreshed >= self.config.metadata_max_age_ms / 1000:
            want_metadata = True
        if self._fatal is not None:
            for batch in list(self._incomplete.values()):
                if not batch.in_flight:
                    self._finish(batch, self._fatal)
                    expired.append(batch)
            return wait, want_metadata, False, {}, expired
        queued = [state for state in self._partitions.values() if state.queue]
        if not queued:
            return wait, want_metadata, False, {}, expired
        if self._idempotence is None or (self._idempotence and self._producer_id < 0):
            if now >= self._idempotence_backoff_until:
                return wait, want_metadata, True, {}, expired
            wait = _earliest(wait, self._idempotence_backoff_until - now)
            self._expire(queued, now, expired)
            return wait, want_metadata, False, {}, expired
        if self._reset_sequences:
            if not any(state.in_flight for state in self._partitions.values()):
                return wait, want_metadata, True, {}, expired
            self._expire(queued, now, expired)
            return wait, want_metadata, False, {}, expired
        self._expire(queued, now, expired)
        idempotent = bool(self._idempotence)
        per_partition = (
            min(self._max_in_flight, 5) if idempotent else (1 if self._retries else self._max_in_flight)
        )
        hurry = self._flushing or self._closing
        requests: dict[int, list[_Batch]] = {}
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
            if not (head.closed or hurry or head.attempts or len(state.queue) > 1):
                ready_at = head.created + self._linger
                if ready_at > now:
                    wait = _earliest(wait, ready_at - now)
                    continue
            leader = state.leader
            if leader < 0:
                want_metadata = want_metadata or now >= self._metadata_next
                self._metadata_wanted = True
                if not want_metadata:
                    wait = _earliest(wait, self._metadata_next - now)
                continue
            if leader not in requests and self._node_in_flight[leader] >= self._max_in_flight:
                continue
            size = head.size
            if leader in sizes and sizes[leader] + size > self._max_request_size:
                continue
            state.queue.popleft()
            self._close_open(head)
            if not head.futures:  # its only record was refused by the builder
                self._finish(head)
                continue
            if idempotent and head.sequence is None:
                head.sequence = state.next_sequence
                state.next_sequence = (state.next_sequence + len(head.futures)) % SEQUENCE_MODULUS
            head.in_flight = True
            state.in_flight += 1
            if leader not in requests:
                requests[leader] = []
                sizes[leader] = 0
                self._node_in_flight[leader] += 1
            requests[leader].append(head)
            sizes[leader] += size
        if not requests and not want_metadata and not expired and wait is None:
            # batches are queued but none can go: wait for a response (or a retry's backoff)
            wait = max(self._backoff, 0.01)
        return wait, want_metadata, False, requests, expired

    def _expire(self, queued: list[_PartitionState], now: float, expired: list[_Batch]) -> None:
        for state in queued:
            while state.queue and state.queue[0].deadline <= now and not state.queue[0].in_flight:
                batch = state.queue[0]
                self._finish(batch, DeliveryTimeoutError(self._timeout_text(batch), batch.last_error))
                expired.append(batch)

    # ------------------------------------------------------------------------------ requests

    def _send_request(self, node: int, batches: list[_Batch]) -> None:
        """Encode and send one Produce request to ``node`` (outside the lock)."""
        by_tp: dict[tuple[str, int], _Batch] = {}
        topics: dict[str, list[PartitionProduceData]] = {}
        try:
            for batch in batches:
                data = self._batch_bytes(batch)
                by_tp[batch.tp] = batch
                topics.setdefault(batch.topic, []).append(
                    PartitionProduceData(index=batch.partition, records=data)
                )
            body = ProduceRequest(
                transactional_id=None,
                acks=self._acks,
                timeout_ms=self._produce_timeout_ms,
                topic_data=[
                    TopicProduceData(name=name, partition_data=parts) for name, parts in topics.items()
                ],
            )
            connection = self._cluster.connection(node, deadline=Deadline(self._request_timeout))
            version = connection.version_for(ApiKey.PRODUCE, min_version=FIRST_RECORD_BATCH_PRODUCE_VERSION)
            in_flight = connection.send(ApiKey.PRODUCE, body, version)
        except KafkaError as error:
            self._request_failed(node, batches, error)
            return
        except Exception as error:  # e.g. a codec error building a batch: fail those records
            with self._lock:
                self._node_in_flight[node] -= 1
                for batch in batches:
                    self._finish(batch, KafkaError(f"cannot send the batch: {error!r}"))
            self._run_callbacks(batches)
            return
        if self._acks == 0:
            with self._lock:
                self._node_in_flight[node] -= 1
                for batch in batches:
                    self._finish(batch)
            self._run_callbacks(batches)
            return
        self._receiver(node).put(_Request(node, connection, in_flight, by_tp))

    def _batch_bytes(self, batch: _Batch) -> bytes:
        """The batch's bytes, built once; with idempotence, its producer id, epoch and sequence."""
        data = batch.data
        if data is None:
            assert batch.builder is not None
            data = batch.data = batch.builder.build()
        if batch.sequence is not None:
            fields = (self._producer_id, self._producer_epoch, batch.sequence)
            if batch.data_fields != fields:
                buffer = bytearray(data)
                _PRODUCER_FIELDS.pack_into(buffer, PRODUCER_ID_OFFSET, *fields)
                write_crc(buffer, 0, len(buffer))
                data = batch.data = bytes(buffer)
                batch.data_fields = fields
        return data

    def _receiver(self, node: int) -> queue.SimpleQueue[_Request | None]:
        with self._lock:
            entry = self._receivers.get(node)
            if entry is None or not entry[0].is_alive():
                work: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._receive_loop,
                    args=(work,),
                    name=f"kctl-producer-receiver-{node}",
                    daemon=True,
                )
                thread.start()
                entry = self._receivers[node] = (thread, work)
            return entry[1]

    def _receive_loop(self, work: queue.SimpleQueue[_Request | None]) -> None:
        while True:
            request = work.get()
            if request is None:
                return
            try:
                response = request.connection.receive(request.in_flight, timeout=self._request_timeout)
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

    def _request_failed(self, node: int, batches: list[_Batch], error: KafkaError) -> None:
        """The request could not be sent or answered: every batch is retried (or failed)."""
        retriable = error.retriable or isinstance(error, KafkaConnectionError | KafkaTimeoutError)
        if isinstance(error, KafkaProtocolError):
            retriable = False
        now = _monotonic()
        with self._lock:
            self._node_in_flight[node] -= 1
            self._metadata_wanted = True
            for batch in batches:
                if retriable:
                    self._retry_or_fail(batch, error, now)
                else:
                    self._finish(batch, error)
        self._run_callbacks(batches)

    def _handle_response(self, request: _Request, response: Any) -> None:
        now = _monotonic()
        finished: list[_Batch] = []
        with self._lock:
            self._node_in_flight[request.node] -= 1
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
        self._run_callbacks(finished)

    def _handle_partition(self, batch: _Batch, part: Any, now: float) -> None:
        code = part.error_code
        if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            batch.base_offset = part.base_offset
            batch.log_append_time = part.log_append_time_ms if part.log_append_time_ms is not None else -1
            self._finish(batch)
            return
        error = BrokerResponseError(
            code, part.error_message, context=f"produce to {batch.topic}-{batch.partition}"
        )
        state = self._partitions.get(batch.tp)
        if code == ErrorCode.MESSAGE_TOO_LARGE and len(batch.futures) > 1:
            self._split(batch, now)
            return
        if code in _SEQUENCE_ERRORS:
            # Not written: an earlier batch is missing (being resent, or refused: then the sequence
            # numbers are reset already), or the broker lost track of the producer (reset them).
            if self._idempotence and (state is None or not state.blocked):
                self._reset_sequences = True
            self._retry_or_fail(batch, error, now)
            return
        if code in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE,
            ErrorCode.KAFKA_STORAGE_ERROR,
        ):
            self._metadata_wanted = True
        if error.retriable and code not in _NOT_RETRIED:
            self._retry_or_fail(batch, error, now)
        else:
            self._finish(batch, error)

    def _split(self, batch: _Batch, now: float) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: resend them as two batches (which keep
        the original's place in the partition's order and its sequence numbers). Lock held."""
        state = self._partitions[batch.tp]
        if batch.in_flight:
            batch.in_flight = False
            state.in_flight -= 1
        assert batch.data is not None
        records = decode_batch(batch.data).records
        half = len(records) // 2
        self._release(batch)  # detached (never done): its futures move to the halves
        parts = []
        for number, (start, chunk) in enumerate(((0, records[:half]), (half, records[half:]))):
            builder = RecordBatchBuilder(compression=self._codec, compression_level=self._compression_level)
            part = _Batch(next(self._ids), batch.topic, batch.partition, builder, batch.created, self._done)
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
                self._move_future(future, part, index)
                part.futures.append(future)
            part.size = builder.estimated_size_in_bytes()
            part.reserved = part.size
            self._buffer_used += part.reserved
            self._incomplete[part.id] = part
            parts.append(part)
        state.blocked = True
        for part in parts:
            self._requeue(state, part)
        with self._done:
            self._done.notify_all()  # waiters on the old batch look at their new one
        self._wakeup.notify()

    # ------------------------------------------------------------------------------ cluster

    def _init_producer_id(self) -> None:
        """Get a producer id (or bump the epoch to reset sequences), outside the lock."""
        try:
            connection = self._cluster.any_connection(deadline=Deadline(self._request_timeout))
            if not connection.supports(ApiKey.INIT_PRODUCER_ID):
                with self._lock:
                    if self._idempotence:
                        self._fatal = KafkaError(
                            "enable.idempotence=true but the broker does not support InitProducerId"
                        )
                    else:
                        self._idempotence = False
                        self._reset_sequences = False
                return
            version = connection.version_for(ApiKey.INIT_PRODUCER_ID)
            bump = self._reset_sequences and self._producer_id >= 0 and version >= 3
            body = InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout_ms=60_000,
                producer_id=self._producer_id if bump else -1,
                producer_epoch=self._producer_epoch if bump else -1,
            )
            response = connection.request(
                ApiKey.INIT_PRODUCER_ID, body, version, timeout=self._request_timeout
            )
            if response.error_code:
                raise BrokerResponseError(response.error_code, context="InitProducerId")
        except KafkaError as error:
            log.debug("InitProducerId failed: %s", error)
            with self._lock:
                fatal = isinstance(error, BrokerResponseError) and not error.retriable
                if fatal and self._idempotence is None and self._producer_id < 0:
                    self._idempotence = False  # the broker refuses: produce without
                elif fatal:
                    self._fatal = error
                else:
                    self._idempotence_backoff_until = _monotonic() + self._backoff_max
                    self._metadata_wanted = True
            return
        with self._lock:
            self._producer_id = response.producer_id
            self._producer_epoch = response.producer_epoch
            self._idempotence = True
            if self._reset_sequences:
                log.info(
                    "producer %d: epoch %d, sequence numbers reset", self._producer_id, self._producer_epoch
                )
            self._reset_sequences = False
            for state in self._partitions.values():
                state.next_sequence = 0
                for batch in state.queue:
                    batch.sequence = None
            self._wakeup.notify()

    def _refresh_metadata(self) -> None:
        """Ask for the metadata of every topic the producer uses (outside the lock)."""
        with self._lock:
            topics = sorted({*self._topics, *self._pending})
            self._metadata_wanted = False
        try:
            metadata = self._cluster.refresh_metadata(
                topics, allow_auto_create=True, deadline=Deadline(self._request_timeout)
            )
        except KafkaError as error:
            log.debug("metadata refresh failed: %s", error)
            with self._lock:
                for topic in self._pending:
                    self._metadata_error[topic] = error
                self._metadata_wanted = True
                self._metadata_next = _monotonic() + self._metadata_backoff
                self._metadata_backoff = min(self._metadata_backoff * 2, self._backoff_max)
            return
        failed: list[_Batch] = []
        with self._lock:
            incomplete = self._apply_metadata(metadata, topics, failed)
            self._metadata_refreshed = now = _monotonic()
            if incomplete:
                self._metadata_wanted = True
                self._metadata_next = now + self._metadata_backoff
                self._metadata_backoff = min(self._metadata_backoff * 2, self._backoff_max)
            else:
                self._metadata_backoff = self._backoff
                self._metadata_next = now + self._backoff
        self._run_callbacks(failed)

    def _apply_metadata(
        self, metadata: Any, topics: Iterable[str], failed: list[_Batch] | None = None
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
            info = _TopicInfo(partitions, available)
            if self._topics.get(name) != info and self._sticky is not None:
                self._sticky.pop(name, None)  # choose again among the partitions now available
            self._topics[name] = info
            for p in topic.partitions:
                tp = (name, p.partition)
                state = self._partitions.get(tp)
                if state is None:
                    state = self._partitions[tp] = _PartitionState()
                state.leader = p.leader
            waiting = self._pending.pop(name, None)
            if waiting:
                self._place(name, waiting, failed)
        return incomplete

    def _place(self, topic: str, waiting: list[_Batch], failed: list[_Batch]) -> None:
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


def _earliest(current: float | None, candidate: float) -> float:
    candidate = max(candidate, 0.0)
    return candidate if current is None else min(current, candidate)
