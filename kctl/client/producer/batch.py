"""A record's way back to its sender: the in-flight ``ProducerBatch`` (one partition's records from
the first ``send`` to the broker's answer), each record's ``RecordFuture`` and ``RecordMetadata``, the
delivery callbacks (``on_delivery``), and the errors a record can end with (``ProducerClosedError``,
``DeliveryTimeoutError``).

To keep ``send`` cheap, a batch's futures share their state with the batch and one condition per
producer: ``Future.__init__`` is not run, a future reads its outcome from its batch, and completing a
batch visits only the futures someone waits on or gave a callback to (``ProducerBatch.watched``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, NamedTuple

from kctl.client.errors import KafkaError, KafkaTimeoutError
from kctl.records.builder import HeaderInput, RecordBatchBuilder
from kctl.records.header import HEADER_SIZE

__all__ = [
    "DeliveryCallback",
    "DeliveryTimeoutError",
    "ProducerBatch",
    "ProducerClosedError",
    "RecordFuture",
    "RecordMetadata",
    "delivery_adapter",
    "run_callbacks",
]

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[BaseException | None, "RecordMetadata | None"], object]

_RUNNING = "RUNNING"  # concurrent.futures' state names
_FINISHED = "FINISHED"
_monotonic = time.monotonic


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


AppendRecord = Callable[[int, bytes | None, bytes | None, Iterable[HeaderInput]], None]
"""``append(timestamp, key, value, headers)`` of a batch's builder."""


def no_builder(
    timestamp: int, key: bytes | None, value: bytes | None, headers: Iterable[HeaderInput]
) -> None:
    """The ``append`` of a batch without a builder (a placeholder, or a batch that is done)."""
    raise RuntimeError("this batch has no builder: a placeholder (its records wait in pending) or done")


class ProducerBatch:
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
        "possibly_written",
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
        self.append: AppendRecord = builder.append if builder is not None else no_builder
        self.futures: list[RecordFuture] = []
        self.pending: list[tuple[Any, ...]] = []  # placeholder: (key, value, headers, partition, size)
        self.size = HEADER_SIZE
        self.created = now
        self.deadline = now
        self.done = False
        self.closed = False
        self.in_flight = False
        self.possibly_written = False
        """Sent under the producer's current id and epoch with no answer yet that settles whether the
        broker wrote it (an idempotent batch): it must not be renumbered under a new epoch."""
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


class RecordFuture(Future):
    """The future of one record: its ``RecordMetadata``, or the error that kept it from the broker.

    A ``concurrent.futures.Future`` whose state lives in its batch (``Future.__init__`` is not run:
    the per-record cost of ``send`` stays a few attribute stores). It is completed by the producer
    only: ``set_result``/``set_exception`` raise, ``cancel`` returns False."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: ProducerBatch, index: int, timestamp: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp

    # the attributes Future's methods (and concurrent.futures.wait/as_completed) use, read from the
    # batch: read-only properties where Future has plain attributes (set only by its own methods)
    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        return self._batch.condition

    @property
    def _state(self) -> str:  # type: ignore[override]
        return _FINISHED if self._batch.done else _RUNNING

    @property
    def _exception(self) -> BaseException | None:  # type: ignore[override]
        batch = self._batch
        return batch.error if batch.done else None

    @property
    def _result(self) -> RecordMetadata | None:  # type: ignore[override]
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


def delivery_adapter(callback: DeliveryCallback) -> Callable[[RecordFuture], None]:
    def invoke(future: RecordFuture) -> None:
        # called once the future is done: its outcome is final and read without the lock
        error = future._exception
        callback(error, None if error is not None else future._result)

    return invoke


def run_callbacks(batches: Iterable[ProducerBatch]) -> None:
    """Run the done-callbacks of finished batches' futures, each once, without the producer's lock."""
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
