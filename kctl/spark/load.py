"""The warehouse load behind ``kctl spark load``: topics into Parquet with Spark, exactly once across
runs, the offsets each run covered stored with its output.

Layout of a destination ``PATH``::

    PATH/run=000001/_kctl_offsets.json          what run 1 covered, and where every partition is now
    PATH/run=000001/topic=orders/date=2024-05-01/part-....parquet
    PATH/run=000002/...
    PATH/_staging-run-000003-<attempt>/           a run being written (or one that died): never read
    PATH/_kctl_load.lock                          held (flock) by the running load: one at a time

``spark.read.parquet(PATH)`` reads everything loaded, with ``run``, ``topic`` and ``date`` (the UTC
day of the record's timestamp) as partition columns; Spark skips paths that start with ``_``.

A run (``run_load``):

1. ``plan_load``: the next offset of each partition is what the newest committed run's
   ``_kctl_offsets.json`` says (the log start for a partition never loaded); the run reads from there
   up to the end offsets seen when it starts (or ``until``).
2. Spark reads those ranges in parallel (one task per partition range, more with
   ``min_partitions``) and writes Parquet into ``_staging-run-N-<attempt>``, a directory of this
   attempt's own: the Python workers of a killed run can outlive it (PySpark's daemon runs them in
   a process group of their own) and go on writing the same file names into their attempt's
   directory, never into the one that redoes the run. Raw and ``utf8`` keys and values:
   each task writes its own Parquet with pyarrow (``kctl.spark.direct``: no row passes into the
   JVM). ``json`` values: the ``kctl`` data source feeds a DataFrame that Spark's ``from_json``
   decodes (with a given or an inferred schema) and Spark writes.
3. The offsets file is written into the staging directory and fsynced, and the directory is renamed
   to ``run=N``: one atomic rename makes the output and its offsets visible together. A run that
   dies before it leaves only a staging directory, which the next run deletes before it redoes the
   same ranges; so two runs with new records between them give every record exactly once.

The destination is a filesystem path the driver renames in: local, or a shared mount that all Spark
executors write to when running on a cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kctl.client import Consumer, TopicPartition
from kctl.spark.direct import run_tasks
from kctl.spark.options import OffsetBound, offsets_from_json, offsets_json, parse_options
from kctl.spark.planning import consumer_config, plan_ranges, resolve_bound, subscribed_partitions

__all__ = [
    "FILE_FORMATS",
    "OFFSETS_FILE",
    "VALUE_FORMATS",
    "LoadError",
    "LoadPlan",
    "LoadSummary",
    "PartitionLoad",
    "committed_offsets",
    "plan_load",
    "run_load",
]

OFFSETS_FILE = "_kctl_offsets.json"
LOCK_FILE = "_kctl_load.lock"
VALUE_FORMATS = ("raw", "utf8", "json")
FILE_FORMATS = ("parquet",)
_RUN = re.compile(r"run=(\d{6,})")
_STAGING_PREFIX = "_staging-run-"


class LoadError(RuntimeError):
    """A load cannot be planned or committed (the message says why)."""


@dataclass(frozen=True)
class PartitionLoad:
    """One partition's part of a run: its offsets ``[from_offset, until_offset)`` and, after the
    run, the records written (fewer than the range's size where compaction removed some)."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    records: int | None = None


@dataclass(frozen=True)
class LoadPlan:
    """What a run will do: its number, its ranges, and the offsets every partition will be at."""

    destination: Path
    run: int
    partitions: tuple[PartitionLoad, ...]
    offsets: Mapping[TopicPartition, int]

    @property
    def records(self) -> int:
        """The offsets the run covers (an upper bound on its records)."""
        return sum(p.until_offset - p.from_offset for p in self.partitions)

    @property
    def empty(self) -> bool:
        return self.records == 0


@dataclass(frozen=True)
class LoadSummary:
    """What a run wrote (``run`` is None when there was nothing new to load)."""

    run: int | None
    path: str | None
    records: int
    bytes: int
    seconds: float
    partitions: list[PartitionLoad] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _run_number(path: Path) -> int | None:
    match = _RUN.fullmatch(path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def committed_offsets(destination: Path) -> tuple[int, dict[TopicPartition, int]]:
    """The newest committed run's number (0 without one) and the next offset of every partition
    loaded so far, from its offsets file."""
    runs = sorted(n for p in destination.iterdir() if (n := _run_number(p)) is not None) if (
        destination.is_dir()
    ) else []
    if not runs:
        return 0, {}
    newest = destination / f"run={runs[-1]:06d}" / OFFSETS_FILE
    try:
        document = json.loads(newest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise LoadError(f"cannot read the offsets of the last run, {newest}: {error}") from None
    return runs[-1], offsets_from_json(document["offsets"])


def source_options(bootstrap: str, client_properties: Mapping[str, str], **more: str) -> dict[str, str]:
    """The ``kctl`` data source's options for a bootstrap list and client properties."""
    options = {"kafka.bootstrap.servers": bootstrap}
    options.update({f"kafka.{k}": v for k, v in client_properties.items()})
    options.update(more)
    return options


def plan_load(
    bootstrap: str,
    client_properties: Mapping[str, str],
    topics: Sequence[str],
    destination: Path,
    until: OffsetBound | None = None,
) -> LoadPlan:
    """The next run's ranges: from the committed offsets (the log start for new partitions) to the
    end offsets now, or ``until``. Raises ``BrokerResponseError`` for a topic that does not exist."""
    last_run, committed = committed_offsets(destination)
    options = parse_options(source_options(bootstrap, client_properties, subscribe=",".join(topics)))
    with Consumer(options.bootstrap_servers, consumer_config(options)) as consumer:
        tps = subscribed_partitions(consumer.cluster, options)
        new = [tp for tp in tps if tp not in committed]
        starts = {tp: committed[tp] for tp in tps if tp in committed} | consumer.beginning_offsets(new)
        ends = resolve_bound(consumer, tps, until or OffsetBound("latest"))
    partitions = []
    for tp in tps:
        if ends[tp] < starts[tp]:
            raise LoadError(
                f"{tp}: the end offset {ends[tp]} is before the loaded offset {starts[tp]} "
                "(the log was truncated or --until is too low)"
            )
        partitions.append(PartitionLoad(tp.topic, tp.partition, starts[tp], ends[tp]))
    offsets = dict(committed) | {tp: ends[tp] for tp in tps}
    return LoadPlan(destination, last_run + 1, tuple(partitions), offsets)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _decode(df: Any, value_format: str, json_schema: str | None, key_format: str) -> tuple[Any, Any]:
    """The rows with key and value decoded and a ``date`` column, and the DataFrame persisted for
    schema inference (None when none was), to unpersist after the write."""
    from pyspark.sql import functions as F

    persisted = None
    if key_format == "utf8":
        df = df.withColumn("key", F.col("key").cast("string"))
    if value_format == "utf8":
        df = df.withColumn("value", F.col("value").cast("string"))
    elif value_format == "json":
        text = F.col("value").cast("string")
        schema: Any = json_schema
        if schema is None:  # inferred from every value: read once, kept for the write
            df = persisted = df.persist()
            inferred = df.sparkSession.read.json(df.select(text.alias("value")).rdd.map(lambda row: row[0]))
            schema = inferred.schema if inferred.columns else "value string"
        df = df.withColumn("value", F.from_json(text, schema))
    return df.withColumn("date", F.to_date(F.col("timestamp"))), persisted


class _TaskProgress:
    """Reports the Spark job's finished and total tasks to a callback, from a polling thread."""

    def __init__(self, spark: Any, callback: Callable[[int, int], None] | None) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._callback = callback
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kctl-load-progress", daemon=True)
        self._seen: dict[int, tuple[int, int]] = {}

    def __enter__(self) -> _TaskProgress:
        if self._callback is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        assert self._callback is not None
        while not self._stop.wait(0.25):
            with contextlib.suppress(Exception):  # the JVM may be shutting down under us
                for stage_id in self._tracker.getActiveStageIds():
                    info = self._tracker.getStageInfo(stage_id)
                    if info is not None:
                        self._seen[stage_id] = (info.numCompletedTasks, info.numTasks)
                done = sum(d for d, _ in self._seen.values())
                total = sum(t for _, t in self._seen.values())
                self._callback(done, total)


@contextlib.contextmanager
def _load_lock(destination: Path) -> Iterator[None]:
    """Hold ``PATH/_kctl_load.lock`` (an exclusive ``flock``) for a run: a second load into the same
    destination at the same time fails at once instead of removing the first one's staging
    directory. The kernel drops the lock when the process dies, so a killed run leaves none."""
    destination.mkdir(parents=True, exist_ok=True)
    with (destination / LOCK_FILE).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LoadError(f"another kctl spark load is running into {destination}") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_load(
    spark: Any,
    plan: LoadPlan,
    bootstrap: str,
    client_properties: Mapping[str, str],
    *,
    value_format: str = "raw",
    key_format: str = "raw",
    json_schema: str | None = None,
    min_partitions: int | None = None,
    fail_on_data_loss: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> LoadSummary:
    """Carry out ``plan`` with ``spark`` (see the module docstring); returns what was written.
    Raises LoadError when another load into the same destination is running."""
    with _load_lock(plan.destination):
        return _run_load(
            spark,
            plan,
            bootstrap,
            client_properties,
            value_format=value_format,
            key_format=key_format,
            json_schema=json_schema,
            min_partitions=min_partitions,
            fail_on_data_loss=fail_on_data_loss,
            on_progress=on_progress,
        )


def _write_with_dataframe(
    spark: Any,
    options: dict[str, str],
    staging: Path,
    value_format: str,
    json_schema: str | None,
    key_format: str,
) -> dict[tuple[str, int], int]:
    """Read with the ``kctl`` data source, decode, write Parquet with Spark; the records written per
    partition."""
    df = spark.read.format("kctl").options(**options).load()
    df, persisted = _decode(df, value_format, json_schema, key_format)
    df.write.mode("overwrite").partitionBy("topic", "date").parquet(str(staging))
    if persisted is not None:
        persisted.unpersist()
    written = spark.read.parquet(str(staging)).groupBy("topic", "partition").count().collect()
    return {(str(row["topic"]), int(row["partition"])): int(row["count"]) for row in written}


def _run_load(
    spark: Any,
    plan: LoadPlan,
    bootstrap: str,
    client_properties: Mapping[str, str],
    *,
    value_format: str,
    key_format: str,
    json_schema: str | None,
    min_partitions: int | None,
    fail_on_data_loss: bool,
    on_progress: Callable[[int, int], None] | None,
) -> LoadSummary:
    started = time.monotonic()
    destination = plan.destination
    for stale in destination.glob(_STAGING_PREFIX + "*"):
        shutil.rmtree(stale)  # a run that died: its ranges are redone by this one
    ranges = [p for p in plan.partitions if p.until_offset > p.from_offset]
    if not ranges:
        return LoadSummary(None, None, 0, 0, time.monotonic() - started, list(plan.partitions))
    final = destination / f"run={plan.run:06d}"
    if final.exists():
        raise LoadError(f"{final} exists already: another load ran at the same time")
    staging = destination / f"{_STAGING_PREFIX}{plan.run:06d}-{uuid.uuid4().hex[:12]}"
    assign: dict[str, list[int]] = {p.topic: [] for p in ranges}
    for p in ranges:
        assign[p.topic].append(p.partition)
    options = source_options(
        bootstrap,
        client_properties,
        assign=json.dumps(assign),
        startingOffsets=json.dumps(offsets_json({TopicPartition(p.topic, p.partition): p.from_offset
                                                 for p in ranges})),
        endingOffsets=json.dumps(offsets_json({TopicPartition(p.topic, p.partition): p.until_offset
                                               for p in ranges})),
        failOnDataLoss=str(fail_on_data_loss).lower(),
        includeHeaders="true",
    )
    if min_partitions:
        options["minPartitions"] = str(min_partitions)
    with _TaskProgress(spark, on_progress):
        if value_format == "json":  # Spark's from_json: the DataFrame path
            counts = _write_with_dataframe(spark, options, staging, value_format, json_schema, key_format)
        else:  # raw or text: each task writes its Parquet (kctl.spark.direct)
            offset_ranges = plan_ranges(
                {TopicPartition(p.topic, p.partition): p.from_offset for p in ranges},
                {TopicPartition(p.topic, p.partition): p.until_offset for p in ranges},
                min_partitions,
            )
            counts = {}
            for topic, partition, records in run_tasks(
                spark, options, offset_ranges, staging, key_format, value_format
            ):
                counts[(topic, partition)] = counts.get((topic, partition), 0) + records
    partitions = [
        dataclasses.replace(p, records=counts.get((p.topic, p.partition), 0))
        for p in plan.partitions
    ]
    size = sum(f.stat().st_size for f in staging.rglob("*.parquet"))
    document = {
        "run": plan.run,
        "committed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "ranges": [asdict(p) for p in partitions if p.until_offset > p.from_offset],
        "offsets": offsets_json(plan.offsets),
        "records": sum(counts.values()),
        "bytes": size,
    }
    offsets_path = staging / OFFSETS_FILE
    with offsets_path.open("w", encoding="utf-8") as out:
        json.dump(document, out, indent=2)
        out.flush()
        os.fsync(out.fileno())
    _fsync_dir(staging)
    try:
        os.rename(staging, final)  # the commit: output and offsets become visible together
    except OSError as error:
        raise LoadError(f"cannot commit {staging} as {final}: {error}") from None
    _fsync_dir(destination)
    return LoadSummary(
        plan.run, str(final), sum(counts.values()), size, time.monotonic() - started, partitions
    )
