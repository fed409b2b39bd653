#!/usr/bin/env python3
"""Log storage benchmark: append throughput of pre-built batches and recovery speed, beside the
machine's own sequential-write limit measured on the same filesystem in the same run. The ``+epoch``
rows append as a leader does (``leader_epoch`` stamped into every batch, the epoch cache checked).

Prints its figures; asserts nothing. Usage: python bench/bench_log.py [--dir DIR] [--mb 512]"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.records.builder import RecordBatchBuilder


def build_batch(record_size: int, records: int) -> bytes:
    builder = RecordBatchBuilder()
    value = os.urandom(record_size)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(now + i, None, value)
    return builder.build()


def raw_sequential_write(directory: Path, batch: bytes, count: int, fsync: bool) -> float:
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    if fsync:
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return elapsed


def log_append(
    directory: Path, batch: bytes, count: int, fsync: bool, leader_epoch: int | None = None
) -> tuple[float, Path]:
    log_dir = directory / "bench_0"
    shutil.rmtree(log_dir, ignore_errors=True)
    log = Log(log_dir, TopicPartition("bench", 0), LogConfig(), needs_recovery=False)
    append = log.append
    start = time.perf_counter()
    if leader_epoch is None:
        for _ in range(count):
            append(batch)
    else:
        for _ in range(count):
            append(batch, leader_epoch=leader_epoch)
    if fsync:
        log.flush()
    elapsed = time.perf_counter() - start
    for segment in log.segments:
        segment.close()
    return elapsed, log_dir


def recovery(log_dir: Path) -> tuple[float, int]:
    start = time.perf_counter()
    log = Log(log_dir, TopicPartition("bench", 0), LogConfig(), recovery_point=0, needs_recovery=True)
    elapsed = time.perf_counter() - start
    validated = sum(step.valid_bytes for step in log.recovery_plan)
    log.close()
    return elapsed, validated


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="directory on the filesystem to measure")
    parser.add_argument("--mb", type=int, default=256, help="MiB written per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per figure (median reported)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kctl-bench-", dir=args.dir))
    cases = [("1 KiB records, ~1 MiB batches", 1024, 1000), ("100 B records, 100-record batches", 100, 100)]
    try:
        print(f"# log append benchmark on {base} ({args.mb} MiB per measurement, median of {args.repeat})")
        print("# raw = os.write of the same batches to a file on the same filesystem, same run;")
        print("# every measurement starts after os.sync() so earlier dirty pages do not throttle it")
        print(
            f"{'case':36} {'mode':16} {'log MB/s':>9} {'raw MB/s':>9} {'ratio':>6} "
            f"{'batches/s':>10} {'records/s':>11}"
        )
        for name, record_size, records in cases:
            batch = build_batch(record_size, records)
            count = max(1, args.mb * 1024 * 1024 // len(batch))
            total_mb = count * len(batch) / 1e6
            log_dir = base / "bench_0"
            for fsync, leader_epoch in ((False, None), (False, 5), (True, None), (True, 5)):
                raw_times, log_times = [], []
                for _ in range(args.repeat):
                    os.sync()
                    raw_times.append(raw_sequential_write(base, batch, count, fsync))
                    os.sync()
                    elapsed, log_dir = log_append(base, batch, count, fsync, leader_epoch)
                    log_times.append(elapsed)
                raw, appended = median(raw_times), median(log_times)
                mode = ("+fsync" if fsync else "page-cache") + ("+epoch" if leader_epoch is not None else "")
                print(
                    f"{name:36} {mode:16} {total_mb / appended:9.0f} {total_mb / raw:9.0f} "
                    f"{raw / appended:6.2f} {count / appended:10.0f} {count * records / appended:11.0f}",
                    flush=True,
                )
            os.sync()
            times, validated = [], 0
            for _ in range(args.repeat):
                elapsed, validated = recovery(log_dir)
                times.append(elapsed)
            print(
                f"{name:36} {'recovery':16} {validated / 1e6 / median(times):9.0f} MB/s validated "
                f"(framing + CRC-32C + index rebuild, {validated / 1e6:.0f} MB)",
                flush=True,
            )
            shutil.rmtree(log_dir, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
