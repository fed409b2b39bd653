"""Parquet written by the Spark tasks themselves: the fast path of ``kctl spark load`` for raw and
UTF-8 keys and values.

Spark still schedules the work (one task per partition range, on every executor), but each task
reads its range with a kctl consumer, builds Arrow record batches (``source.to_arrow``) and writes
them with pyarrow's Parquet writer straight into the run's staging directory, in the layout
``DataFrame.write.partitionBy("topic", "date")`` gives (``topic=T/date=YYYY-MM-DD/part-....parquet``,
without the two partition columns in the files). No row crosses from Python into the JVM, which is
what the Python Data Source API costs on the DataFrame path; JSON values, which need Spark's
``from_json``, keep that path (``load._decode``).

A file's name is its range (``part-<partition>-<from_offset>-<until_offset>.parquet``), so a task
that Spark retries overwrites what its failed attempt left. The staging directory only becomes
visible by the run's commit rename (``load``), as before.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kctl.spark.options import SourceOptions
from kctl.spark.planning import OffsetRange
from kctl.spark.reading import read_range
from kctl.spark.source import arrow_schema, to_arrow

__all__ = ["RangeWritten", "run_tasks", "write_range", "write_ranges"]

RangeWritten = tuple[str, int, int]
"""(topic, partition, records written) of one range."""

_PARTITION_COLUMNS = ("topic",)
"""Columns of the rows' schema that are directories in the output, not columns of the files."""


def _file_schema(include_headers: bool, key_format: str, value_format: str) -> pa.Schema:
    schema = arrow_schema(include_headers)
    schema = schema.remove(schema.get_field_index("topic"))
    for name, fmt in (("key", key_format), ("value", value_format)):
        if fmt == "utf8":
            schema = schema.set(schema.get_field_index(name), pa.field(name, pa.string()))
    return schema


def _as_text(column: pa.Array) -> pa.Array:
    """Binary as UTF-8 text without validation, as Spark's ``cast(binary as string)`` does."""
    return pc.cast(column, options=pc.CastOptions(pa.string(), allow_invalid_utf8=True))


def _day(batch: pa.RecordBatch) -> pa.Array:
    return pc.cast(batch.column("timestamp"), pa.date32())


def write_range(
    options: SourceOptions, offset_range: OffsetRange, staging: str, key_format: str, value_format: str
) -> RangeWritten:
    """Read ``offset_range`` and write it as Parquet under ``staging``; returns what was written."""
    schema = arrow_schema(options.include_headers)
    file_schema = _file_schema(options.include_headers, key_format, value_format)
    r = offset_range
    name = f"part-{r.partition:05d}-{r.from_offset}-{r.until_offset}.parquet"
    topic_dir = Path(staging) / f"topic={offset_range.topic}"
    writers: dict[str, pq.ParquetWriter] = {}
    written = 0
    try:
        for chunk in read_range(options, offset_range):
            batch = to_arrow(chunk, schema, options.include_headers)
            days = _day(batch)
            batch = batch.drop_columns(list(_PARTITION_COLUMNS))
            for column, fmt in (("key", key_format), ("value", value_format)):
                if fmt == "utf8":
                    index = batch.schema.get_field_index(column)
                    batch = batch.set_column(index, column, _as_text(batch.column(column)))
            unique_days = pc.unique(days)
            for day in unique_days.to_pylist():
                part = batch if len(unique_days) == 1 else batch.filter(pc.equal(days, day))
                key = day.isoformat()
                writer = writers.get(key)
                if writer is None:
                    directory = topic_dir / f"date={key}"
                    directory.mkdir(parents=True, exist_ok=True)
                    writer = writers[key] = pq.ParquetWriter(directory / name, file_schema)
                writer.write_batch(part.cast(file_schema))
            written += batch.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    return offset_range.topic, offset_range.partition, written


def write_ranges(
    tasks: Iterable[tuple[str, str, str, str, str]],
) -> Iterator[RangeWritten]:
    """A Spark task's work (``mapPartitions``): each item is (options JSON, range JSON, staging
    directory, key format, value format)."""
    from kctl.spark.options import parse_options

    for options_json, range_json, staging, key_format, value_format in tasks:
        options = parse_options(json.loads(options_json))
        offset_range = OffsetRange(**json.loads(range_json))
        yield write_range(options, offset_range, staging, key_format, value_format)


def run_tasks(
    spark: Any,
    options: dict[str, str],
    ranges: list[OffsetRange],
    staging: Path,
    key_format: str,
    value_format: str,
) -> list[RangeWritten]:
    """Write every range with one Spark task each; returns what each wrote."""
    options_json = json.dumps(options)
    tasks = [
        (options_json, json.dumps(dataclasses.asdict(r)), str(staging), key_format, value_format)
        for r in ranges
    ]
    staging.mkdir(parents=True, exist_ok=True)
    rdd = spark.sparkContext.parallelize(tasks, max(len(tasks), 1))
    return [(str(t), int(p), int(n)) for t, p, n in rdd.mapPartitions(write_ranges).collect()]
