#!/usr/bin/env python3
"""Consumer benchmark (issue 4, section 6): kctl's Python consumer beside confluent-kafka (librdkafka),
aiokafka and kafka-python, reading the same preloaded records from the same kctl broker in one run.

Prints its figures; asserts nothing. One broker (``python -m kctl broker start``, a fresh log
directory) holds one topic preloaded once with ``--records`` records of ``--size`` bytes (no key, in
batches of ``--batch-records``, optionally compressed) through raw Produce requests. Each client then
runs in its own subprocess (no threads or caches left over from another client), assigns the
partitions without a group, reads from the beginning until it has every record — touching each
record's value, as an application would — and reports the records/s from the moment its first
records had been handled until the last one (connecting, metadata, offset lookups and start-up delays
such as librdkafka's are not counted; neither are the records of that first batch) and its CPU time
(user + system, all threads) over that window. The best of ``--repeat`` runs is reported (the runs
of the clients interleave). The broker runs on the same machine and competes for its cores; on a
busy machine the wall-clock figures swing, and "rec/CPU-s" (records per second of the client's own
CPU time) is the steadier comparison.

Each client reads in its natural batch call: kctl ``Consumer.poll``, confluent-kafka
``Consumer.consume(num_messages=...)``, aiokafka ``getmany``, kafka-python ``poll``, with their default
fetch sizes. ``--profile`` also runs the kctl client under cProfile and prints its hottest functions
(that run is slower and is not the one in the table).

Usage: python bench/bench_consumer.py [--records 200000] [--size 100] [--size-spread 0] [--batch-records 1000]
       [--partitions 1] [--compression none] [--clients kctl,confluent,aiokafka,kafka-python]
       [--repeat 3] [--profile]

aiokafka is not a kctl dependency: ``pip install aiokafka`` (its row is skipped without it)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kctl.testing import BrokerProcess  # noqa: E402 - this checkout's kctl (ROOT is on sys.path)

CLIENTS = ("kctl", "confluent", "aiokafka", "kafka-python")
TOPIC = "bench-consume"
POLL_RECORDS = 10_000  # records per batch call, for the clients that take a number
TARGET = 1.5  # issue 18: kctl's consumer against aiokafka, records/s and per CPU-second


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------------------ clients
# Each returns (records read, bytes of values read, Clock).


class Clock:
    """Starts when the first records have been handled, so that what precedes them (connecting,
    metadata, offset lookups, a client's start-up delays) is not counted; ``timed`` records follow."""

    def __init__(self) -> None:
        self.started = 0.0
        self.cpu = 0.0
        self.before = -1  # records handled before the clock started

    def tick(self, count: int) -> None:
        """After each batch of records: ``count`` handled so far."""
        if self.before < 0 and count:
            self.started, self.cpu, self.before = time.perf_counter(), cpu_seconds(), count

    def stop(self, count: int) -> dict[str, float]:
        return {
            "timed": count - self.before,
            "seconds": time.perf_counter() - self.started,
            "cpu": cpu_seconds() - self.cpu,
        }


def run_kctl(args: argparse.Namespace) -> tuple[int, int, dict[str, float]]:
    from kctl.client import TopicPartition
    from kctl.client.consumer import Consumer

    consumer = Consumer(args.bootstrap, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(args.topic, p) for p in range(args.partitions)])
    count = size = 0
    clock = Clock()
    while count < args.records:
        for record in consumer.poll(5.0, max_records=POLL_RECORDS):
            size += len(record.value)
            count += 1
        clock.tick(count)
    timing = clock.stop(count)
    consumer.close()
    return count, size, timing


def run_confluent(args: argparse.Namespace) -> tuple[int, int, dict[str, float]]:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "bench-unused",  # required by the client; assign() does not join a group
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in range(args.partitions)])
    count = size = 0
    clock = Clock()
    while count < args.records:
        for message in consumer.consume(num_messages=POLL_RECORDS, timeout=5.0):
            if message.error():
                raise RuntimeError(str(message.error()))
            size += len(message.value())
            count += 1
        clock.tick(count)
    timing = clock.stop(count)
    consumer.close()
    return count, size, timing


def run_aiokafka(args: argparse.Namespace) -> tuple[int, int, dict[str, float]]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> tuple[int, int, dict[str, float]]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            partitions = [TopicPartition(args.topic, p) for p in range(args.partitions)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            count = size = 0
            clock = Clock()
            while count < args.records:
                batches = await consumer.getmany(timeout_ms=5000, max_records=POLL_RECORDS)
                for messages in batches.values():
                    for message in messages:
                        size += len(message.value)
                        count += 1
                clock.tick(count)
            return count, size, clock.stop(count)
        finally:
            await consumer.stop()

    return asyncio.run(main())


def run_kafka_python(args: argparse.Namespace) -> tuple[int, int, dict[str, float]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    partitions = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    count = size = 0
    clock = Clock()
    while count < args.records:
        for messages in consumer.poll(timeout_ms=5000, max_records=POLL_RECORDS).values():
            for message in messages:
                size += len(message.value)
                count += 1
        clock.tick(count)
    timing = clock.stop(count)
    consumer.close()
    return count, size, timing


RUNNERS = {
    "kctl": run_kctl,
    "confluent": run_confluent,
    "aiokafka": run_aiokafka,
    "kafka-python": run_kafka_python,
}
MODULES = {"kctl": "kctl", "confluent": "confluent_kafka", "aiokafka": "aiokafka", "kafka-python": "kafka"}


def worker_main(args: argparse.Namespace) -> None:
    runner = RUNNERS[args.worker]
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        count, size, timing = runner(args)
        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(18)
    else:
        count, size, timing = runner(args)
    print(json.dumps({"records": count, "bytes": size, **timing}))


def preload(args: argparse.Namespace, bootstrap: str) -> tuple[int, int]:
    """Write the records with raw Produce requests (acks=1, a few in flight); returns the bytes of
    record batches and of values written."""
    from kctl.client import AdminClient, NewTopic, TopicPartition
    from kctl.client.cluster import ClusterClient
    from kctl.protocol import ApiKey
    from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from kctl.records.builder import RecordBatchBuilder

    with AdminClient(bootstrap) as admin:
        [created] = admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
        if not created.ok:
            raise RuntimeError(f"cannot create {TOPIC}: {created.error}")
        admin.cluster.wait_for_topics([TOPIC], timeout=30)
    pattern = b"0123456789abcdef" * ((args.size + args.size_spread) // 16 + 1)
    spread = range(args.size - args.size_spread, args.size + args.size_spread + 1)
    sizes = random.Random(1).choices(spread, k=97)  # the same sizes for every run
    values = [pattern[:size] for size in sizes]
    now = int(time.time() * 1000)
    total = value_bytes = 0
    with ClusterClient(bootstrap) as cluster:
        conn = cluster.connection(cluster.leader_for(TopicPartition(TOPIC, 0)))
        in_flight = []
        written = 0
        batch_number = 0
        while written < args.records:
            builder = RecordBatchBuilder(compression=args.compression)
            for i in range(written, written + min(args.batch_records, args.records - written)):
                value = values[i % len(values)]
                builder.append(now, None, value)
                value_bytes += len(value)
            written += len(builder)
            data = builder.build()
            total += len(data)
            partition = batch_number % args.partitions
            batch_number += 1
            body = ProduceRequest(
                acks=1,
                timeout_ms=30_000,
                topic_data=[
                    TopicProduceData(
                        name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=data)]
                    )
                ],
            )
            in_flight.append(conn.send(ApiKey.PRODUCE, body))
            if len(in_flight) >= 8:
                _check_produce(conn.receive(in_flight.pop(0)))
        for request in in_flight:
            _check_produce(conn.receive(request))
    return total, value_bytes


def _check_produce(response: Any) -> None:
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code:
                raise RuntimeError(f"preload failed: error {part.error_code} {part.error_message}")


def run_client(
    args: argparse.Namespace, name: str, bootstrap: str, broker: BrokerProcess
) -> dict[str, float] | str:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", name, "--bootstrap", bootstrap,
        "--topic", TOPIC, "--records", str(args.records), "--partitions", str(args.partitions),
    ] + (["--profile"] if args.profile_run else [])  # fmt: skip
    broker_cpu = broker.cpu_seconds()
    result = subprocess.run(command, capture_output=True, timeout=900, check=False, cwd=ROOT)
    if result.returncode != 0:
        lines = result.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {result.returncode}"
    if args.profile_run:
        print(result.stderr.decode(errors="replace"))
    outcome = json.loads(result.stdout.decode().strip().splitlines()[-1])
    outcome["broker_cpu"] = broker.cpu_seconds() - broker_cpu
    if outcome["records"] != args.records or outcome["bytes"] != args.value_bytes:
        return f"read {outcome['records']} records ({outcome['bytes']} bytes), expected {args.records}"
    return outcome


def _rate(outcome: dict[str, float]) -> float:
    return outcome["timed"] / outcome["seconds"]


def available(name: str) -> bool:
    try:
        __import__(MODULES[name])
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument(
        "--size-spread", type=int, default=0, help="values of size +- this (uniform), so record sizes vary"
    )
    parser.add_argument("--batch-records", type=int, default=1000, help="records per preloaded batch")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    parser.add_argument("--repeat", type=int, default=3, help="runs per client; the best is reported")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated: {', '.join(CLIENTS)}")
    parser.add_argument("--profile", action="store_true", help="also profile one kctl run (cProfile)")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", default=TOPIC, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.profile_run = False
    if args.worker:
        worker_main(args)
        return
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for name in clients:
        if name not in CLIENTS:
            parser.error(f"unknown client {name!r}")

    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"# {args.records:,} records of {args.size} B (+-{args.size_spread}), no key, "
        f"batches of {args.batch_records}, "
        f"compression={args.compression}, {args.partitions} partition(s); best of {args.repeat}"
    )
    directory = Path(tempfile.mkdtemp(prefix="kctl-bench-consumer-"))
    broker = BrokerProcess(directory / "data", {"num.partitions": str(args.partitions)}, cwd=ROOT).start()
    results: dict[str, dict[str, float]] = {}
    try:
        started = time.perf_counter()
        stored, args.value_bytes = preload(args, broker.bootstrap)
        print(f"# preloaded {stored / 1e6:.1f} MB of record batches in {time.perf_counter() - started:.1f}s")
        print("\n## consume the preloaded topic from one kctl broker (the same broker for every client)")
        for run in range(args.repeat):
            for name in clients:
                if not available(name):
                    if run == 0:
                        print(f"  {name:<14} skipped (not installed)")
                    continue
                outcome = run_client(args, name, broker.bootstrap, broker)
                if isinstance(outcome, str):
                    print(f"  {name:<14} failed: {outcome}")
                    continue
                best = results.get(name)
                if best is None or _rate(outcome) > _rate(best):
                    results[name] = outcome
        if args.profile and available("kctl"):
            print("\n## kctl under cProfile (slower; not the figure in the table)")
            args.profile_run = True
            run_client(args, "kctl", broker.bootstrap, broker)
            args.profile_run = False
    finally:
        broker.stop(timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
    reference = results.get("aiokafka")
    header = ("client", "records/s", "MB/s", "seconds", "cpu", "rec/CPU-s", "broker cpu", "vs aiokafka")
    print("  {:<14} {:>12} {:>8} {:>8} {:>6} {:>12} {:>11} {:>12}".format(*header))
    for name in clients:
        outcome = results.get(name)
        if outcome is None:
            continue
        seconds, timed = outcome["seconds"], outcome["timed"]
        rate = timed / seconds
        ratio = f"{rate / (reference['timed'] / reference['seconds']):.2f}x" if reference else "-"
        print(
            f"  {name:<14} {rate:>12,.0f} {rate * args.size / 1e6:>8.1f} {seconds:>8.2f} "
            f"{outcome['cpu'] / seconds:>6.0%} {timed / max(outcome['cpu'], 1e-9):>12,.0f} "
            f"{outcome['broker_cpu'] / seconds:>11.0%} {ratio:>12}"
        )
    if "kctl" in results and reference:
        kctl = results["kctl"]
        ratio = (kctl["timed"] / kctl["seconds"]) / (reference["timed"] / reference["seconds"])
        per_cpu = (kctl["timed"] / max(kctl["cpu"], 1e-9)) / (
            reference["timed"] / max(reference["cpu"], 1e-9)
        )
        verdict = "met" if min(ratio, per_cpu) >= TARGET else "NOT met"
        print(
            f"\n# target (issue 18): kctl consumer >= {TARGET}x aiokafka's records/s and records per "
            f"CPU-second: {ratio:.2f}x and {per_cpu:.2f}x ({verdict})"
        )


if __name__ == "__main__":
    main()
