#!/usr/bin/env python3
"""Mirror benchmark (issue 10, section 4): `kctl mirror` throughput between two local brokers, beside
`kctl consume -f jsonl | kctl produce -f jsonl` and (with ``--mm2-libs``) Apache Kafka's MirrorMaker 2,
on the same brokers in the same run, with the broker-bound ceiling: `kctl perf produce` into the
target alone.

For each record size (100 B and 1 KiB by default) a source topic of ``--partitions`` partitions is
loaded with ``--records`` records (`kctl perf produce`), then copied by each method into its own
target topic. Figures are records/s and MB/s of record values (records x size / seconds), and the
share of the ceiling. `kctl mirror --once` and the pipe are timed as whole processes (start-up
included) and, for the mirror, also by its own summary (copying only); MirrorMaker 2 runs as a
dedicated MirrorMaker (``org.apache.kafka.connect.mirror.MirrorMaker``) and is timed from its first
record on the target to its last (its start-up of ~10-20 s excluded).

``--mm2-libs DIR``: a directory of jars holding ``org.apache.kafka:connect-mirror`` and its
dependencies, e.g. ``mvn dependency:copy-dependencies`` of a pom naming connect-mirror 3.9.0 and
slf4j-reload4j. Without it MirrorMaker 2 is skipped (said so in the output).

Prints its figures; asserts nothing.

Usage: python bench/bench_mirror.py [--records N] [--sizes 100,1024] [--partitions P] [--mm2-libs DIR]"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.testing import BrokerProcess

KCTL = [sys.executable, "-m", "kctl"]


def run(*args: str, stdin: int | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*KCTL, *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"kctl {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def end_total(bootstrap: str, topic: str, partitions: int) -> int:
    with AdminClient(bootstrap) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        try:
            return sum(max(r.offset, 0) for r in admin.list_offsets(tps, "latest", timeout=5).values())
        except Exception:
            return 0


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.cluster.wait_for_topics([topic])


def perf_produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> dict[str, float]:
    create(bootstrap, topic, partitions)
    out = run("perf", "produce", topic, "-b", bootstrap, "-n", str(records), "-s", str(size), "-f", "json")
    return json.loads(out.stdout)


def line(name: str, records: int, size: int, seconds: float, ceiling: float | None, note: str = "") -> None:
    rate = records / seconds
    mb = rate * size / 1e6
    share = f"{100 * rate / ceiling:5.0f}%" if ceiling else "     -"
    print(f"  {name:<44} {rate:>11,.0f} rec/s {mb:>8.1f} MB/s {share}  {note}", flush=True)


def bench_mm2(
    libs: Path, work: Path, source: str, target: str, topic: str, records: int, partitions: int
) -> float | None:
    config = work / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = src, dst",
                f"src.bootstrap.servers = {source}",
                f"dst.bootstrap.servers = {target}",
                "src->dst.enabled = true",
                "dst->src.enabled = false",
                f"src->dst.topics = {re.escape(topic)}",
                "tasks.max = 4",
                "replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "offset.storage.replication.factor = 1",
                "status.storage.replication.factor = 1",
                "config.storage.replication.factor = 1",
                "sync.topic.acls.enabled = false",
                "emit.checkpoints.enabled = false",
                "refresh.topics.interval.seconds = 1",
                "",
            ]
        )
    )
    log4j = work / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
    )
    classpath = ":".join(str(p) for p in sorted(libs.glob("*.jar")))
    with open(work / "mm2.log", "w") as log:
        process = subprocess.Popen(
            [
                "java",
                f"-Dlog4j.configuration=file:{log4j}",
                "-cp",
                classpath,
                "org.apache.kafka.connect.mirror.MirrorMaker",
                str(config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            return first_to_last(process, target, f"src.{topic}", records, partitions, work / "mm2.log")
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)


def first_to_last(
    process: subprocess.Popen[bytes], target: str, topic: str, records: int, partitions: int, log: Path | None
) -> float | None:
    """Records/s of a running copier, from its first record on the target to its last."""
    deadline = time.monotonic() + 300
    first: tuple[float, int] | None = None
    while time.monotonic() < deadline and process.poll() is None:
        done = end_total(target, topic, partitions)
        if done and first is None:
            first = (time.monotonic(), done)
        if done >= records:
            assert first is not None
            elapsed = time.monotonic() - first[0]
            return (records - first[1]) / elapsed if elapsed > 0 else None
        time.sleep(0.02)  # polling the target's end offsets, bounded by the deadline
    print(f"  did not finish (exit {process.poll()}){f'; see {log}' if log else ''}", flush=True)
    return None


def bench_kctl_mirror(source: str, target: str, topic: str, records: int, partitions: int) -> float | None:
    process = subprocess.Popen(
        [
            *KCTL,
            "mirror",
            "--from",
            f"live={source}",
            "--to",
            f"dst={target}",
            "--include",
            topic,
            "--rename",
            "{cluster}.{topic}",
            "--group",
            f"bench-live-{topic}",  # its own positions: not those the --once run committed
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return first_to_last(process, target, f"live.{topic}", records, partitions, None)
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--mm2-libs", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    source = BrokerProcess(work / "source", {"num.partitions": str(args.partitions)}).start()
    target = BrokerProcess(work / "target", {"num.partitions": str(args.partitions)}).start()
    print(f"source {source.bootstrap}, target {target.bootstrap}, {os.cpu_count()} CPUs")
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            records = args.records if size <= 200 else max(args.records // 5, 1000)
            topic = f"bench-{size}"
            print(f"\n{size} B records x {records:,}, {args.partitions} partitions", flush=True)
            perf_produce(source.bootstrap, topic, records, size, args.partitions)
            ceiling_run = perf_produce(target.bootstrap, f"ceiling-{size}", records, size, args.partitions)
            ceiling = float(ceiling_run["records_per_s"])
            line("ceiling: kctl perf produce into the target", records, size, records / ceiling, ceiling)

            started = time.monotonic()
            once = run(
                "mirror",
                "--from",
                f"km={source.bootstrap}",
                "--to",
                f"dst={target.bootstrap}",
                "--include",
                topic,
                "--rename",
                "{cluster}.{topic}",
                "--group",
                f"bench-once-{topic}",
                "--once",
            )
            wall = time.monotonic() - started
            line("kctl mirror --once (whole process, start-up included)", records, size, wall, ceiling)
            summary = re.search(r"mirrored (\d+) records .* in ([\d.]+)s", once.stderr)
            if summary and float(summary[2]) > 0:
                copied, seconds = int(summary[1]), float(summary[2])
                line("kctl mirror --once (its own summary: copying)", copied, size, seconds, ceiling)
            rate = bench_kctl_mirror(source.bootstrap, target.bootstrap, topic, records, args.partitions)
            if rate:
                line("kctl mirror (first to last record)", records, size, records / rate, ceiling)

            create(target.bootstrap, f"pipe.{topic}", args.partitions)
            started = time.monotonic()
            pipe = subprocess.run(
                f"{' '.join(KCTL)} consume {topic} -b {source.bootstrap} -o beginning --until end -f jsonl | "
                f"{' '.join(KCTL)} produce pipe.{topic} -b {target.bootstrap} -f jsonl --keep-partition",
                shell=True,
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - started
            if pipe.returncode == 0:
                line("kctl consume -f jsonl | kctl produce -f jsonl", records, size, wall, ceiling)
            else:
                print(f"  pipe failed: {pipe.stderr[-500:]}")

            if args.mm2_libs is None:
                print("  MirrorMaker 2: skipped (no --mm2-libs)")
            else:
                rate = bench_mm2(
                    args.mm2_libs, work, source.bootstrap, target.bootstrap, topic, records, args.partitions
                )
                if rate:
                    line("MirrorMaker 2 (first to last record)", records, size, records / rate, ceiling)
    finally:
        source.stop()
        target.stop()


if __name__ == "__main__":
    main()
