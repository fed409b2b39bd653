"""`kctl spark load` end to end (the CLI as a subprocess, real Spark in local mode, a real broker): the
plan, two runs with appends between them (the second on a Spark standalone cluster of two workers,
``--master local-cluster[2,1,512]``, with ``-b NAME``), a run killed midway and re-run — every
record exactly once across the runs' output — and value decoding. Runs that need not be the command
run the library under it (``kctl.spark.load``) in the test process's Spark session: each command run
starts a Spark JVM of its own, the costliest step here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_support import fill, require_pyspark, shared_session

from kctl.spark.load import plan_load, run_load
from kctl.testing import create_topic

require_pyspark()

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LOAD_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def bootstrap(module_broker_factory: Any) -> str:
    return module_broker_factory().bootstrap


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Any:
    return shared_session(request)


def kctl_load(
    bootstrap: str, *args: str, env: dict[str, str] | None = None, master: str = "local[2]"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", "spark", "load", "-b", bootstrap, "--master", master, *args],
        capture_output=True,
        text=True,
        timeout=LOAD_TIMEOUT,
        env={**os.environ, **(env or {})},
    )


def loaded(spark: Any, path: Path) -> list[tuple[str, int, int, int]]:
    """(topic, partition, offset, run) of every record under ``path``, sorted."""
    rows = spark.read.parquet(str(path)).select("topic", "partition", "offset", "run").collect()
    return sorted((r.topic, r.partition, r.offset, r.run) for r in rows)


def test_plan_then_two_runs_load_every_record_once(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "clicks", 4)
    create_topic(bootstrap, "views", 1)
    fill(bootstrap, "clicks", 4, 10)
    fill(bootstrap, "views", 1, 5)
    out = tmp_path / "warehouse"

    plan = kctl_load(bootstrap, "clicks", "views", "--to", str(out), "--format", "json")
    assert plan.returncode == 0, plan.stderr
    document = json.loads(plan.stdout)
    assert document["run"] == 1 and document["records"] == 45
    assert "add --execute" in plan.stderr
    assert not out.exists() or not any(out.iterdir())  # a plan writes nothing
    until = '{"clicks": {"0": 4, "1": 10, "2": 0, "3": -1}, "views": {"0": 2}}'  # -1: the end offset
    bounded = kctl_load(bootstrap, "clicks", "views", "--to", str(out), "--until", until, "-f", "json")
    assert bounded.returncode == 0, bounded.stderr
    planned = json.loads(bounded.stdout)["partitions"]
    ranges = [(p["topic"], p["partition"], p["until_offset"]) for p in planned]
    assert ranges == [("clicks", 0, 4), ("clicks", 1, 10), ("clicks", 2, 0), ("clicks", 3, 10),
                      ("views", 0, 2)]

    first = run_load(spark, plan_load(bootstrap, {}, ["clicks", "views"], out), bootstrap, {})  # the library
    assert (first.run, first.records) == (1, 45) and first.bytes > 0
    assert {(p.topic, p.partition, p.from_offset, p.until_offset, p.records) for p in first.partitions} == {
        *{("clicks", p, 0, 10, 10) for p in range(4)},
        ("views", 0, 0, 5, 5),
    }

    fill(bootstrap, "clicks", 4, 3, start=10)  # new records between the runs
    clusters = tmp_path / "clusters.toml"  # the second run (the command) names the cluster: -b NAME
    clusters.write_text(f'[warehouse-source]\nbootstrap.servers = "{bootstrap}"\n"client.id" = "loader"\n')
    second = kctl_load(  # on a Spark cluster: a standalone master and two workers, executors in JVMs
        "warehouse-source", "clicks", "views", "--to", str(out), "--execute", "--format", "json",
        "--conf", "spark.executor.memory=512m",
        env={"KCTL_CLUSTERS": str(clusters)},
        master="local-cluster[2,1,512]",
    )
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert summary["run"] == 2 and summary["records"] == 12 and summary["bytes"] > 0
    assert {(p["topic"], p["partition"], p["from_offset"], p["until_offset"], p["records"])
            for p in summary["partitions"]} == {
        *{("clicks", p, 10, 13, 3) for p in range(4)},
        ("views", 0, 5, 5, 0),
    }
    assert "run 2: 12 records" in second.stderr
    offsets = json.loads((out / "run=000002" / "_kctl_offsets.json").read_text())
    assert offsets["offsets"] == {"clicks": {str(p): 13 for p in range(4)}, "views": {"0": 5}}

    rows = loaded(spark, out)
    keys = [(t, p, o) for t, p, o, _ in rows]
    assert len(keys) == len(set(keys)) == 57  # exactly once
    assert {(t, p, o) for t, p, o, run in rows if run == 2} == {("clicks", p, o) for p in range(4)
                                                                 for o in range(10, 13)}
    dates = {r.date for r in spark.read.parquet(str(out)).select("date").distinct().collect()}
    assert dates  # partitioned by the records' day

    again = kctl_load(bootstrap, "clicks", "views", "--to", str(out), "--execute")
    assert again.returncode == 0, again.stderr
    assert "nothing new to load" in again.stderr
    assert not (out / "run=000003").exists()


def test_a_run_killed_midway_leaves_nothing_and_is_redone(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "payments", 2)
    fill(bootstrap, "payments", 2, 20)
    out = tmp_path / "warehouse"
    run_load(spark, plan_load(bootstrap, {}, ["payments"], out), bootstrap, {})  # run 1, in this process
    fill(bootstrap, "payments", 2, 3000, start=20)

    # run 2 in many small tasks (two at a time), SIGKILLed once its first task's Parquet is on disk
    process = subprocess.Popen(
        [sys.executable, "-m", "kctl", "spark", "load", "-b", bootstrap, "--master", "local[2]",
         "payments", "--to", str(out), "--execute", "--min-partitions", "24"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    def staged() -> list[Path]:  # the killed attempt's directory: _staging-run-000002-<attempt>
        return [p for d in out.glob("_staging-run-000002-*") for p in d.rglob("*.parquet")]

    deadline = time.monotonic() + LOAD_TIMEOUT
    try:
        while not staged():
            assert process.poll() is None, "the load ended before it was killed"
            assert time.monotonic() < deadline, "the load never started writing"
            time.sleep(0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the load, its Spark JVM and its Python workers
        process.wait(timeout=30)
    assert staged()  # part of run 2 was written ...
    assert not (out / "run=000002").exists()  # ... but killed before its commit, none of it is visible
    assert [r[:3] for r in loaded(spark, out)] == [("payments", p, o) for p in range(2) for o in range(20)]

    rerun = run_load(spark, plan_load(bootstrap, {}, ["payments"], out), bootstrap, {})  # the lock died too
    assert rerun.run == 2  # the same range redone
    # the killed attempt's directory is gone; its orphaned Python workers may still write into it
    # (re-creating it), never into the rerun's, which the commit renamed away
    assert not [d for d in out.glob("_staging-run-*") if any(d.rglob("_kctl_offsets.json"))]
    keys = [r[:3] for r in loaded(spark, out)]
    assert keys == [("payments", p, o) for p in range(2) for o in range(3020)]  # exactly once


def test_values_decoded_as_json_and_text(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """The library under the command, in this process's Spark session."""
    from kctl.client import Producer

    create_topic(bootstrap, "people", 1)
    with Producer(bootstrap) as producer:
        for i in range(5):
            producer.send("people", json.dumps({"id": i, "name": f"n{i}"}).encode(), key=f"k{i}".encode())
        producer.flush()

    def load(path: Path, **options: Any) -> Any:
        run_load(spark, plan_load(bootstrap, {}, ["people"], path), bootstrap, {}, **options)
        return spark.read.parquet(str(path))

    inferred = load(tmp_path / "json", value_format="json", key_format="utf8")
    rows = inferred.select("key", "value.id", "value.name").collect()
    assert sorted((r.key, r.id, r.name) for r in rows) == [(f"k{i}", i, f"n{i}") for i in range(5)]
    given = load(tmp_path / "given", value_format="json", json_schema="name string")
    assert given.select("value.*").columns == ["name"]
    text = load(tmp_path / "text", value_format="utf8")
    assert sorted(r.value for r in text.collect())[0] == '{"id": 0, "name": "n0"}'


def test_usage_and_missing_topic_exit_codes(bootstrap: str, tmp_path: Path) -> None:
    bad = kctl_load(bootstrap, "people", "--to", str(tmp_path), "--value-format", "xml")
    assert bad.returncode == 2, bad.stderr
    missing = kctl_load(bootstrap, "no-such-topic", "--to", str(tmp_path))
    assert missing.returncode == 3, missing.stderr
