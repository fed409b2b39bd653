#!/usr/bin/env python3
"""Client benchmark (issue 4, section 6): kctl's Python producer beside confluent-kafka (librdkafka),
aiokafka and kafka-python, producing the same records to the same kctl broker in the same run.

Prints its figures; asserts nothing. One broker (``python -m kctl broker start``, a fresh log
directory) serves every client; each client runs in its own subprocess (no threads or caches left
over from another client), produces ``--records`` records of ``--size`` bytes (no key unless
``--keys``) with the same acks, linger.ms and batch size, and the time from the first send until
the last acknowledgement is measured (with ``--callbacks``, every record also gets a delivery
callback, each client's own way, and every callback must have run); the best of ``--repeat`` runs
is reported (each run to a new topic). "cpu" is the client process's CPU time over the run (user +
system, all threads) as a share of the wall time; the broker runs on the same machine and competes
for its cores.

The "encode only" section measures what a client can do without a network: kctl's
``RecordBatchBuilder`` and kafka-python's / aiokafka's batch builders appending the same records,
and kctl's whole ``Producer.send`` path (partitioner, accumulator, futures) into a producer whose
broker never answers, so every record stays buffered.

Usage: python bench/bench_clients.py [--records 200000] [--size 100] [--clients kctl,confluent,...]
       [--keys] [--repeat 3] [--acks 1] [--linger-ms 5] [--batch-size 262144] [--compression none]

aiokafka is not a kctl dependency: ``pip install aiokafka`` (the section is skipped without it)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kctl.testing import BrokerProcess  # noqa: E402 - this checkout's kctl (ROOT is on sys.path)

CLIENTS = ("kctl", "confluent", "aiokafka", "kafka-python")


# ------------------------------------------------------------------------------------------ records


def make_records(count: int, size: int, keys: bool) -> tuple[list[bytes | None], bytes]:
    """Keys (None without --keys; 1000 distinct ones with) and one value of ``size`` bytes."""
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    if not keys:
        return [None] * count, value
    return [b"key-%06d" % (i % 1000) for i in range(count)], value


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------------------ workers
# Each worker produces a warm-up record and then `--records` records to `topic`, and returns the
# seconds from the first send to the last acknowledgement (flush). None keeps the records' futures;
# the parent checks afterwards that the topic holds every record. They run in a subprocess:
# `bench_clients.py --worker NAME ...`.


def run_kctl(args: argparse.Namespace, topic: str) -> float:
    from kctl.client.producer import Producer

    keys, value = make_records(args.records, args.size, args.keys)
    config = {
        "acks": str(args.acks),
        "linger.ms": str(args.linger_ms),
        "batch.size": str(args.batch_size),
        "compression.type": args.compression,
    }
    with Producer(args.bootstrap, config) as producer:
        producer.send(topic, value).result(30)  # warm-up: connection, metadata, producer id
        send = producer.send
        delivered = [0]

        def on_delivery(error: Any, metadata: Any) -> None:
            delivered[0] += error is None

        start = time.perf_counter()
        if args.callbacks:
            for key in keys:
                send(topic, value, key, on_delivery=on_delivery)
        else:
            for key in keys:
                send(topic, value, key)
        left = producer.flush(300)
        elapsed = time.perf_counter() - start
        assert left == 0, f"{left} records not delivered"
        assert not args.callbacks or delivered[0] == len(keys), f"{delivered[0]} callbacks"
    return elapsed


def run_confluent(args: argparse.Namespace, topic: str) -> float:
    import confluent_kafka as ck

    keys, value = make_records(args.records, args.size, args.keys)
    producer = ck.Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": args.acks,
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_size,
            "compression.type": args.compression,
            "queue.buffering.max.messages": 1_000_000,
            "partitioner": "murmur2_random",
        }
    )
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    produce, poll = producer.produce, producer.poll
    delivered = [0]

    def on_delivery(error: Any, message: Any) -> None:
        delivered[0] += error is None

    extra = {"on_delivery": on_delivery} if args.callbacks else {}
    start = time.perf_counter()
    for key in keys:
        try:
            produce(topic, value, key, **extra)
        except BufferError:
            poll(0.001)
            produce(topic, value, key, **extra)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    assert left == 0, f"{left} records not delivered"
    assert not args.callbacks or delivered[0] == len(keys), f"{delivered[0]} callbacks"
    return elapsed


def run_aiokafka(args: argparse.Namespace, topic: str) -> float:
    import asyncio

    from aiokafka import AIOKafkaProducer

    keys, value = make_records(args.records, args.size, args.keys)

    async def main() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=args.bootstrap,
            acks=args.acks if args.acks != -1 else "all",
            linger_ms=args.linger_ms,
            max_batch_size=args.batch_size,
            max_request_size=max(1_048_576, args.batch_size * 2),
            compression_type=None if args.compression == "none" else args.compression,
        )
        await producer.start()
        try:
            await (await producer.send(topic, value))
            send = producer.send
            delivered = [0]

            def on_done(future: Any) -> None:
                delivered[0] += future.exception() is None

            start = time.perf_counter()
            for key in keys:
                future = await send(topic, value, key)
                if args.callbacks:
                    future.add_done_callback(on_done)
            await producer.flush()
            elapsed = time.perf_counter() - start
            await asyncio.sleep(0)  # done-callbacks run on the next loop iteration
            assert not args.callbacks or delivered[0] == len(keys), f"{delivered[0]} callbacks"
            return elapsed
        finally:
            await producer.stop()

    return asyncio.run(main())


def run_kafka_python(args: argparse.Namespace, topic: str) -> float:
    from kafka import KafkaProducer

    keys, value = make_records(args.records, args.size, args.keys)
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        acks=args.acks if args.acks != -1 else "all",
        linger_ms=args.linger_ms,
        batch_size=args.batch_size,
        max_request_size=max(1_048_576, args.batch_size * 2),
        compression_type=None if args.compression == "none" else args.compression,
    )
    try:
        producer.send(topic, value).get(30)
        send = producer.send
        delivered = [0]

        def on_success(metadata: Any) -> None:
            delivered[0] += 1

        start = time.perf_counter()
        for key in keys:
            future = send(topic, value, key)
            if args.callbacks:
                future.add_callback(on_success)
        producer.flush(300)
        elapsed = time.perf_counter() - start
        assert not args.callbacks or delivered[0] == len(keys), f"{delivered[0]} callbacks"
        return elapsed
    finally:
        producer.close(10)


WORKERS: dict[str, Callable[[argparse.Namespace, str], float]] = {
    "kctl": run_kctl,
    "confluent": run_confluent,
    "aiokafka": run_aiokafka,
    "kafka-python": run_kafka_python,
}


def worker_main(args: argparse.Namespace) -> None:
    cpu0 = cpu_seconds()
    elapsed = WORKERS[args.worker](args, args.topic)
    # CPU from the warm-up to the end; dominated by the measured part
    print(json.dumps({"seconds": elapsed, "cpu": cpu_seconds() - cpu0}))


# ------------------------------------------------------------------------------------------ encode only


def measure(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def encode_only(args: argparse.Namespace) -> list[tuple[str, float]]:
    """records/s of batch encoding without a network, per client that exposes its builder."""
    from kctl.records.builder import RecordBatchBuilder

    keys, value = make_records(args.records, args.size, args.keys)
    per_batch = max(1, args.batch_size // (args.size + 20))
    now = int(time.time() * 1000)
    rows: list[tuple[str, float]] = []

    def kctl_builder() -> None:
        builder = RecordBatchBuilder(compression=args.compression)
        for i, key in enumerate(keys):
            if i % per_batch == 0:
                builder.build()
                builder = RecordBatchBuilder(compression=args.compression)
            builder.append(now, key, value)
        builder.build()

    rows.append(("kctl RecordBatchBuilder", args.records / measure(kctl_builder)))

    def kctl_send_path() -> float:
        from kctl.client.producer import Producer

        # a port nobody listens on: the sender never gets a connection, records stay buffered
        producer = Producer(
            "127.0.0.1:1",
            buffer_memory=args.records * (args.size + 64) * 2,
            batch_size=args.batch_size,
            linger_ms=args.linger_ms,
            compression_type=args.compression,
        )
        producer._topics["t"] = producer._topics.get("t") or _topic_info(1)  # as if metadata had come
        send = producer.send
        start = time.perf_counter()
        for key in keys:
            send("t", value, key)
        elapsed = time.perf_counter() - start
        producer.close(timeout=0)
        return elapsed

    rows.append(("kctl Producer.send (no broker)", args.records / min(kctl_send_path() for _ in range(3))))

    peers = (
        ("kafka-python builder", "kafka.record.default_records"),
        ("aiokafka builder", "aiokafka.record.default_records"),
    )
    for label, module_name in peers:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        builder_class = module.DefaultRecordBatchBuilder
        if builder_class.__module__.endswith("_crecords.default_records"):
            label += " (C ext.)"
        rows.append((label, args.records / measure(lambda cls=builder_class: _peer_encode(cls))))
    return rows


def _topic_info(partitions: int) -> Any:
    from kctl.client.producer.accumulator import TopicInfo

    return TopicInfo(tuple(range(partitions)), tuple(range(partitions)))


_ENCODE_ARGS: argparse.Namespace | None = None


def _peer_encode(builder_class: Any) -> None:
    args = _ENCODE_ARGS
    assert args is not None
    keys, value = make_records(args.records, args.size, args.keys)
    now = int(time.time() * 1000)
    codec = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[args.compression]

    def new() -> Any:
        return builder_class(
            magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=args.batch_size,
        )  # fmt: skip

    builder = new()
    offset = 0
    for key in keys:
        if builder.append(offset, now, key, value, []) is None:  # full
            builder.build()
            builder, offset = new(), 0
            builder.append(offset, now, key, value, [])
        offset += 1
    builder.build()


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records the topic holds (the sum of its partitions' end offsets)."""
    from kctl.client import AdminClient, TopicPartition

    with AdminClient(bootstrap) as admin:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(result.offset for result in admin.list_offsets(wanted, "latest").values())


def run_client(
    args: argparse.Namespace, name: str, broker: BrokerProcess, topic: str
) -> dict[str, float] | str:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", name, "--topic", topic,
        "--bootstrap", broker.bootstrap, "--records", str(args.records), "--size", str(args.size),
        "--acks", str(args.acks), "--linger-ms", str(args.linger_ms), "--batch-size", str(args.batch_size),
        "--compression", args.compression,
    ] + (["--keys"] if args.keys else []) + (["--callbacks"] if args.callbacks else [])  # fmt: skip
    broker_cpu = broker.cpu_seconds()
    result = subprocess.run(command, capture_output=True, timeout=900, check=False, cwd=ROOT)
    if result.returncode != 0:
        return result.stderr.decode(errors="replace").strip().splitlines()[-1]
    outcome = json.loads(result.stdout.decode().strip().splitlines()[-1])
    outcome["broker_cpu"] = broker.cpu_seconds() - broker_cpu
    stored = stored_records(broker.bootstrap, topic, args.partitions)
    if stored != args.records + 1:
        return f"the topic holds {stored} records, not {args.records + 1}"
    return outcome


def available(name: str) -> bool:
    module = {
        "kctl": "kctl",
        "confluent": "confluent_kafka",
        "aiokafka": "aiokafka",
        "kafka-python": "kafka",
    }[name]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main() -> None:
    global _ENCODE_ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--keys", action="store_true", help="1000 distinct keys (murmur2 partitioning)")
    parser.add_argument("--partitions", type=int, default=1, help="of each topic")
    parser.add_argument("--acks", type=int, default=1, choices=(-1, 0, 1))
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256 * 1024, help="batch.size for every client")
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    parser.add_argument("--repeat", type=int, default=3, help="runs per client; the best is reported")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated: {', '.join(CLIENTS)}")
    parser.add_argument("--no-encode", action="store_true", help="skip the encode-only section")
    parser.add_argument(
        "--callbacks", action="store_true", help="a delivery callback per record (each client's own way)"
    )
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return
    _ENCODE_ARGS = args
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for name in clients:
        if name not in CLIENTS:
            parser.error(f"unknown client {name!r}")

    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"# {args.records:,} records of {args.size} B, {'1000 keys' if args.keys else 'no key'}, "
        f"acks={args.acks}, linger.ms={args.linger_ms}, batch.size={args.batch_size}, "
        f"compression={args.compression}, {args.partitions} partition(s); best of {args.repeat}"
    )
    if not args.no_encode:
        print("\n## encode only (no network): the client's own ceiling")
        for label, rate in encode_only(args):
            print(f"  {label:<32} {rate:>12,.0f} records/s")

    print("\n## produce to one kctl broker (the same broker for every client)")
    directory = Path(tempfile.mkdtemp(prefix="kctl-bench-clients-"))
    broker = BrokerProcess(directory / "data", {"num.partitions": str(args.partitions)}, cwd=ROOT).start()
    results: dict[str, dict[str, float]] = {}
    try:
        for run in range(args.repeat):
            for name in clients:
                if not available(name):
                    if run == 0:
                        print(f"  {name:<14} skipped (not installed)")
                    continue
                outcome = run_client(args, name, broker, f"bench-{name}-{run}")
                if isinstance(outcome, str):
                    print(f"  {name:<14} failed: {outcome}")
                    continue
                best = results.get(name)
                if best is None or outcome["seconds"] < best["seconds"]:
                    results[name] = outcome
    finally:
        broker.stop(timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
    mb = args.records * args.size / 1e6
    reference = results.get("aiokafka")
    header = ("client", "records/s", "MB/s", "seconds", "cpu", "broker cpu", "vs aiokafka")
    print("  {:<14} {:>12} {:>8} {:>8} {:>6} {:>11} {:>12}".format(*header))
    for name in clients:
        outcome = results.get(name)
        if outcome is None:
            continue
        seconds = outcome["seconds"]
        ratio = f"{reference['seconds'] / seconds:.2f}x" if reference else "-"
        print(
            f"  {name:<14} {args.records / seconds:>12,.0f} {mb / seconds:>8.1f} {seconds:>8.2f} "
            f"{outcome['cpu'] / seconds:>6.0%} {outcome['broker_cpu'] / seconds:>11.0%} {ratio:>12}"
        )
    if "kctl" in results and reference:
        ratio = reference["seconds"] / results["kctl"]["seconds"]
        verdict = "met" if ratio >= 2 else "NOT met"
        print(f"\n# target: kctl producer >= 2x aiokafka's records/s: {ratio:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
