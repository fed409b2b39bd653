"""The ``kctl`` data source for Spark 4's Python Data Source API: batch and streaming reads and writes
of kctl topics, with the options and the row schema of Spark's built-in Kafka source.

    from kctl.spark import register
    register(spark)                                   # once per SparkSession
    df = (spark.read.format("kctl")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

Rows: ``key`` and ``value`` (binary), ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType`` (0 CreateTime, 1 LogAppendTime) and, with ``includeHeaders=true``, ``headers``
(an array of ``key``/``value`` structs).

Where the work happens: planning (which partitions, which offsets, how the ranges are split into
tasks) runs in the driver's Python worker with ``kctl.client`` (``planning``); each Spark task reads
one ``OffsetRange`` with its own consumer (``reading``) and hands Spark Arrow record batches; each
write task produces its rows with its own producer (``writing``). Streaming offsets are JSON per
partition (``{"orders": {"0": 42}}``, as Spark's Kafka source checkpoints them); a micro-batch is
the ranges between two such offsets, so a query restarted from its checkpoint reads on exactly
from where its last committed batch ended.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kctl.client import Consumer, ConsumerRecord, TopicPartition
from kctl.spark.options import (
    SourceOptionError,
    SourceOptions,
    offsets_from_json,
    offsets_json,
    parse_options,
)
from kctl.spark.planning import (
    OffsetRange,
    consumer_config,
    limit_offsets,
    plan_ranges,
    resolve_bound,
    subscribed_partitions,
)
from kctl.spark.reading import DataLossError, read_range
from kctl.spark.writing import WriteResult, record_from_row, write_records

__all__ = ["KctlDataSource", "arrow_schema", "ddl_schema"]

_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])


def ddl_schema(include_headers: bool) -> str:
    """The rows' schema, as Spark's Kafka source has it."""
    ddl = (
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
        "timestampType int"
    )
    return ddl + (", headers array<struct<key: string, value: binary>>" if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", pa.list_(_HEADER)))
    return pa.schema(fields)


_KEY, _VALUE = operator.attrgetter("key"), operator.attrgetter("value")
_OFFSET, _TIMESTAMP = operator.attrgetter("offset"), operator.attrgetter("timestamp")
_TIMESTAMP_TYPE, _HEADERS = operator.attrgetter("timestamp_type"), operator.attrgetter("headers")


def to_arrow(records: Sequence[ConsumerRecord], schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    """One Arrow record batch of ``records`` (all of one partition, as a task reads them) in the
    rows' schema: per-record columns built with ``map`` at C speed, the constant ones repeated by
    Arrow, timestamps converted from milliseconds by Arrow."""
    n = len(records)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    first = records[0]
    millis = pa.array(list(map(_TIMESTAMP, records)), pa.int64())
    columns = [
        pa.array(list(map(_KEY, records)), pa.binary()),
        pa.array(list(map(_VALUE, records)), pa.binary()),
        pa.repeat(pa.scalar(first.topic, pa.string()), n),
        pa.repeat(pa.scalar(first.partition, pa.int32()), n),
        pa.array(list(map(_OFFSET, records)), pa.int64()),
        pa.compute.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(list(map(int, map(_TIMESTAMP_TYPE, records))), pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in headers] for headers in map(_HEADERS, records)],
                pa.list_(_HEADER),
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class KctlPartition(InputPartition):
    """One Spark task: one ``OffsetRange``."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, KctlPartition)
    schema = arrow_schema(options.include_headers)
    for chunk in read_range(options, partition.offset_range):
        yield to_arrow(chunk, schema, options.include_headers)


class KctlBatchReader(DataSourceReader):
    """``spark.read.format("kctl")``: the ranges from ``startingOffsets`` to ``endingOffsets``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with Consumer(options.bootstrap_servers, consumer_config(options)) as consumer:
            tps = subscribed_partitions(consumer.cluster, options)
            starts = resolve_bound(consumer, tps, options.starting)
            ends = resolve_bound(consumer, tps, options.ending)
        for tp in tps:
            if ends[tp] < starts[tp]:
                raise SourceOptionError(
                    f"{tp}: the ending offset {ends[tp]} is before the starting offset {starts[tp]}"
                )
        ranges = plan_ranges(starts, ends, options.min_partitions)
        return [KctlPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class KctlStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kctl")``: micro-batches between per-partition offsets, limited by
    ``maxOffsetsPerTrigger``; ``trigger(availableNow=True)`` reads up to the end offsets seen at
    the query's start. Partitions added to a subscription are read from their start."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: Consumer | None = None
        self._target: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:  # the tasks get the options, never the driver's consumer
        return {"options": self.options, "_consumer": None, "_target": None}

    def _client(self) -> Consumer:
        if self._consumer is None or self._consumer.closed:
            self._consumer = Consumer(self.options.bootstrap_servers, consumer_config(self.options))
        return self._consumer

    def initialOffset(self) -> dict:
        consumer = self._client()
        tps = subscribed_partitions(consumer.cluster, self.options)
        return offsets_json(resolve_bound(consumer, tps, self.options.starting))

    def _starts(self, start: Mapping[str, Any]) -> dict[TopicPartition, int]:
        """The offsets of ``start``, plus the log start of partitions it does not have yet."""
        consumer = self._client()
        known = offsets_from_json(start)
        tps = subscribed_partitions(consumer.cluster, self.options)
        new = [tp for tp in tps if tp not in known]
        return known | consumer.beginning_offsets(new)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        consumer = self._client()
        starts = self._starts(start)
        ends = consumer.end_offsets(list(starts))
        if self._target is not None:
            ends = {tp: min(end, self._target.get(tp, starts[tp])) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = limit_offsets(starts, ends, limit.max_rows)
        return offsets_json(ends)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        consumer = self._client()
        tps = subscribed_partitions(consumer.cluster, self.options)
        self._target = consumer.end_offsets(tps)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        starts = self._starts(start)
        ends = offsets_from_json(end)
        for tp, until in ends.items():
            if until < starts.get(tp, until):
                message = f"{tp}: offset {until} is before {starts[tp]}: the log was truncated"
                if self.options.fail_on_data_loss:
                    raise DataLossError(message + " (set failOnDataLoss=false to go on)")
        known = {tp: starts[tp] for tp in ends if tp in starts}
        ranges = plan_ranges(known, ends, self.options.min_partitions)
        return [KctlPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class KctlCommitMessage(WriterCommitMessage):
    """What a write task reports to the driver: records per topic."""

    def __init__(self, result: WriteResult) -> None:
        self.records = dict(result.records)


def _write(options: SourceOptions, rows: Iterator[Any]) -> KctlCommitMessage:
    return KctlCommitMessage(write_records(options, (record_from_row(row.asDict()) for row in rows)))


def _check_write_schema(options: SourceOptions, schema: StructType) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise SourceOptionError("writing to kctl needs a value column")
    if options.topic is None and "topic" not in names:
        raise SourceOptionError("writing to kctl needs the option topic or a topic column")


class KctlWriter(DataSourceWriter):
    """``df.write.format("kctl")``: each task produces its rows; a failed delivery fails the task."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KctlCommitMessage:
        return _write(self.options, iterator)


class KctlStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("kctl")``: each micro-batch's tasks produce their rows (at least once:
    a batch retried after a failure may write some records again, as with Spark's Kafka sink)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KctlCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        """Nothing to do: each record was acknowledged before its task ended."""


class KctlDataSource(DataSource):
    """The ``kctl`` format (see the module docstring and ``kctl.spark.options``)."""

    @classmethod
    def name(cls) -> str:
        return "kctl"

    def _options(self, *, streaming: bool = False, writing: bool = False) -> SourceOptions:
        return parse_options(dict(self.options), streaming=streaming, writing=writing)

    def schema(self) -> str:
        return ddl_schema(self._options(writing=True).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KctlBatchReader(self._options())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KctlStreamReader(self._options(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._options(writing=True)
        _check_write_schema(options, schema)
        return KctlWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = self._options(writing=True)
        _check_write_schema(options, schema)
        return KctlStreamWriter(options)
