#!/usr/bin/env python3
"""Security benchmark (issue 13, section 6): produce and consume throughput over PLAINTEXT, SSL and
SASL_SSL (SCRAM-SHA-512) in the same run, against one broker listening on all three, to show the
cost of TLS.

One ``kctl broker start`` with three listeners (certificates made here with ``cryptography``); for
each listener, confluent-kafka's Producer writes N records to a fresh topic (acks=1, linger.ms=5,
batch.size 1 MB) and a Consumer reads them back from offset 0. Around each measurement the broker's
CPU is read from ``/proc/<pid>/stat``: "rec/CPU-s" is records per second of broker CPU, the figure
least disturbed by other work on a shared machine. Fetches over TLS cannot use sendfile: the broker
reads the log region with pread and writes it through the TLS transport.

Prints its figures; asserts nothing.

Usage: python bench/bench_security.py [--records N] [--size BYTES] [--repeat R]"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka

from kctl.client import AdminClient
from kctl.testing import BrokerProcess
from kctl.testing.certs import TestCA

PASSWORD = "bench-secret"
TICKS = os.sysconf("SC_CLK_TCK")


def broker_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def produce(address: str, props: dict[str, Any], topic: str, records: int, value: bytes) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": address, **props, "linger.ms": 5, "batch.size": 1_000_000, "acks": 1}
    )
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("records left undelivered")


def consume(address: str, props: dict[str, Any], topic: str, records: int) -> None:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": address,
            **props,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = 0
    deadline = time.monotonic() + 120
    while seen < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {seen} of {records} records")
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                seen += 1
    consumer.close()


def measure(broker: BrokerProcess, job: Any) -> tuple[float, float]:
    assert broker.pid is not None
    cpu0, t0 = broker_cpu(broker.pid), time.perf_counter()
    job()
    return time.perf_counter() - t0, broker_cpu(broker.pid) - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kctl-bench-security-"))
    ca = TestCA(base / "certs")
    server = ca.issue("broker", "localhost", server=True)
    jaas = f'x required user_admin="{PASSWORD}";'
    broker = BrokerProcess(
        base / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": str(server.keystore),
            "sasl.jaas.config": jaas,
            "num.partitions": "1",
        },
    ).start()
    try:
        plaintext, tls, sasl_ssl = broker.addresses
        with AdminClient(plaintext) as admin:
            admin.alter_users([("bench", "SCRAM-SHA-512", PASSWORD)])
        ssl_props = {"security.protocol": "SSL", "ssl.ca.location": str(ca.pem)}
        cases = [
            ("PLAINTEXT", plaintext, {}),
            ("SSL", tls, ssl_props),
            (
                "SASL_SSL SCRAM-SHA-512",
                sasl_ssl,
                {
                    **ssl_props,
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "bench",
                    "sasl.password": PASSWORD,
                },
            ),
        ]
        value = os.urandom(args.size)
        mb = args.records * args.size / 1e6
        print(
            f"# security benchmark: {args.records:,} records of {args.size} B per run, "
            f"median of {args.repeat}, {os.cpu_count()} CPUs; confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]})"
        )
        print(f"{'listener':<24}{'job':<9}{'records/s':>12}{'MB/s':>8}{'rec/CPU-s':>12}{'vs PLAINTEXT':>14}")
        baseline: dict[str, float] = {}
        for name, address, props in cases:
            for job in ("produce", "consume"):
                rates, per_cpu = [], []
                for run in range(args.repeat):
                    topic = f"bench-{name.split()[0].lower()}-{run}"
                    if job == "consume":
                        produce(address, props, topic, args.records, value)
                        work = functools.partial(consume, address, props, topic, args.records)
                    else:
                        work = functools.partial(produce, address, props, topic, args.records, value)
                    seconds, cpu = measure(broker, work)
                    rates.append(args.records / seconds)
                    per_cpu.append(args.records / cpu if cpu > 0 else float("nan"))
                rate, cpu_rate = statistics.median(rates), statistics.median(per_cpu)
                baseline.setdefault(job, rate)
                print(
                    f"{name:<24}{job:<9}{rate:>12,.0f}{rate * args.size / 1e6:>8.0f}{cpu_rate:>12,.0f}"
                    f"{rate / baseline[job]:>13.0%}"
                )
        print(f"# {mb:.0f} MB per run")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
