"""Interoperability: Spark's own Kafka connector (``spark-sql-kafka-0-10`` for the installed Spark,
resolved from Maven Central through ``spark.jars.packages``; the Java Kafka client inside it) reads
and writes a kctl broker unchanged, and agrees with the ``kctl`` data source row for row.

The connector and its dependencies (kafka-clients, ...; about 15 MB) are downloaded by Spark's
spark-submit (Ivy) into Ivy's cache, ~/.ivy2.5.2, when the test process's Spark JVM starts
(tests/spark_support.py); later runs use the cache. Where Maven Central cannot be reached, the tests
are skipped with Ivy's error as the reason (``-ra`` prints it), never passed. Set
KCTL_SPARK_KAFKA_PACKAGE to use another coordinate (e.g. a mirror's), or KCTL_SKIP_SPARK_INTEROP=1
to leave the module out."""

from __future__ import annotations

import os
from typing import Any

import pytest
from spark_support import fill, require_pyspark, shared_session

from kctl.testing import create_topic

require_pyspark()

pytestmark = [pytest.mark.spark, pytest.mark.slow]

if os.environ.get("KCTL_SKIP_SPARK_INTEROP"):
    pytest.skip("KCTL_SKIP_SPARK_INTEROP is set", allow_module_level=True)


@pytest.fixture(scope="module")
def bootstrap(module_broker_factory: Any) -> str:
    return module_broker_factory().bootstrap


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    """The shared session, with the connector (or a skip that gives Ivy's reason)."""
    return shared_session(request, kafka_connector=True)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp, r.timestampType,
         [(h.key, bytes(h.value)) for h in r.headers])
        for r in df.collect()
    )


def test_spark_kafka_source_reads_kctl_like_the_kctl_source(spark: Any, bootstrap: str) -> None:
    create_topic(bootstrap, "shared", 3)
    fill(bootstrap, "shared", 3, 40)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "shared", "includeHeaders": "true"}
    theirs = spark.read.format("kafka").options(**options).load()
    ours = spark.read.format("kctl").options(**options).load()
    assert theirs.schema == ours.schema  # the same rows: a job ports by changing the format name
    rows = _rows(theirs)
    assert len(rows) == 120
    assert rows == _rows(ours)


def test_spark_kafka_sink_writes_to_kctl(spark: Any, bootstrap: str) -> None:
    create_topic(bootstrap, "from-java", 2)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(30)], "key string, value string, partition int"
    )
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "from-java")
        .save()
    )
    back = spark.read.format("kctl").option("kafka.bootstrap.servers", bootstrap)
    rows = back.option("subscribe", "from-java").load().collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition) for r in rows) == sorted(
        (f"k{i}", f"v{i}", i % 2) for i in range(30)
    )
