"""`kctl produce --transactional-id ID`: the input in transactions of `--transaction-size N` input
records each (`TransactionalSession`).

Each chunk of N input records (lines, JSON objects, files: what `kctl produce` makes one record of)
is sent in one transaction and committed; read_committed consumers see a chunk whole or not at all.
A chunk with a line that cannot be parsed, or a record that is not delivered, is aborted: none of its
records is visible to read_committed, and the error names its input lines ("lines 101-200 not
written"); the next chunk goes on in a new transaction. A fenced producer (another `kctl produce`
or client took the transactional id over) stops: the lines from the failed chunk on are not written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kctl.client import KafkaError
from kctl.client.errors import InvalidProducerEpochError, ProducerFencedError
from kctl.client.producer import Producer, RecordFuture, RecordMetadata
from kctl.console.produce import InputError, Parser, StoppedReading

__all__ = ["TransactionalSession"]

_FATAL = (ProducerFencedError, InvalidProducerEpochError)


class TransactionalSession:
    """Sends parsed records to one topic, `size` input records per transaction; `on_error(line,
    message)` for every failed chunk (its first line), `on_delivered(line, metadata)` for every record
    of a committed chunk. `delivered` and `failed` count records (failed: the records of aborted
    chunks, and lines that are not records)."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        size: int,
        *,
        on_error: Callable[[int, str], None],
        on_delivered: Callable[[int, RecordMetadata], None] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.size = size
        self.on_error = on_error
        self.on_delivered = on_delivered
        self.timeout = timeout
        self.delivered = 0
        self.failed = 0
        self.transactions = 0
        self.aborted = 0

    def run(self, lines: Iterable[tuple[int, bytes]], parse: Parser, partition: int | None = None) -> None:
        """Send every (line number, line) in transactions. Raises StoppedReading when the producer
        was fenced (nothing after the failed chunk is read)."""
        self.producer.init_transactions(self.timeout)
        chunk: list[tuple[int, bytes]] = []
        for item in lines:
            chunk.append(item)
            if len(chunk) >= self.size:
                self._transaction(chunk, parse, partition)
                chunk = []
        if chunk:
            self._transaction(chunk, parse, partition)

    def finish(self) -> None:
        """Nothing is left open: every chunk ended in a commit or an abort."""

    def _transaction(self, chunk: list[tuple[int, bytes]], parse: Parser, partition: int | None) -> None:
        producer = self.producer
        first, last = chunk[0][0], chunk[-1][0]
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        sent: list[tuple[int, RecordFuture]] = []
        problem: str | None = None
        try:
            producer.begin_transaction()
            for number, line in chunk:
                try:
                    record = parse(line)
                except InputError as error:
                    problem = f"line {number}: {error}"
                    break
                if record is None:
                    continue
                key, value, headers, record_partition, timestamp = record
                try:
                    future = producer.send(
                        self.topic,
                        value,
                        key,
                        headers or None,
                        partition if partition is not None else record_partition,
                        timestamp,
                    )
                except (TypeError, ValueError) as error:
                    problem = f"line {number}: {error}"
                    break
                sent.append((number, future))
            if problem is None:
                producer.commit_transaction(self.timeout)
                self.transactions += 1
                self.delivered += len(sent)
                if self.on_delivered is not None:
                    for number, future in sent:
                        self.on_delivered(number, future.result())
                return
        except _FATAL as error:
            self.failed += len(chunk)
            self.on_error(first, f"{where} and any after them not written: {error}")
            raise StoppedReading(first) from None
        except KafkaError as error:
            problem = _first_record_error(sent) or str(error)
        self.failed += len(chunk)
        self.aborted += 1
        try:
            producer.abort_transaction(self.timeout)
        except _FATAL as error:
            self.on_error(first, f"{where} and any after them not written: {error}")
            raise StoppedReading(first) from None
        except KafkaError as error:
            self.on_error(first, f"{where} not written (transaction aborted: {problem}; the abort: {error})")
            raise StoppedReading(first) from None
        self.on_error(first, f"{where} not written (transaction aborted: {problem})")


def _first_record_error(sent: list[tuple[int, RecordFuture]]) -> str | None:
    for number, future in sent:
        if future.done() and future.exception() is not None:
            return f"line {number}: {future.exception()}"
    return None
