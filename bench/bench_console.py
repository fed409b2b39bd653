#!/usr/bin/env python3
"""Console consumer benchmark (issue 15, section 2): `kctl consume -f jsonl` and `-f raw` beside
`kcat -C -J`, reading the same records from the same kctl broker in one run.

Prints its figures; asserts nothing. One broker (``python -m kctl broker start``, a fresh log
directory) holds one topic preloaded once with ``--records`` records (default 1M) of ``--size``
bytes (default 100; printable ASCII values, no key) through raw Produce requests. Each tool then
runs as a whole process, as a user runs it, with stdout to /dev/null:

* ``kctl consume TOPIC -o beginning -u end -f jsonl``
* ``kctl consume TOPIC -o beginning -u end -f raw``
* ``kcat -C -t TOPIC -o beginning -e -J`` (skipped when kcat is not on PATH)

The wall-clock time covers the whole process (start-up, metadata, every record); records/s is
``--records`` over it. The best of ``--repeat`` runs is reported (the tools' runs interleave). The
broker competes with the tool for the machine's cores, so on a busy machine the figures swing.

Usage: python bench/bench_console.py [--records 1000000] [--size 100] [--batch-records 1000]
       [--repeat 1] [--tools jsonl,raw,kcat]

The kctl that runs is this checkout's (its directory is put first on PYTHONPATH)."""

from __future__ import annotations

import argparse
import os
import platform
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

TOPIC = "bench-console"
TOOLS = ("jsonl", "raw", "kcat")
LABELS = {
    "jsonl": "kctl consume -o beginning -u end -f jsonl",
    "raw": "kctl consume -o beginning -u end -f raw",
    "kcat": "kcat -C -o beginning -e -J",
}


def preload(args: argparse.Namespace, bootstrap: str) -> None:
    """Create the topic (one partition) and write the records with raw Produce requests (acks=1,
    a few in flight)."""
    from kctl.client import AdminClient, NewTopic, TopicPartition
    from kctl.client.cluster import ClusterClient
    from kctl.protocol import ApiKey
    from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
    from kctl.records.builder import RecordBatchBuilder

    with AdminClient(bootstrap) as admin:
        [created] = admin.create_topics([NewTopic(TOPIC, 1, 1)])
        if not created.ok:
            raise RuntimeError(f"cannot create {TOPIC}: {created.error}")
        admin.cluster.wait_for_topics([TOPIC], timeout=30)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:"
    value = (alphabet * (args.size // len(alphabet) + 1))[: args.size]
    now = int(time.time() * 1000)

    def check(response: Any) -> None:
        for topic in response.responses:
            for partition in topic.partition_responses:
                if partition.error_code:
                    raise RuntimeError(f"produce failed: error {partition.error_code}")

    with ClusterClient(bootstrap) as cluster:
        conn = cluster.connection(cluster.leader_for(TopicPartition(TOPIC, 0)))
        in_flight = []
        written = 0
        while written < args.records:
            builder = RecordBatchBuilder()
            for _ in range(min(args.batch_records, args.records - written)):
                builder.append(now, None, value)
            written += len(builder)
            body = ProduceRequest(
                acks=1,
                timeout_ms=30_000,
                topic_data=[
                    TopicProduceData(
                        name=TOPIC, partition_data=[PartitionProduceData(index=0, records=builder.build())]
                    )
                ],
            )
            in_flight.append(conn.send(ApiKey.PRODUCE, body))
            if len(in_flight) >= 8:
                check(conn.receive(in_flight.pop(0)))
        for request in in_flight:
            check(conn.receive(request))


def command(tool: str, bootstrap: str) -> list[str]:
    if tool == "kcat":
        return ["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-J", "-q"]
    kctl = [sys.executable, "-m", "kctl", "consume", TOPIC, "-b", bootstrap, "-o", "beginning", "-u", "end"]
    return [*kctl, "-f", tool, "-q"]


def run(tool: str, bootstrap: str) -> float:
    """Seconds the tool took to write every record to /dev/null (a failing exit status raises)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(os.devnull, "wb") as devnull:
        started = time.perf_counter()
        done = subprocess.run(command(tool, bootstrap), stdout=devnull, stderr=subprocess.PIPE, env=env)
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{tool} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return elapsed


def count_lines(tool: str, bootstrap: str) -> int:
    """The number of lines the tool writes (a check that it read every record; not timed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command(tool, bootstrap), capture_output=True, env=env, check=True)
    return done.stdout.count(b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated: jsonl, raw, kcat")
    parser.add_argument("--check", action="store_true", help="first check each tool writes every record")
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    if "kcat" in tools and shutil.which("kcat") is None:
        print("# kcat is not on PATH: its row is skipped")
        tools.remove("kcat")
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPU(s); "
        f"{args.records} records of {args.size} bytes in one partition; best of {args.repeat}; "
        f"kctl from {ROOT}"
    )
    directory = Path(tempfile.mkdtemp(prefix="kctl-bench-console-"))
    broker = BrokerProcess(directory / "data", {"num.partitions": "1"}, cwd=ROOT).start()
    best: dict[str, float] = {}
    try:
        started = time.perf_counter()
        preload(args, broker.bootstrap)
        print(f"# preloaded in {time.perf_counter() - started:.1f}s")
        if args.check:
            for tool in tools:
                lines = count_lines(tool, broker.bootstrap)
                print(f"# {tool}: {lines} lines")
        for _ in range(args.repeat):
            for tool in tools:
                elapsed = run(tool, broker.bootstrap)
                best[tool] = min(best.get(tool, elapsed), elapsed)
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"{'command (stdout to /dev/null)':<44} {'seconds':>8} {'records/s':>12}")
    for tool in tools:
        print(f"{LABELS[tool]:<44} {best[tool]:>8.2f} {args.records / best[tool]:>12,.0f}")


if __name__ == "__main__":
    main()
