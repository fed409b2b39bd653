#!/usr/bin/env python3
"""Mirror benchmark (issue 10, section 4): `kctl mirror` throughput between two local brokers, beside
`kctl consume -f jsonl | kctl produce -f jsonl` and (with ``--mm2-libs``) Apache Kafka's MirrorMaker 2,
on the same brokers in the same run, with the broker-bound ceiling: pre-built record batches
produced into the target alone (acks=-1, pipelined; what the mirror sends, without fetching), and
`kctl perf produce` into the target beside it (bound by the Python producer's per-record work).
The ceiling the shares are of: the source topic's own batches (read beforehand) produced into the
target the way the mirror produces them (one batch per partition per request, 5 in flight, acks=-1)
— the target broker's limit for this very data; beside it the same with ~900 KB batches.

For each record size (100 B and 1 KiB by default) a source topic of ``--partitions`` partitions is
loaded with ``--records`` records (`kctl perf produce`), then copied by each method into its own
target topic. Figures are records/s and MB/s of record values (records x size / seconds), and the
share of the ceiling. `kctl mirror --once` and the pipe are timed as whole processes (start-up
included) and, for the mirror, also by its own summary (copying only); MirrorMaker 2 runs as a
dedicated MirrorMaker (``org.apache.kafka.connect.mirror.MirrorMaker``) and is timed from its first
record on the target to its last (its start-up of ~10-20 s excluded).

``--mm2``: MirrorMaker 2 too, its jars (``org.apache.kafka:connect-mirror`` 3.9.0 and its dependencies,
slf4j-reload4j) resolved from Maven Central with mvn into ``~/.cache/kctl/connect-mirror-3.9.0`` on
first use (``kctl.testing.kafka_dist.mirror_maker_libs``); ``--mm2-libs DIR``: a directory of those jars
instead. Without either MirrorMaker 2 is skipped (said so in the output).

With each ceiling and `--once` run it prints the CPU milliseconds each process spent per MB of
record values (source broker, target broker, mirror): where a copy's time goes, whatever else the
machine is doing. The mirror's figure is given with and without its start-up (the CPU of a
`kctl mirror --once` with nothing to copy, measured once at the start): the latter is the steady
cost per MB.

``--repeat N`` (3): the ceiling and both mirror runs (``--once`` and running) are repeated N times,
the ceiling measured again right before each pair, and the median of the mirror's shares of the
ceiling is printed: on a machine other work loads, a share measured next to its own ceiling moves
much less than either figure. The copies are short at the default ``--records`` (50 MB of 100 B
records: ~0.1 s at the ceiling), so fixed costs weigh in; ``--records 2000000`` measures the
steady state better.

Prints its figures; asserts nothing.

Usage: python bench/bench_mirror.py [--records N] [--sizes 100,1024] [--partitions P] [--repeat N]
[--mm2 | --mm2-libs DIR]"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.client.connection import BrokerConnection, parse_address
from kctl.client.consumer.fetcher import FETCH_MAX_VERSION, FETCH_MIN_VERSION, build_fetch_request
from kctl.mirror.batches import frame_partition, restamp
from kctl.protocol import ApiKey
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import encode_batch
from kctl.testing import BrokerProcess

KCTL = [sys.executable, "-m", "kctl"]


def run(*args: str, stdin: int | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*KCTL, *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"kctl {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def end_total(bootstrap: str, topic: str, partitions: int, admin: AdminClient | None = None) -> int:
    """The sum of the topic's end offsets (0 while it does not exist); ``admin``: a client kept
    open by the caller, so that polling costs one ListOffsets round trip."""
    if admin is None:
        with AdminClient(bootstrap) as own:
            return end_total(bootstrap, topic, partitions, own)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        return sum(max(r.offset, 0) for r in admin.list_offsets(tps, "latest", timeout=5).values())
    except Exception:
        return 0


def source_batches(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every batch of the source topic, per partition, as the mirror would send it (restamped
    without a producer id: `restamp(piece, -1, -1, -1)`)."""
    host, port = parse_address(bootstrap)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    ends = {p: 0 for p in range(partitions)}
    with AdminClient(bootstrap) as admin:
        for tp, result in admin.list_offsets(
            [TopicPartition(topic, p) for p in range(partitions)], "latest"
        ).items():
            ends[tp.partition] = result.offset
    with BrokerConnection(host, port, timeout=60) as connection:
        version = connection.version_for(
            ApiKey.FETCH, min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION
        )
        for p in range(partitions):
            offset = 0
            while offset < ends[p]:
                body = build_fetch_request(
                    [(TopicPartition(topic, p), offset)],
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=16 << 20,
                    partition_max_bytes=16 << 20,
                )
                (answer,) = connection.request(ApiKey.FETCH, body, version).responses[0].partitions
                framed = frame_partition(answer.records, offset)
                out[p] += [bytes(restamp(piece, -1, -1, -1)) for piece in framed.pieces]
                offset = framed.next_offset or offset
    return out


def produce_batches(bootstrap: str, topic: str, batches: dict[int, list[bytes]]) -> float:
    """Seconds to produce ``batches`` into ``topic`` as the mirror does: one batch of each partition
    per Produce request, acks=-1, at most 5 requests (so 5 batches per partition) in flight."""
    partitions = len(batches)
    create(bootstrap, topic, partitions)
    host, port = parse_address(bootstrap)
    rounds = max(len(b) for b in batches.values())
    bodies = [
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[
                        PartitionProduceData(index=p, records=batches[p][n])
                        for p in range(partitions)
                        if n < len(batches[p])
                    ],
                )
            ],
        )
        for n in range(rounds)
    ]
    with BrokerConnection(host, port, timeout=60) as connection:
        version = connection.version_for(ApiKey.PRODUCE, min_version=3)
        in_flight: list[Any] = []
        started = time.monotonic()
        for body in bodies:
            if len(in_flight) == 5:
                check_produced(connection.receive(in_flight.pop(0)))
            in_flight.append(connection.send(ApiKey.PRODUCE, body, version))
        for request in in_flight:
            check_produced(connection.receive(request))
        return time.monotonic() - started


def check_produced(answer: Any) -> None:
    codes = {p.error_code for t in answer.responses for p in t.partition_responses}
    if codes != {0}:
        raise SystemExit(f"ceiling: Produce failed with error codes {codes}")


def broker_ceiling(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    """Records/s the target broker appends when the client costs nothing: one pre-built batch of
    about 1 MiB of ``size``-byte records per partition in each Produce request (Kafka takes one batch
    per partition), acks=-1, 5 requests in flight on one connection — requests like the mirror's,
    without the fetching. The broker-bound limit."""
    create(bootstrap, topic, partitions)
    per_batch = max(900_000 // (size + 16), 1)  # below max.message.bytes (1 MiB) with record overhead
    value = os.urandom(size)
    chunk = encode_batch([(int(time.time() * 1000), None, value, []) for _ in range(per_batch)])
    copies = 1
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[PartitionProduceData(index=p, records=chunk) for p in range(partitions)],
            )
        ],
    )
    per_request = per_batch * copies * partitions
    host, port = parse_address(bootstrap)
    with BrokerConnection(host, port, timeout=60) as connection:
        version = connection.version_for(ApiKey.PRODUCE, min_version=3)
        in_flight: list[Any] = []
        sent = 0
        started = time.monotonic()
        while sent < records or in_flight:
            while sent < records and len(in_flight) < 5:
                in_flight.append(connection.send(ApiKey.PRODUCE, body, version))
                sent += per_request
            answer = connection.receive(in_flight.pop(0))
            codes = {p.error_code for t in answer.responses for p in t.partition_responses}
            if codes != {0}:
                raise SystemExit(f"ceiling: Produce failed with error codes {codes}")
        return sent / (time.monotonic() - started)


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far (the mirror's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
    # a source alias of its own per run: MirrorMaker keeps its Connect state (configs, offsets, status)
    # in target topics named after it, which a later run would otherwise start from (the old topic)
    src = "src" + re.sub(r"\W", "", topic)
    config = work / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                f"clusters = {src}, dst",
                f"{src}.bootstrap.servers = {source}",
                f"dst.bootstrap.servers = {target}",
                f"{src}->dst.enabled = true",
                f"dst->{src}.enabled = false",
                f"{src}->dst.topics = {re.escape(topic)}",
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
            return first_to_last(process, target, f"{src}.{topic}", records, partitions, work / "mm2.log")
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
    with AdminClient(target) as admin:
        while time.monotonic() < deadline and process.poll() is None:
            done = end_total(target, topic, partitions, admin)
            if done and first is None:
                first = (time.monotonic(), done)
            if done >= records:
                assert first is not None
                elapsed = time.monotonic() - first[0]
                return (records - first[1]) / elapsed if elapsed > 0 and records > first[1] else None
            time.sleep(0.01)  # polling the target's end offsets, bounded by the deadline
    print(f"  did not finish (exit {process.poll()}){f'; see {log}' if log else ''}", flush=True)
    return None


def bench_kctl_mirror(
    source: str, target: str, topic: str, records: int, partitions: int, round_: int = 1
) -> float | None:
    """Records/s of a running `kctl mirror` into a topic of its own (``live<round>.<topic>``)."""
    alias = f"live{round_}"
    process = subprocess.Popen(
        [
            *KCTL,
            "mirror",
            "--from",
            f"{alias}={source}",
            "--to",
            f"dst={target}",
            "--include",
            topic,
            "--rename",
            "{cluster}.{topic}",
            "--group",
            f"bench-{alias}-{topic}",  # its own positions: not those the --once run committed
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return first_to_last(process, target, f"{alias}.{topic}", records, partitions, None)
    finally:
        stop(process)


def mirror_once(
    source: str, target: str, topic: str, suffix: str, records: int, size: int, ceiling: float
) -> float | None:
    """`kctl mirror --once` into a topic of its own: records/s by its own summary (copying only),
    with the whole process's figure and the CPU each process spent per MB."""
    source_broker, target_broker = BENCH_BROKERS
    megabytes = records * size / 1e6
    cpu = (source_broker.cpu_seconds(), target_broker.cpu_seconds(), children_cpu())
    started = time.monotonic()
    once = run(
        "mirror",
        "--from",
        f"km{suffix.replace('-', '_')}={source}",
        "--to",
        f"dst={target}",
        "--include",
        topic,
        "--rename",
        "{cluster}.{topic}",
        "--group",
        f"bench-once-{topic}-{suffix}",
        "--once",
    )
    wall = time.monotonic() - started
    line("kctl mirror --once (whole process, start-up included)", records, size, wall, ceiling)
    used = (
        source_broker.cpu_seconds() - cpu[0],
        target_broker.cpu_seconds() - cpu[1],
        children_cpu() - cpu[2],
    )
    steady = max(used[2] - STARTUP_CPU[0], 0.0)
    print(
        f"    cpu per MB: source broker {1e3 * used[0] / megabytes:.2f} ms, target broker "
        f"{1e3 * used[1] / megabytes:.2f} ms, mirror {1e3 * used[2] / megabytes:.2f} ms "
        f"({1e3 * steady / megabytes:.2f} ms without its start-up) "
        f"({sum(used):.1f} CPU-s in {wall:.1f} s on {os.cpu_count()} CPUs)"
    )
    summary = re.search(r"mirrored (\d+) records .* in ([\d.]+)s", once.stderr)
    if not summary or float(summary[2]) <= 0:
        return None
    copied, seconds = int(summary[1]), float(summary[2])
    line("kctl mirror --once (its own summary: copying)", copied, size, seconds, ceiling)
    return copied / seconds


BENCH_BROKERS: list[Any] = []
STARTUP_CPU = [0.0]  # CPU seconds of a `kctl mirror --once` with nothing to copy


def mirror_startup_cpu(source: str, target: str) -> float:
    """CPU seconds of a whole `kctl mirror --once` process that finds nothing to copy (imports,
    connections, planning): the fixed cost inside each ``--once`` run's figure."""
    before = children_cpu()
    subprocess.run(
        [*KCTL, "mirror", "--from", f"empty={source}", "--to", f"dst={target}", "--include", "^$", "--once"],
        capture_output=True,
        timeout=120,
    )
    return children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--mm2", action="store_true", help="MirrorMaker 2 too (jars resolved with mvn)")
    parser.add_argument("--mm2-libs", type=Path, default=None, help="MirrorMaker 2's jars (implies --mm2)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of ceiling + mirror runs per size")
    args = parser.parse_args()
    if args.mm2 and args.mm2_libs is None:
        from kctl.testing.kafka_dist import mirror_maker_libs

        args.mm2_libs = mirror_maker_libs()  # KafkaJarsUnavailable says why it cannot
    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    source = BrokerProcess(work / "source", {"num.partitions": str(args.partitions)}).start()
    target = BrokerProcess(work / "target", {"num.partitions": str(args.partitions)}).start()
    BENCH_BROKERS[:] = [source, target]
    print(f"source {source.bootstrap}, target {target.bootstrap}, {os.cpu_count()} CPUs")
    STARTUP_CPU[0] = mirror_startup_cpu(source.bootstrap, target.bootstrap)
    print(f"kctl mirror start-up: {STARTUP_CPU[0]:.2f} CPU-s (an --once run with nothing to copy)")
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            records = args.records if size <= 200 else max(args.records // 5, 1000)
            topic = f"bench-{size}"
            print(f"\n{size} B records x {records:,}, {args.partitions} partitions", flush=True)
            perf_produce(source.bootstrap, topic, records, size, args.partitions)
            megabytes = records * size / 1e6
            batches = source_batches(source.bootstrap, topic, args.partitions)
            shares: dict[str, list[float]] = {"once": [], "live": []}
            for round_ in range(1, args.repeat + 1):
                # the ceiling again next to each mirror run: the machine's load moves both alike
                print(f"  round {round_}/{args.repeat}", flush=True)
                suffix = f"{size}-{round_}"
                before = target.cpu_seconds()
                seconds = produce_batches(target.bootstrap, f"ceiling-{suffix}", batches)
                ceiling = records / seconds
                line("ceiling: the source's batches into the target", records, size, seconds, ceiling)
                used = 1e3 * (target.cpu_seconds() - before) / megabytes
                print(f"    cpu per MB: target broker {used:.2f} ms")
                copied = mirror_once(
                    source.bootstrap, target.bootstrap, topic, suffix, records, size, ceiling
                )
                if copied:
                    shares["once"].append(copied / ceiling)
                rate = bench_kctl_mirror(
                    source.bootstrap, target.bootstrap, topic, records, args.partitions, round_
                )
                if rate:
                    line("kctl mirror (first to last record)", records, size, records / rate, ceiling)
                    shares["live"].append(rate / ceiling)
            for name, label in (
                ("once", "--once, its own summary"),
                ("live", "running, first to last record"),
            ):
                if shares[name]:
                    each = ", ".join(f"{100 * x:.0f}%" for x in shares[name])
                    print(
                        f"  median share of the ceiling over {len(shares[name])} rounds, "
                        f"kctl mirror {label}: {100 * statistics.median(shares[name]):.0f}% ({each})",
                        flush=True,
                    )
            del batches
            biggest = broker_ceiling(target.bootstrap, f"big-{size}", records, size, args.partitions)
            line("pre-built ~900 KB batches into the target", records, size, records / biggest, ceiling)
            perf = perf_produce(target.bootstrap, f"perf-{size}", records, size, args.partitions)
            rate = float(perf["records_per_s"])
            line("kctl perf produce into the target (client-bound)", records, size, records / rate, ceiling)

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
                print("  MirrorMaker 2: skipped (no --mm2)")
            else:
                rate = bench_mm2(
                    args.mm2_libs, work, source.bootstrap, target.bootstrap, topic, records, args.partitions
                )
                if rate:
                    line("MirrorMaker 2 (first to last record)", records, size, records / rate, ceiling)
    finally:
        source.stop()
        target.stop()
        shutil.rmtree(work, ignore_errors=True)  # every round's topics: gigabytes at --records 2000000


if __name__ == "__main__":
    main()
