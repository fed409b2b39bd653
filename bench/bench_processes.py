#!/usr/bin/env python3
"""Whole-machine benchmark: `kctl broker start --processes N` against one broker process.

Prints its figures; asserts nothing. One ZooKeeper server of its own; for each N in ``--processes``
(default 1 and the usable cores), a fresh supervisor (`kctl broker start --processes N`) and a
``--partitions``-partition RF 1 topic (leaders spread over the N brokers); confluent-kafka
(librdkafka, C: the client's CPU stays small beside the brokers') produces ``--records`` records of
``--size`` bytes (acks=1, ``--linger-ms`` 0 and ``--batch-size`` 16384 by default: many small
requests, the brokers' per-request work), from the first send to the last acknowledgement:
records/s, MB/s and the brokers' CPU seconds. ``--repeat`` runs of each N, interleaved (the
machine may be shared); the load average is printed before and after.

Usage: python bench/bench_processes.py [--records 300000] [--size 100] [--partitions 8]
       [--processes 1,2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.localcluster.processes import broker_pid
from kctl.localcluster.supervisor import usable_cores
from kctl.localcluster.zookeeper import start_zookeeper


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    root: Path, connect: str, count: int, args: argparse.Namespace, round_: int
) -> tuple[float, float]:
    directory = root / f"n{count}-r{round_}"
    directory.mkdir()
    command = [sys.executable, "-m", "kctl", "broker", "start", "--processes", str(count)]
    for key, value in {
        "zookeeper.connect": f"{connect}/bench-{count}-{round_}",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(directory / "data"),
        "broker.id": "1",
    }.items():
        command += ["-X", f"{key}={value}"]
    with open(directory / "supervisor.log", "wb") as log:
        supervisor = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
    try:
        assert supervisor.stdout is not None
        bootstrap = supervisor.stdout.readline().decode().strip()
        if not bootstrap:
            raise SystemExit(f"the supervisor did not start: {(directory / 'supervisor.log').read_text()}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < count:
            if time.monotonic() > deadline:
                raise SystemExit("brokers did not register")
            time.sleep(0.2)  # polling interval, bounded by the deadline
        admin.create_topics([NewTopic("bench", args.partitions, 1)])["bench"].result()
        deadline = time.monotonic() + 60
        while True:  # every partition has a leader
            topic = admin.list_topics("bench", timeout=10).topics["bench"]
            if len(topic.partitions) == args.partitions and all(
                p.leader >= 0 for p in topic.partitions.values()
            ):
                break
            if time.monotonic() > deadline:
                raise SystemExit("partitions without a leader")
            time.sleep(0.2)  # polling interval, bounded by the deadline
        pids = [broker_pid(directory / "data" / f"broker-{1 + i}") for i in range(count)]
        before = sum(cpu_seconds(p) for p in pids if p)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "1",
                "linger.ms": args.linger_ms,
                "batch.size": args.batch_size,
            }
        )
        payload = b"x" * args.size
        started = time.perf_counter()
        for i in range(args.records):
            while True:
                try:
                    producer.produce("bench", payload, partition=i % args.partitions)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)
        elapsed = time.perf_counter() - started
        cpu = sum(cpu_seconds(p) for p in pids if p) - before
        return args.records / elapsed, cpu
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--processes", default=f"1,{usable_cores()}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--linger-ms", type=float, default=0, help="small requests: the brokers' per-request work"
    )
    parser.add_argument("--batch-size", type=int, default=16384)
    args = parser.parse_args()
    counts = [int(c) for c in args.processes.split(",")]
    print(f"load average before: {os.getloadavg()}")
    results: dict[int, list[tuple[float, float]]] = {c: [] for c in counts}
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        root = Path(tmp)
        zookeeper = start_zookeeper(root / "zookeeper")
        try:
            for round_ in range(args.repeat):
                for count in counts:
                    rate, cpu = run_once(root, zookeeper.hosts, count, args, round_)
                    results[count].append((rate, cpu))
                    print(f"processes={count} round={round_}: {rate:,.0f} records/s, broker CPU {cpu:.2f}s")
        finally:
            zookeeper.stop()
    print(f"load average after: {os.getloadavg()}")
    for count, runs in results.items():
        rates = [r for r, _ in runs]
        mb = statistics.median(rates) * args.size / 1e6
        print(
            f"processes={count}: median {statistics.median(rates):,.0f} records/s ({mb:.1f} MB/s), "
            f"all {[round(r) for r in rates]}, broker CPU s {[round(c, 2) for _, c in runs]}"
        )


if __name__ == "__main__":
    main()
