"""The producer: ``send`` records to topics; they are batched per partition, compressed, sent to each
partition's leader by a background thread, retried in order, and acknowledged through futures.

::

    with Producer("127.0.0.1:9092", {"acks": "all", "linger.ms": "5"}) as producer:
        future = producer.send("orders", b"value", key=b"k1", headers=[("origin", b"web")])
        metadata = future.result()                       # RecordMetadata(topic, partition, offset, timestamp)
        producer.send("orders", b"v2", on_delivery=lambda error, metadata: ...)
        producer.flush()

``Producer`` is the public face of the package and wires its parts:

* ``accumulator`` — the batches being filled per partition, their readiness (``batch.size``,
  ``linger.ms``), ``buffer.memory`` and the records waiting for their topic's metadata. ``Producer``
  extends ``RecordAccumulator``, so that ``send``'s per-record work reads its state directly.
* ``batch`` — a batch in flight, each record's ``RecordFuture`` / ``RecordMetadata``, delivery
  callbacks, and the errors a record ends with.
* ``sender`` — the sender and receiver threads: Produce requests per leader, responses, retries.
* ``idempotence`` — the producer id and epoch (InitProducerId) and the batches' sequence numbers.

Life of a record. ``send`` (the caller's thread) picks the partition (``partitioner.class``), appends
the record to that partition's open batch (a ``RecordBatchBuilder``) and returns a
``concurrent.futures.Future``; that is all the per-record work. The sender thread sends the batch once
it is ready, and a receiver thread completes its futures when the broker answers.

Ordering and duplicates. With idempotence (the default when the broker supports InitProducerId and
acks is not 0) the broker drops a resent batch it already wrote (answering with its original offsets)
and refuses one that skips ahead, so up to 5 batches per partition may be in flight and a retry never
reorders or duplicates records. Without idempotence a partition has at most one batch in flight when
``retries`` > 0, which keeps the order too (a resent batch may be written twice).

Errors. Retriable errors are retried until ``retries`` or ``delivery.timeout.ms`` runs out
(``DeliveryTimeoutError``); others fail the records' futures (``BrokerResponseError``). Records to a
topic whose metadata is not known yet wait (without blocking ``send``) until the metadata arrives, or
fail after ``delivery.timeout.ms``. ``send`` itself raises only for arguments of the wrong type, after
``close``, and with ``KafkaTimeoutError`` when ``buffer.memory`` stayed full for ``max.block.ms``
(back-pressure: it blocks meanwhile).

Transactions. With ``transactional.id`` (idempotence is then required) the producer is transactional
(``kctl.client.producer.transactions``): ``init_transactions()`` once, then ``begin_transaction()``,
``send``..., optionally ``send_offsets_to_transaction``, and ``commit_transaction()`` or
``abort_transaction()``. A newer producer with the same id fences this one (``ProducerFencedError``).

Futures. Each record's future is a ``RecordFuture`` (a ``concurrent.futures.Future``): ``result()``,
``exception()``, ``add_done_callback``, ``concurrent.futures.wait``/``as_completed`` all work. They
cannot be cancelled (``cancel()`` returns False: the record is already on its way).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig
from kctl.client.errors import BrokerResponseError, KafkaTimeoutError, TransactionStateError
from kctl.client.producer.accumulator import RECORD_OVERHEAD, RecordAccumulator, headers_size
from kctl.client.producer.batch import (
    DeliveryCallback,
    ProducerClosedError,
    RecordFuture,
    RecordMetadata,
    delivery_adapter,
    run_callbacks,
)
from kctl.client.producer.sender import Sender
from kctl.client.producer.transactions import ConsumerGroupMetadata, TransactionManager
from kctl.client.producer_config import ProducerConfig
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ErrorCode

__all__ = ["HeadersInput", "Producer", "RecordFields"]

HeadersInput = Sequence[tuple[str | bytes, bytes | str | None]] | Mapping[str, bytes | str | None]


class RecordFields(TypedDict, total=False):
    """A record's fields besides its topic and value, as ``Producer.send`` takes them."""

    key: bytes | str | None
    headers: HeadersInput | None
    partition: int | None
    timestamp: int | None


_time = time.time
_monotonic = time.monotonic


class Producer(RecordAccumulator):
    """A thread-safe Kafka producer. ``config``: a ``ProducerConfig``, a ``ClientConfig`` or Kafka
    producer properties (``{"acks": "all", "linger.ms": "5"}``); ``overrides`` are ``ProducerConfig``
    field names (``acks=1, linger_ms=10``) and win. Nothing is connected until the first record."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        config: ClientConfig | Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        config = ProducerConfig.coerce(config, **overrides)
        super().__init__(config)
        self._cluster = ClusterClient(bootstrap_servers, config, retry_bootstrap=True)
        self._request_timeout = config.request_timeout
        # the last on_delivery callback given to send and its adapter (reused while it is the same)
        self._last_adapter: tuple[Any, Any] = (None, None)
        if config.transactional_id is not None:
            self._idempotence.transactional_id = config.transactional_id
            self._transactions = TransactionManager(
                self._cluster,
                config.transactional_id,
                config.transaction_timeout_ms,
                self._request_timeout,
                self._idempotence,
                self._apply_producer_ids,
            )
        self._sender = Sender(self, self._cluster, config)
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
        return self._idempotence.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._idempotence.producer_epoch

    @property
    def idempotent(self) -> bool | None:
        """Whether batches carry a producer id and sequence numbers (None: not decided yet)."""
        return self._idempotence.enabled

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
        if self._transactions is not None:
            self._transactions.check_send()
        if timestamp is None:
            timestamp = int(_time() * 1000)
        info = self._topics.get(topic)
        future = None
        if (
            info is not None
            and (partition is None or 0 <= partition < len(info.partitions))
            and (key is None or type(key) is bytes)  # str keys and values: encoded on the slow path
            and (value is None or type(value) is bytes)
        ):
            size = RECORD_OVERHEAD
            try:
                if value is not None:
                    size += len(value)
                if key is not None:
                    size += len(key)
                if headers:
                    if isinstance(headers, Mapping):
                        headers = list(headers.items())
                    size += headers_size(headers)
            except (TypeError, ValueError):  # not bytes: normalized (or refused) on the slow path
                size = -1
            if size > self._max_record:
                future = self._reject(topic, -1 if partition is None else partition, size, timestamp)
            elif size >= 0:
                sticky = self._sticky if partition is None and key is None else None
                if sticky is None:
                    if partition is None:
                        hashes = self._key_hashes
                        if hashes is not None and key is not None:  # the default partitioner's murmur2
                            positive = hashes.get(key)
                            if positive is None:
                                positive = self._hash_key(key)
                            partition = info.partitions[positive % len(info.partitions)]
                        else:
                            partitions, available = info.partitions, info.available
                            partition = self._partitioner.partition(topic, key, partitions, available)
                    tp = (topic, partition)
                with self._lock:
                    if sticky is not None:  # the open batch of the partition records without a key go to
                        batch = sticky.get(topic)
                        if batch is None or batch.size + size > self._batch_size:
                            batch = self._sticky_batch(topic, info, size)
                    else:
                        batch = self._open.get(tp)
                        if batch is None or batch.size + size > self._batch_size:
                            batch = self._batch_for(tp, size, True)
                            assert batch is not None  # None only above max.request.size, refused above
                    futures = batch.futures
                    future = RecordFuture(batch, len(futures), timestamp)
                    try:
                        # headers of str values raise TypeError (the builder takes bytes): coerced below
                        batch.append(timestamp, key, value, headers or ())  # type: ignore[arg-type]
                    except TypeError:
                        batch.append(timestamp, *self._coerce_record(key, value, headers))
                    futures.append(future)
                    if on_delivery is not None:
                        # the batch cannot complete while the lock is held: no need for the
                        # future's own condition (add_done_callback) on this path
                        adapter = self._last_adapter
                        if adapter[0] is not on_delivery:  # most senders pass one callback
                            adapter = self._last_adapter = (on_delivery, delivery_adapter(on_delivery))
                        future.__dict__["_done_callbacks"] = [adapter[1]]
                        batch.watched.append(future)
                        on_delivery = None
                    batch.size += size
                    if batch.size >= self._batch_size:
                        self._close_open(batch)
        if future is None:
            future = self._send_slow(topic, value, key, headers, partition, timestamp)
        if on_delivery is not None:
            future.add_done_callback(delivery_adapter(on_delivery))  # type: ignore[arg-type]  # a RecordFuture
        return future

    def produce_sync(
        self,
        topic: str,
        value: bytes | str | None = None,
        *,
        timeout: float | None = None,
        **record: Unpack[RecordFields],
    ) -> RecordMetadata:
        """``send`` one record (``record``: its other fields, by name), make it leave at once (no
        linger) and wait for its metadata."""
        future = self.send(topic, value, **record)
        with self._lock:
            self._flushing += 1
            self._wakeup.notify()
        try:
            return future.result(timeout)
        finally:
            with self._lock:
                self._flushing -= 1

    # ------------------------------------------------------------------------------ transactions

    def _txn(self) -> TransactionManager:
        if self._transactions is None:
            raise TransactionStateError("the producer has no transactional.id")
        return self._transactions

    def _apply_producer_ids(self, producer_id: int, producer_epoch: int) -> None:
        with self._lock:
            idempotence = self._idempotence
            idempotence.producer_id = producer_id
            idempotence.producer_epoch = producer_epoch
            idempotence.enabled = True
            idempotence.reset_sequences = False
            for state in self._partitions.values():
                state.next_sequence = 0

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the ``transactional.id`` with its coordinator (InitProducerId): what an older
        producer with the id left open is finished, and that producer is fenced from now on.
        Raises ``ProducerFencedError`` if a newer one fenced this producer meanwhile."""
        self._txn().init(self._max_block if timeout is None else timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until ``commit_transaction`` or
        ``abort_transaction`` become visible to read_committed consumers together, or never."""
        self._txn().begin()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's ``offsets`` (the next offset to read, per partition) with the
        transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator): they take
        effect when it commits and are dropped when it aborts. ``group_metadata``: the group id, or
        its ``ConsumerGroupMetadata`` (generation and member id, which fence a zombie member)."""
        group = ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) else group_metadata
        self._txn().send_offsets(offsets, group, self._max_block if timeout is None else timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver the transaction's records (``flush``) and commit it (EndTxn). Raises
        ``TransactionAbortedError`` when a record failed (then ``abort_transaction``), or the fencing
        errors (``ProducerFencedError``, ``InvalidProducerEpochError``)."""
        txn = self._txn()
        timeout = self._max_block if timeout is None else timeout
        if self.flush(timeout):
            raise KafkaTimeoutError(f"commit_transaction: records not delivered within {timeout:.1f}s")
        txn.end(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction (EndTxn): its records are never visible to read_committed
        consumers, its offsets never committed. Waits for the records in flight first."""
        txn = self._txn()
        timeout = self._max_block if timeout is None else timeout
        self.flush(timeout)
        txn.end(False, timeout)

    @property
    def transactional_id(self) -> str | None:
        return None if self._transactions is None else self._transactions.transactional_id

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
        run_callbacks(leftovers)
        self._sender.join(timeout=max(self._request_timeout, 1.0))
        self._cluster.close()  # unblocks receivers waiting for responses
        self._sender.stop_receivers()

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
