#!/usr/bin/env python3
"""Spark benchmark (issue 11, section 4): records/s reading a topic into a count and into Parquet,
kctl's ``kctl`` data source beside Spark's built-in Kafka source (``spark-sql-kafka-0-10``, the Java
client) on the same broker, in the same run and the same SparkSession; and `kctl spark load`, whose
tasks write Parquet with pyarrow (kctl.spark.direct).

Prints its figures; asserts nothing. The broker runs in its own process (``python -m kctl broker
start``, a fresh data directory); the topic is filled once with ``--gigabytes`` of records of
``--record-size`` bytes over ``--partitions`` partitions (with confluent-kafka's producer when it is
installed, else kctl's), then each case runs ``--repeat`` times and the best time is kept. Spark runs
on ``--master`` (``local[*]``): on a small machine the broker, Spark's JVM and its Python workers
share the cores, which the figures include.

Usage: python bench/bench_spark.py [--gigabytes 1] [--record-size 1000] [--partitions 8]
                                   [--master local[*]] [--repeat 2] [--only kctl|kafka]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kctl.client import AdminClient, NewTopic
from kctl.localcluster.broker import BrokerProcess
from kctl.spark.load import plan_load, run_load
from kctl.spark.session import spark_session

TOPIC = "bench-spark"


def fill(bootstrap: str, partitions: int, total_bytes: int, record_size: int) -> int:
    count = max(total_bytes // record_size, 1)
    value = b"x" * record_size
    with AdminClient(bootstrap) as admin:
        [created] = admin.create_topics([NewTopic(TOPIC, partitions, 1)])
        assert created.ok, created
    started = time.perf_counter()
    try:
        from confluent_kafka import Producer as RdProducer

        producer = RdProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": 1}
        )
        for i in range(count):
            while True:
                try:
                    producer.produce(TOPIC, value, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush()
    except ImportError:
        from kctl.client import Producer

        with Producer(bootstrap, {"linger.ms": "20", "batch.size": "1000000"}) as kctl_producer:
            for i in range(count):
                kctl_producer.send(TOPIC, value, partition=i % partitions)
            kctl_producer.flush()
    seconds = time.perf_counter() - started
    print(f"filled {TOPIC}: {count:,} records of {record_size} B in {seconds:.1f}s", flush=True)
    return count


def best(label: str, repeat: int, run: Any, records: int) -> None:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        got = run()
        times.append(time.perf_counter() - started)
        if got is not None and got != records:
            print(f"  {label}: counted {got:,}, expected {records:,}", flush=True)
    fastest = min(times)
    print(f"{label:<28} {records / fastest:>12,.0f} records/s  ({fastest:.1f}s best of {repeat})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--record-size", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=["kctl", "kafka"], default=None)
    args = parser.parse_args()

    import pyspark

    formats = ["kctl", "kafka"] if args.only is None else [args.only]
    conf = {"spark.sql.shuffle.partitions": str(args.partitions)}
    version = pyspark.__version__
    minor_first = ".".join(version.split(".")[:2]) + ".0"  # a patch release may not be published yet
    coordinate = "org.apache.spark:spark-sql-kafka-0-10_2.13:"
    packages = [coordinate + v for v in dict.fromkeys([version, minor_first])]
    base = Path(tempfile.mkdtemp(prefix="kctl-bench-spark-"))
    try:
        with BrokerProcess(base / "broker", {"num.partitions": str(args.partitions)}) as broker:
            records = fill(broker.bootstrap, args.partitions, int(args.gigabytes * 1e9), args.record_size)
            spark = None
            for package in packages if "kafka" in formats else []:
                try:
                    spark = spark_session(args.master, "kctl bench", conf | {"spark.jars.packages": package})
                    break
                except Exception as error:  # the JVM does not start when Ivy cannot resolve it
                    print(f"cannot use {package}: {str(error).splitlines()[0]}", flush=True)
            if spark is None:
                formats = ["kctl"]
                spark = spark_session(args.master, "kctl bench", conf)
            print(
                f"spark {pyspark.__version__} on {args.master}; {records:,} records, "
                f"{args.partitions} partitions",
                flush=True,
            )
            for fmt in formats:
                def frame(fmt: str = fmt) -> Any:
                    return (
                        spark.read.format(fmt)
                        .option("kafka.bootstrap.servers", broker.bootstrap)
                        .option("subscribe", TOPIC)
                        .load()
                    )

                best(f"{fmt}: count", args.repeat, lambda frame=frame: frame().count(), records)
                out = base / f"parquet-{fmt}"

                def to_parquet(frame: Any = frame, out: Path = out) -> None:
                    frame().write.mode("overwrite").parquet(str(out))

                best(f"{fmt}: into Parquet", args.repeat, to_parquet, records)
                if fmt == "kctl":  # the warehouse load: each task writes its Parquet with pyarrow

                    def load(out: Path = out) -> int:
                        shutil.rmtree(out, ignore_errors=True)
                        plan = plan_load(broker.bootstrap, {}, [TOPIC], out)
                        return run_load(spark, plan, broker.bootstrap, {}).records

                    best("kctl: spark load (Parquet)", args.repeat, load, records)
            spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
