"""Spark reads at ``isolation.level`` read_committed (issue 27 §3), real Spark (local[2]) and a real
broker: a topic written by a confluent-kafka transactional producer — committed and aborted
transactions over two partitions, then a transaction left open by a second producer. The ``kctl``
data source with Spark's option ``kafka.isolation.level=read_committed`` and ``kctl spark load -X
isolation.level=read_committed`` read exactly the committed records, up to the last stable offset
(never the open transaction's), with no row for a marker; read_uncommitted (the default) reads the
aborted and open records too, still without markers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from spark_support import require_pyspark, shared_session

from kctl.client import Consumer, TopicPartition
from kctl.spark.load import plan_load, run_load
from kctl.testing import create_topic

require_pyspark()

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC, PARTITIONS, PER_PARTITION = "txn-mixed", 2, 5
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def bootstrap(module_broker_factory: Any) -> str:
    return str(module_broker_factory().bootstrap)


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    return shared_session(request)


def _transaction(producer: ck.Producer, prefix: str) -> list[str]:
    producer.begin_transaction()
    values = [f"{prefix}-{p}-{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    for value in values:
        producer.produce(TOPIC, value.encode(), partition=int(value.split("-")[1]))
    assert producer.flush(TIMEOUT_S) == 0
    return values


@pytest.fixture(scope="module")
def written(bootstrap: str) -> Iterator[dict[str, list[str]]]:
    """The values of the committed, aborted and still open transactions of TOPIC."""
    create_topic(bootstrap, TOPIC, PARTITIONS)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "spark-txn"})
    producer.init_transactions(TIMEOUT_S)
    out: dict[str, list[str]] = {"committed": [], "aborted": [], "open": []}
    for n, commit in enumerate([True, False, True, False, True, False]):  # ends with an aborted one
        values = _transaction(producer, f"{'c' if commit else 'a'}{n}")
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
        out["committed" if commit else "aborted"] += values
    still_open = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "spark-open", "transaction.timeout.ms": 900000}
    )
    still_open.init_transactions(TIMEOUT_S)
    out["open"] = _transaction(still_open, "o9")  # never ended while the module runs
    yield out
    still_open.abort_transaction(TIMEOUT_S)


def _read(spark: Any, bootstrap: str, **options: str) -> list[Any]:
    reader = spark.read.format("kctl").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return list(reader.load().collect())


def _end_offsets(bootstrap: str, isolation: str) -> dict[int, int]:
    with Consumer(bootstrap, {"isolation.level": isolation}) as consumer:
        ends = consumer.end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    return {tp.partition: offset for tp, offset in ends.items()}


def test_the_data_source_reads_only_committed_records(
    spark: Any, bootstrap: str, written: dict[str, list[str]]
) -> None:
    committed = _read(spark, bootstrap, **{"kafka.isolation.level": "read_committed"})
    assert sorted(bytes(r.value).decode() for r in committed) == sorted(written["committed"])
    stable = _end_offsets(bootstrap, "read_committed")
    assert all(r.offset < stable[r.partition] for r in committed)  # never past the LSO

    everything = _read(spark, bootstrap)  # read_uncommitted: aborted and open records, no markers
    expected = written["committed"] + written["aborted"] + written["open"]
    assert sorted(bytes(r.value).decode() for r in everything) == sorted(expected)
    assert _end_offsets(bootstrap, "read_uncommitted") != stable  # the open transaction is past the LSO


def test_spark_load_reads_committed_with_the_isolation_level(
    spark: Any, bootstrap: str, written: dict[str, list[str]], tmp_path: Path
) -> None:
    stable = _end_offsets(bootstrap, "read_committed")
    out = tmp_path / "committed"
    plan = subprocess.run(
        [sys.executable, "-m", "kctl", "spark", "load", "-b", bootstrap, TOPIC, "--to", str(out),
         "-X", "isolation.level=read_committed", "--format", "json"],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    planned = {p["partition"]: p["until_offset"] for p in json.loads(plan.stdout)["partitions"]}
    assert planned == stable  # up to the last stable offset

    properties = {"isolation.level": "read_committed"}
    result = run_load(spark, plan_load(bootstrap, properties, [TOPIC], out), bootstrap, properties)
    assert result.records == len(written["committed"])
    rows = spark.read.parquet(str(out)).select("value").collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(written["committed"])

    everything = tmp_path / "uncommitted"
    result = run_load(spark, plan_load(bootstrap, {}, [TOPIC], everything), bootstrap, {})
    assert result.records == len(written["committed"] + written["aborted"] + written["open"])
