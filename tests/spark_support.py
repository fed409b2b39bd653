"""Helpers the Spark test modules share: PySpark or a skip (never a skip under CI, where the test
command installs the ``spark`` extra), one Spark JVM and SparkSession for the whole test process
(``shared_session``: Spark's Kafka connector in it when a module asks, resolved from Maven Central),
and topics filled with records whose every field is known."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kctl.client import Producer


def require_pyspark() -> None:
    """Skip the module without PySpark, except under CI (there a missing extra must fail)."""
    if os.environ.get("CI"):
        import pyspark  # noqa: F401
    else:
        pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[test,spark]'")


KAFKA_PACKAGE_ENV = "KCTL_SPARK_KAFKA_PACKAGE"
SETTINGS = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


@dataclass
class _Shared:
    """The test process's Spark: one JVM and one SparkSession for every Spark test module."""

    session: Any = None
    connector: str | None = None  # the Kafka connector package the JVM was started with
    connector_error: str | None = None  # why it could not be resolved (then not tried again)


_shared = _Shared()


def kafka_packages() -> list[str]:
    """Spark's Kafka connector for the installed Spark, then its minor release's first (a patch
    release of the connector may not be on Maven Central yet; within a minor they are compatible).
    KCTL_SPARK_KAFKA_PACKAGE names another coordinate (e.g. a mirror's)."""
    import pyspark

    given = os.environ.get(KAFKA_PACKAGE_ENV)
    if given:
        return [given]
    version = pyspark.__version__
    first = ".".join(version.split(".")[:2]) + ".0"
    return [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{v}" for v in dict.fromkeys([version, first])]


def _stop_jvm() -> None:
    """Stop the session and the JVM behind it (the next session starts a new JVM)."""
    from pyspark import SparkContext

    if _shared.session is not None:
        _shared.session.stop()
        _shared.session = None
    gateway = SparkContext._gateway
    if gateway is not None:
        process = getattr(gateway, "proc", None)
        gateway.shutdown()
        if process is not None:
            process.stdin.close()  # the JVM exits when its stdin closes
            process.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def _resolution_error(log: Path) -> str:
    """The lines of a failed JVM start that say why (Ivy's unresolved dependencies, network errors)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    wanted = ("unresolved dependency", "server access error", "unknownhost", "connect", "not found",
              "exception")
    lines = [line.strip() for line in text.splitlines() if any(w in line.lower() for w in wanted)]
    return " | ".join(dict.fromkeys(lines[-4:])) or (text.strip().splitlines() or ["no output"])[-1]


def _start_jvm(log: Path, conf: dict[str, str]) -> None:
    """Launch Spark's JVM (spark-submit, which resolves ``spark.jars.packages`` from Maven Central
    into Ivy's cache, ~/.ivy2.5.2) with its output in ``log``; raises RuntimeError with the
    resolution error when it does not start."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with log.open("ab") as out:
        try:
            gateway = launch_gateway(SparkConf().setAll(list(conf.items())),
                                     popen_kwargs={"stdout": out, "stderr": out})
        except Exception as error:
            raise RuntimeError(f"{type(error).__name__}: {_resolution_error(log)}") from None
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def shared_session(request: pytest.FixtureRequest, *, kafka_connector: bool = False) -> Any:
    """The test process's SparkSession (local[2], small shuffles, no UI, ``kctl`` registered),
    started once and stopped when pytest ends, shared by every Spark test module: one JVM start.

    ``kafka_connector``: the JVM must have Spark's Kafka connector (``format("kafka")``), resolved
    through ``spark.jars.packages`` when the JVM starts; a JVM started without it is restarted
    with it. When it cannot be resolved, the test is skipped with Ivy's reason (loudly: ``-ra``
    lists it), and the session goes on without it."""
    from pyspark import SparkContext

    from kctl.spark.session import spark_session

    log = request.getfixturevalue("tmp_path_factory").getbasetemp() / "spark-jvm.log"
    if kafka_connector and _shared.connector is None and _shared.connector_error is None:
        if SparkContext._gateway is not None:
            _stop_jvm()
        failures = []
        for package in kafka_packages():
            try:
                _start_jvm(log, {"spark.jars.packages": package})
            except RuntimeError as error:
                failures.append(f"{package}: {error}")
                continue
            _shared.connector = package
            break
        else:
            _shared.connector_error = "; ".join(failures)
    if _shared.session is None:
        if not _shared.connector and SparkContext._gateway is None:
            _start_jvm(log, {})
        conf = dict(SETTINGS)
        if _shared.connector:
            conf["spark.jars.packages"] = _shared.connector
        _shared.session = spark_session("local[2]", "kctl-tests", conf)
        request.config.add_cleanup(_stop_jvm)
    if kafka_connector and not _shared.connector:
        pytest.skip(
            "Spark's Kafka connector could not be resolved from Maven Central through "
            f"spark.jars.packages (set {KAFKA_PACKAGE_ENV} to another coordinate, or run where "
            f"Maven Central is reachable): {_shared.connector_error}"
        )
    return _shared.session


@dataclass(frozen=True)
class Sent:
    """A record the test produced, with where it landed."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]


BASE_TIMESTAMP = 1_700_000_000_000


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, *, start: int = 0) -> list[Sent]:
    """``per_partition`` records into each partition, numbered from ``start`` (keys, values,
    timestamps and headers derived from the partition and number)."""
    sent: list[Sent] = []
    with Producer(bootstrap, {"linger.ms": "5"}) as producer:
        futures = []
        for p in range(partitions):
            for i in range(start, start + per_partition):
                key = f"k{p}-{i}".encode()
                value = f"value {p}-{i}".encode()
                ts = BASE_TIMESTAMP + p * 1_000_000 + i * 1000
                headers = (("n", str(i).encode()), ("p", str(p).encode()))
                future = producer.send(
                    topic, value, key=key, partition=p, timestamp=ts, headers=list(headers)
                )
                futures.append((future, key, value, ts, headers))
        producer.flush()
        for future, key, value, ts, headers in futures:
            md = future.result()
            sent.append(Sent(md.topic, md.partition, md.offset, key, value, ts, headers))
    return sent
