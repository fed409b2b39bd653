"""Fetch requests and the decoding of their answers: the consumer's hot path, and the seeds' stateless
simple-consumer call.

* ``ConsumerRecord`` — what a consumer returns: topic, partition, offset, timestamp, timestamp type,
  key, value, headers (a ``NamedTuple``, built with one ``tuple.__new__`` per record).
* ``build_fetch_request`` — one Fetch request for several partitions of one leader (in a fetch
  session or not: ``sessions`` decides).
* ``decode_partition`` — a partition's ``records`` bytes to ``ConsumerRecord``s, from the requested
  offset on: records below it in the first batch are skipped (a broker answers from the batch that
  holds the offset), control batches (transaction markers) are skipped, and so are, for read_committed,
  the batches of the aborted transactions the response lists, a trailing partial batch is
  ignored, compressed batches are decompressed (``kctl.records.reader``), CRCs checked on request.
  It also returns the offset to fetch next: one past the last complete batch, so that control batches
  and the gaps a compacted log leaves are stepped over.
* ``fetch`` — one Fetch for one partition at one offset, no state: the simple consumer of the seeds.

Fetch is sent at versions 4–12: record batches v2 and topic names (v13 replaced them with topic ids);
from v11 on with the consumer's rack (``client.rack``, KIP-392).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kctl.records.columns import decode_columns
from kctl.records.header import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    InvalidRecordBatch,
    parse_header,
    read_prefix,
    validate_batch,
)
from kctl.records.reader import MIN_RECORD_SIZE, decode_batch, decode_section, records_section
from kctl.records.record import Header
from kctl.records.varying import decode_varying, sizes_vary

__all__ = [
    "FETCH_MAX_VERSION",
    "FETCH_MIN_VERSION",
    "ConsumerRecord",
    "CorruptRecordError",
    "DecodedPartition",
    "FetchedRecords",
    "TimestampType",
    "build_fetch_request",
    "decode_partition",
    "fetch",
]

FETCH_MIN_VERSION = 4
"""Record batches v2 come back unconverted from v4 on (and the last stable offset)."""
FETCH_MAX_VERSION = 12
"""The last version that names topics (v13 uses topic ids)."""

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class TimestampType(enum.IntEnum):
    """Kafka's timestamp types (the ids of Java's ``TimestampType``)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """``CreateTime``, ``LogAppendTime`` or ``NoTimestampType`` (Java's names)."""
        return _LABELS[self]


_LABELS = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ConsumerRecord(NamedTuple):
    """One record read from a partition. ``headers`` is a tuple of ``(key, value)`` pairs in order
    (keys are strings, values bytes or None); ``key``/``value`` are bytes or None."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class CorruptRecordError(KafkaError):
    """A fetched batch failed its CRC check or could not be decoded."""

    def __init__(self, message: str, *, partition: TopicPartition | None = None, offset: int = -1) -> None:
        super().__init__(message)
        self.partition = partition
        self.offset = offset


class DecodedPartition(NamedTuple):
    """The records of one partition of a Fetch response, and what to fetch next.

    ``next_offset`` is None when no complete batch at or past the fetch offset came back (nothing,
    or only a partial batch: ``partial``). ``error``: a corrupt batch that followed the records
    returned (fetching from ``next_offset`` meets it again)."""

    records: list[ConsumerRecord]
    next_offset: int | None
    partial: bool
    error: CorruptRecordError | None = None


_CREATE = TimestampType.CREATE_TIME
_APPEND = TimestampType.LOG_APPEND_TIME
_new = tuple.__new__
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


class FetchedRecords:
    """One partition's records from a Fetch response, decoded lazily, batch by batch.

    Creating it frames the batches (their headers only: no CRC, no records yet) to know what comes
    next — ``next_offset``, one past the last complete batch at or after the fetch offset (None if
    there is none), and ``partial``, whether only part of a batch came back. ``next_batch`` then
    checks and decodes one batch at a time, so a consumer decodes what the application gets to and
    holds the response's bytes rather than all its records (a compressed response may hold many).
    A batch whose header cannot be parsed ends the framing; ``broken`` holds its error, which
    ``next_batch`` raises once the batches before it were returned."""

    __slots__ = (
        "_aborted",
        "_aborting",
        "_batches",
        "_buf",
        "_index",
        "_position",
        "broken",
        "check_crcs",
        "fetch_offset",
        "max_decompressed_size",
        "next_offset",
        "partial",
        "partition",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        data: Any,
        fetch_offset: int,
        *,
        check_crcs: bool = True,
        max_decompressed_size: int | None = None,
        aborted_transactions: Sequence[Any] | None = None,
    ) -> None:
        self.topic = topic
        # read_committed: the Fetch response's aborted transactions (producer id, first offset),
        # earliest first, and the producers whose aborted transaction is open at the current batch
        self._aborted: list[tuple[int, int]] | None = (
            sorted(((t.first_offset, t.producer_id) for t in aborted_transactions), reverse=True)
            if aborted_transactions
            else None
        )
        self._aborting: set[int] = set()
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.check_crcs = check_crcs
        self.max_decompressed_size = max_decompressed_size
        buf = b"" if not data else data if type(data) is bytes else bytes(data)  # slices of bytes are bytes
        self._buf = buf
        self._batches: list[tuple[int, BatchHeader]] = []
        self._index = 0
        self._position = fetch_offset
        self.next_offset: int | None = None
        self.partial = False
        self.broken: InvalidRecordBatch | None = None
        end = len(buf)
        position = 0
        while end - position >= LOG_OVERHEAD:
            _, batch_length = read_prefix(buf, position)
            if position + LOG_OVERHEAD + batch_length > end:
                break  # a partial batch ends the response
            try:
                header = parse_header(buf, position)
            except InvalidRecordBatch as error:
                self.broken = error
                break
            batch_end = header.base_offset + header.last_offset_delta + 1
            if batch_end > fetch_offset:  # else a whole batch below the offset asked for
                self._batches.append((position, header))
                self.next_offset = batch_end
            position += batch_length + LOG_OVERHEAD
        self.partial = self.next_offset is None and self.broken is None and position < end

    def _corrupt(self, error: InvalidRecordBatch) -> CorruptRecordError:
        at = self._position
        return CorruptRecordError(
            f"partition {self.topic}-{self.partition}: corrupt record batch at offset {at}: {error}",
            partition=TopicPartition(self.topic, self.partition),
            offset=at,
        )

    def next_batch(self) -> tuple[list[ConsumerRecord], int] | None:
        """The records of the next batch at or after the fetch offset (none for a control batch) and
        the offset after the batch; None when every batch was returned. Raises CorruptRecordError
        (bad CRC with ``check_crcs``, malformed records)."""
        if self._index >= len(self._batches):
            if self.broken is not None:
                raise self._corrupt(self.broken)
            return None
        position, header = self._batches[self._index]
        self._index += 1
        batch_end = header.base_offset + header.last_offset_delta + 1
        records: list[ConsumerRecord] = []
        if self._aborted is not None and self._skip_aborted(position, header, batch_end):
            self._position = batch_end
            return records, batch_end
        if not header.attributes & CONTROL_FLAG_MASK:  # transaction markers are not records
            try:
                if self.check_crcs:
                    validate_batch(self._buf, position)
                _batch_records(
                    self._buf,
                    position,
                    header,
                    self.topic,
                    self.partition,
                    self.max_decompressed_size,
                    records,
                )
            except InvalidRecordBatch as error:
                self._index = len(self._batches)  # nothing after a corrupt batch is returned
                self.broken = error
                raise self._corrupt(error) from None
            if header.base_offset < self.fetch_offset:
                fetch_offset = self.fetch_offset
                records = [r for r in records if r[2] >= fetch_offset]
        self._position = batch_end
        return records, batch_end

    def _skip_aborted(self, position: int, header: BatchHeader, batch_end: int) -> bool:
        """read_committed (the broker listed aborted transactions): whether the batch belongs to an
        aborted transaction, as Kafka's consumer decides. A transaction listed with a first offset at
        or before the batch's last offset is open for its producer until that producer's ABORT
        marker; the producer's transactional batches meanwhile are dropped."""
        aborted = self._aborted
        assert aborted is not None
        while aborted and aborted[-1][0] < batch_end:
            self._aborting.add(aborted.pop()[1])
        attributes = header.attributes
        if not attributes & TRANSACTIONAL_FLAG_MASK:
            return False
        if attributes & CONTROL_FLAG_MASK:
            if header.producer_id in self._aborting and _is_abort_marker(self._buf, position, header):
                self._aborting.discard(header.producer_id)
            return False  # a marker is stepped over as ever
        return header.producer_id in self._aborting


def _is_abort_marker(buf: bytes, position: int, header: BatchHeader) -> bool:
    """Whether the control batch at ``position`` is an ABORT marker (its record's key: int16
    version, int16 type, 0 for ABORT and 1 for COMMIT)."""
    try:
        records = decode_batch(buf, position, verify_crc=False).records
    except InvalidRecordBatch:
        return False
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and int.from_bytes(key[2:4], "big", signed=True) == 0


def decode_partition(
    topic: str,
    partition: int,
    data: Any,
    fetch_offset: int,
    *,
    check_crcs: bool = True,
    max_decompressed_size: int | None = None,
) -> DecodedPartition:
    """Decode all the ``records`` of one partition of a Fetch response (bytes or a memoryview).

    Returns the records at or after ``fetch_offset``. A complete batch that is corrupt (bad CRC with
    ``check_crcs``, malformed records) raises ``CorruptRecordError`` when it is the first batch;
    after good batches, their records come back with the error in ``error``.

    Batches are framed and checked with ``kctl.records.header`` and decompressed with
    ``kctl.records.compression``; their records are decoded into columns by
    ``kctl.records.columns.decode_columns`` and built into ``ConsumerRecord``s from them, and any
    batch it does not accept (record headers, long varints, malformed records) is decoded again by
    ``kctl.records.reader.decode_section``, whose records (or error) then count."""
    fetched = FetchedRecords(
        topic,
        partition,
        data,
        fetch_offset,
        check_crcs=check_crcs,
        max_decompressed_size=max_decompressed_size,
    )
    out: list[ConsumerRecord] = []
    next_offset: int | None = None
    try:
        while (batch := fetched.next_batch()) is not None:
            out += batch[0]
            next_offset = batch[1]
    except CorruptRecordError as error:
        if next_offset is None:
            raise
        return DecodedPartition(out, next_offset, False, error)
    return DecodedPartition(out, next_offset, fetched.partial)


def _batch_records(
    buf: bytes,
    position: int,
    header: BatchHeader,
    topic: str,
    partition: int,
    max_decompressed_size: int | None,
    out: list[ConsumerRecord],
) -> None:
    """Append the records of the (framed, checked) batch at ``position`` to ``out``: through
    ``decode_varying`` when its first two records differ in size, else (or when it does not take
    the batch) ``decode_columns`` for the usual batch, one ``map``/``zip`` over the columns of
    each of its runs (consecutive offsets as a ``range``, a timestamp the run shares as a
    ``repeat``), else (record headers, long deltas, anything odd) ``decode_section``, whose records
    or error then count."""
    data, pos, limit = records_section(buf, position, header, max_decompressed_size)
    count = header.records_count
    if header.attributes & TIMESTAMP_TYPE_MASK:
        ts_type, base_ts, fixed = _APPEND, header.max_timestamp, True
    else:
        ts_type, base_ts, fixed = _CREATE, header.base_timestamp, False
    runs = None
    if 0 < count <= (limit - pos) // MIN_RECORD_SIZE:
        try:
            varying = decode_varying(data, pos, limit, count) if sizes_vary(data, pos, limit) else None
            runs = [varying[0]] if varying is not None else decode_columns(data, pos, limit, count)
        except (IndexError, ValueError):
            runs = None  # decode_section says what is wrong
    if runs is not None:
        base_offset = header.base_offset
        for run in runs:
            deltas = run.offset_deltas
            if type(deltas) is range:
                offsets: Iterable[int] = range(base_offset + deltas.start, base_offset + deltas.stop)
            else:
                offsets = map(base_offset.__add__, deltas)
            ts_deltas = run.timestamp_deltas
            if fixed:
                timestamps: Iterable[int] = repeat(base_ts)
            elif type(ts_deltas) is int:
                timestamps = repeat(base_ts + ts_deltas)
            else:
                timestamps = map(base_ts.__add__, ts_deltas)  # type: ignore[arg-type]
            keys = run.keys
            values = run.values
            out += map(
                _new,
                repeat(ConsumerRecord),
                zip(
                    repeat(topic),
                    repeat(partition),
                    offsets,
                    timestamps,
                    repeat(ts_type),
                    repeat(None) if keys is None else keys,
                    repeat(None) if values is None else values,
                    repeat(_NO_HEADERS),
                ),
            )
        return

    def make(
        offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: list[Header]
    ) -> ConsumerRecord:
        return _new(
            ConsumerRecord,
            (
                topic,
                partition,
                offset,
                timestamp,
                ts_type,
                key,
                value,
                tuple(headers) if headers else _NO_HEADERS,
            ),
        )

    out += decode_section(data, pos, limit, header, position, make)


def build_fetch_request(
    partitions: Sequence[tuple[TopicPartition, int]],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: Sequence[TopicPartition] = (),
    rack_id: str = "",
) -> FetchRequest:
    """A Fetch request for ``(partition, fetch offset)`` pairs, in that order (the broker fills the
    response in request order, and always returns at least one batch of the first partition). With
    no session (the default: id 0, epoch -1) it is a full, sessionless one; ``kctl.client.consumer.
    sessions`` gives the session id, epoch and partitions to forget of an incremental one."""
    topics: list[FetchTopic] = []
    for tp, offset in partitions:
        if not topics or topics[-1].topic != tp.topic:  # runs of one topic, keeping the order
            topics.append(FetchTopic(topic=tp.topic, partitions=[]))
        topics[-1].partitions.append(
            FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes
            )
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max(int(max_wait_ms), 0),
        min_bytes=max(int(min_bytes), 0),
        max_bytes=int(max_bytes),
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=topics,
        forgotten_topics_data=_forgotten_topics(forgotten),
        rack_id=rack_id,
    )


def _forgotten_topics(forgotten: Sequence[TopicPartition]) -> list[ForgottenTopic]:
    by_topic: dict[str, list[int]] = {}
    for tp in forgotten:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [ForgottenTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()]


def iter_partition_data(response: Any) -> Iterable[tuple[TopicPartition, Any]]:
    """``(TopicPartition, PartitionData)`` for every partition of a Fetch response."""
    for topic in response.responses:
        for part in topic.partitions:
            yield TopicPartition(topic.topic, part.partition_index), part


def fetch(
    cluster: ClusterClient,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int = 1_048_576,
    *,
    max_wait_ms: int = 0,
    check_crcs: bool = True,
    timeout: float | None = None,
) -> list[ConsumerRecord]:
    """The seeds' simple consumer: one Fetch of ``topic``/``partition`` from ``offset``, up to
    ``max_bytes``, with no state kept. Returns the records at or after ``offset`` (possibly none).

    The leader is looked up in the cluster's metadata; a leader change (NOT_LEADER_OR_FOLLOWER, ...)
    is retried until the deadline (``timeout``, default ``default.api.timeout.ms``). Other partition
    errors raise ``BrokerResponseError`` (OFFSET_OUT_OF_RANGE when ``offset`` is outside the log)."""
    tp = TopicPartition(topic, partition)
    deadline = cluster.deadline(timeout)

    def attempt() -> list[ConsumerRecord]:
        leader = cluster.leader_for(tp, deadline=deadline)
        conn = cluster.connection(leader, deadline=deadline)
        version = conn.version_for(ApiKey.FETCH, min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION)
        body = build_fetch_request(
            [(tp, offset)],
            max_wait_ms=max_wait_ms,
            min_bytes=0 if max_wait_ms <= 0 else 1,
            max_bytes=max_bytes,
            partition_max_bytes=max_bytes,
        )
        wait = max_wait_ms / 1000.0 + cluster.config.request_timeout
        response = conn.request(ApiKey.FETCH, body, version, timeout=_within(deadline, wait))
        if getattr(response, "error_code", 0):
            raise BrokerResponseError(response.error_code, context=f"fetch {tp}")
        for got, part in iter_partition_data(response):
            if got != tp:
                continue
            if part.error_code:
                raise BrokerResponseError(part.error_code, context=f"fetch {tp} at offset {offset}")
            return decode_partition(topic, partition, part.records, offset, check_crcs=check_crcs).records
        raise BrokerResponseError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the response did not mention {tp}")

    return cluster.retry(attempt, deadline=deadline, description=f"fetch {tp}")


def _within(deadline: Deadline, seconds: float) -> float:
    return max(min(seconds, deadline.remaining()), 0.001)
