"""The ``kctl`` Spark data source against a real broker and real Spark (local[2]): batch reads
(exact rows, offsets, timestamps and headers; minPartitions; offset and timestamp bounds; data
loss), writes read back, and streaming with a checkpoint and ``availableNow``."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest
from spark_support import BASE_TIMESTAMP, fill, require_pyspark, shared_session

from kctl.client import AdminClient, Consumer, Producer, TopicPartition
from kctl.testing import create_topic

require_pyspark()

pytestmark = [pytest.mark.spark, pytest.mark.slow]


SASL_USER, SASL_PASSWORD = "spark", "spark-secret"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture(scope="module")
def module_broker(module_broker_factory: Any) -> Any:
    """The module's broker: a PLAINTEXT listener (``bootstrap``) and a SASL_PLAINTEXT one (PLAIN)."""
    return module_broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "log.cleaner.backoff.ms": "200",  # compaction passes close together (the compacted-gaps test)
            "sasl.jaas.config": f'{PLAIN_LOGIN} username="{SASL_USER}" password="{SASL_PASSWORD}" '
            f'user_{SASL_USER}="{SASL_PASSWORD}";',
        }
    )


@pytest.fixture(scope="module")
def bootstrap(module_broker: Any) -> str:
    return str(module_broker.bootstrap)


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    return shared_session(request)


@pytest.fixture(scope="module")
def orders(bootstrap: str) -> tuple[str, list[Any]]:
    create_topic(bootstrap, "orders", 4)
    return "orders", fill(bootstrap, "orders", 4, 25)


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kctl").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_gives_every_record_with_spark_kafka_rows(spark: Any, bootstrap: str, orders: Any) -> None:
    topic, sent = orders
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]
    assert df.rdd.getNumPartitions() == 4  # one task per partition
    rows = df.collect()
    assert len(rows) == 100
    got = {(r.partition, r.offset): r for r in rows}
    for s in sent:
        row = got[(s.partition, s.offset)]
        assert (row.topic, bytes(row.key), bytes(row.value)) == (topic, s.key, s.value)
        expected_ts = datetime.datetime.fromtimestamp(s.timestamp / 1000, datetime.UTC)
        assert row.timestamp.replace(tzinfo=datetime.UTC) == expected_ts
        assert row.timestampType == 0  # CreateTime
        assert [(h.key, bytes(h.value)) for h in row.headers] == list(s.headers)
    assert sorted(o for p, o in got if p == 2) == list(range(25))


def test_headers_column_only_with_include_headers(spark: Any, bootstrap: str, orders: Any) -> None:
    df = _read(spark, bootstrap, subscribe=orders[0])
    assert "headers" not in df.columns
    assert df.count() == 100


def test_min_partitions_splits_ranges_into_more_tasks(spark: Any, bootstrap: str, orders: Any) -> None:
    df = _read(spark, bootstrap, subscribe=orders[0], minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    offsets = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offsets == [(p, o) for p in range(4) for o in range(25)]


def test_offset_and_timestamp_bounds(spark: Any, bootstrap: str, orders: Any) -> None:
    topic = orders[0]
    df = _read(
        spark,
        bootstrap,
        assign='{"orders": [1, 3]}',
        startingOffsets='{"orders": {"1": 5, "3": -2}}',
        endingOffsets='{"orders": {"1": 10, "3": -1}}',
    )
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(1, o) for o in range(5, 10)] + [(3, o) for o in range(25)]
    stamp = BASE_TIMESTAMP + 20 * 1000  # partition 0's record 20 and later; every later partition
    df = _read(spark, bootstrap, subscribe=topic, startingTimestamp=str(stamp))
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(20, 25)] + [(p, o) for p in (1, 2, 3) for o in range(25)]
    df = _read(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"orders": {{"0": {stamp}, "1": 0, "2": 0, "3": {stamp * 2}}}}}',
    )
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(20, 25)] + [(p, o) for p in (1, 2) for o in range(25)]


def test_subscribe_pattern(spark: Any, bootstrap: str, orders: Any) -> None:
    create_topic(bootstrap, "orders-eu", 1)
    fill(bootstrap, "orders-eu", 1, 3)
    df = _read(spark, bootstrap, subscribePattern="orders.*")
    assert sorted({r.topic for r in df.select("topic").collect()}) == ["orders", "orders-eu"]
    assert df.count() == 103


def test_data_loss_fails_or_warns(spark: Any, bootstrap: str) -> None:
    create_topic(bootstrap, "trimmed", 1)
    fill(bootstrap, "trimmed", 1, 20)
    with AdminClient(bootstrap) as admin:
        admin.delete_records({TopicPartition("trimmed", 0): 8})
    options = {"subscribe": "trimmed", "startingOffsets": '{"trimmed": {"0": 2}}'}
    with pytest.raises(Exception, match="failOnDataLoss"):
        _read(spark, bootstrap, **options).collect()
    rows = _read(spark, bootstrap, failOnDataLoss="false", **options).collect()
    assert sorted(r.offset for r in rows) == list(range(8, 20))


def _consume_all(bootstrap: str, tp: TopicPartition) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record in ``tp``, read with a plain kctl consumer."""
    got: list[tuple[int, bytes, bytes]] = []
    with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{tp}: stuck at {consumer.position(tp)} of {end}"
            got += [(r.offset, r.key, r.value) for r in consumer.poll(0.5)]
    return got


def test_compacted_gaps_are_skipped_exactly(spark: Any, bootstrap: str) -> None:
    """After compaction the ranges have offsets without records: every range still ends (at its
    end offset, even one whose last record was removed) and gives exactly the records left."""
    configs = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
    create_topic(bootstrap, "compacted", 1, configs=configs)
    tp = TopicPartition("compacted", 0)
    with Producer(bootstrap, {"linger.ms": "0"}) as producer:
        for i in range(200):  # ten keys, twenty versions each
            producer.send("compacted", f"version {i}".encode(), key=f"key-{i % 10}".encode()).result()
    deadline = time.monotonic() + 60
    while len(_consume_all(bootstrap, tp)) >= 150:  # the cleaner runs every 200 ms
        assert time.monotonic() < deadline, "no compaction after 60s"
        time.sleep(0.2)
    # stop compacting (a pass under way may still finish), so Spark reads what the check reads
    with AdminClient(bootstrap) as admin:
        assert admin.alter_configs("compacted", {"cleanup.policy": "delete"}).ok
    left = _consume_all(bootstrap, tp)
    while True:
        time.sleep(0.5)  # longer than a cleaner pass over this small log
        if (again := _consume_all(bootstrap, tp)) == left:
            break
        assert time.monotonic() < deadline, "the log kept changing after compaction was turned off"
        left = again
    rows = _read(spark, bootstrap, subscribe="compacted", minPartitions="4").collect()
    assert sorted((r.offset, bytes(r.key), bytes(r.value)) for r in rows) == left
    offsets = {offset for offset, _, _ in left}
    gap = next(o for o in range(1, 200) if o not in offsets and o - 1 not in offsets)  # removed
    ending = _read(spark, bootstrap, subscribe="compacted", endingOffsets=f'{{"compacted": {{"0": {gap}}}}}')
    assert sorted(r.offset for r in ending.collect()) == sorted(o for o in offsets if o < gap)


def test_write_then_read_back(spark: Any, bootstrap: str) -> None:
    create_topic(bootstrap, "written", 2)
    from pyspark.sql import functions as F

    df = spark.range(0, 50).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        (F.col("id") % 2).cast("int").alias("partition"),
        F.array(F.struct(F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
        .alias("headers"),
    )
    writer = df.write.format("kctl").mode("append")  # Python data sources take append or overwrite
    writer.option("kafka.bootstrap.servers", bootstrap).option("topic", "written").save()
    rows = _read(spark, bootstrap, subscribe="written", includeHeaders="true").collect()
    assert len(rows) == 50
    for r in rows:
        n = int(bytes(r.key).decode()[1:])
        assert bytes(r.value) == f"v{n}".encode()
        assert r.partition == n % 2
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("id", str(n).encode())]


def test_security_properties_and_named_clusters_reach_the_client(
    spark: Any, module_broker: Any, orders: Any, tmp_path: Path
) -> None:
    """``kafka.``-prefixed security properties (Java's names, as Spark jobs give them) reach kctl's
    client in the driver and in the tasks, and ``kafka.bootstrap.servers`` takes a cluster name."""
    sasl_address = module_broker.addresses[1]
    java_style = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": f'{PLAIN_LOGIN} username="{SASL_USER}" password="{SASL_PASSWORD}";',
    }
    rows = _read(spark, sasl_address, subscribe="orders", **java_style).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(4) for o in range(25)]
    wrong = java_style | {"kafka.sasl.jaas.config": f'{PLAIN_LOGIN} username="{SASL_USER}" password="no";'}
    with pytest.raises(Exception, match=r"(?i)authentication|SASL"):
        _read(spark, sasl_address, subscribe="orders", **wrong).collect()

    create_topic(bootstrap=str(module_broker.bootstrap), name="secured", partitions=2)
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        f'[secure]\nbootstrap.servers = "{sasl_address}"\n"security.protocol" = "SASL_PLAINTEXT"\n'
        f'"sasl.mechanism" = "PLAIN"\n"sasl.username" = "{SASL_USER}"\n"sasl.password" = "{SASL_PASSWORD}"\n'
    )
    named = {"clustersFile": str(clusters)}
    df = spark.createDataFrame([(f"s{i}", i % 2) for i in range(20)], "value string, partition int")
    writer = df.write.format("kctl").mode("append").options(**named)
    writer.option("kafka.bootstrap.servers", "secure").option("topic", "secured").save()
    back = _read(spark, "secure", subscribe="secured", **named).collect()
    assert sorted((bytes(r.value).decode(), r.partition) for r in back) == sorted(
        (f"s{i}", i % 2) for i in range(20)
    )


def test_write_fails_the_task_when_delivery_fails(spark: Any, bootstrap: str) -> None:
    create_topic(bootstrap, "tiny", 1, configs={"max.message.bytes": "1000"})
    df = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(Exception, match=r"not delivered|MESSAGE_TOO_LARGE|RECORD_TOO_LARGE"):
        (
            df.write.format("kctl")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "tiny")
            .option("kafka.delivery.timeout.ms", "5000")
            .save()
        )


def _stream_once(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> Any:
    query = (
        spark.readStream.format("kctl")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30")
        .load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def test_streaming_available_now_reads_every_record_once_across_restarts(
    spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    create_topic(bootstrap, "events", 3)
    fill(bootstrap, "events", 3, 20)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _stream_once(spark, bootstrap, "events", out, checkpoint)
    batches = [p for p in first.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 2  # maxOffsetsPerTrigger=30 over 60 records
    assert all(p["numInputRows"] <= 30 for p in batches)
    assert spark.read.parquet(str(out)).count() == 60
    fill(bootstrap, "events", 3, 10, start=20)  # appends between the runs
    _stream_once(spark, bootstrap, "events", out, checkpoint)  # restarts from the checkpoint
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(3) for o in range(30)]


def test_streaming_write(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "source", 2)
    create_topic(bootstrap, "sink", 2)
    fill(bootstrap, "source", 2, 15)
    query = (
        spark.readStream.format("kctl")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "source")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value", "partition")
        .writeStream.format("kctl")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "sink")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = _read(spark, bootstrap, subscribe="sink").collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(
        f"VALUE {p}-{i}" for p in range(2) for i in range(15)
    )
