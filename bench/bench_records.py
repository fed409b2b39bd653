"""Benchmark of the record codec (kctl.records): batch encode and decode throughput.

Prints, does not assert. For each case — 100-byte values in batches of 100 records, and 1 KiB values
in ~1 MiB batches (1024 records), with no compression, lz4 and zstd — it reports records/s and MB/s
(MB = 10**6 bytes of uncompressed batch, i.e. what the application hands over), for kctl and, as a
peer reference measured in the same run, for kafka-python's DefaultRecordBatchBuilder/DefaultRecordBatch.

Run: .venv/bin/python bench/bench_records.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from functools import partial

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kctl.records import CompressionType, RecordBatchBuilder, decode_batch

CASES = [
    ("100 B values x 100", 100, 100),
    ("1 KiB values x 1024 (~1 MiB)", 1024, 1024),
]
CODECS = [CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD]


def _records(value_size: int, count: int) -> list[tuple[int, bytes, bytes]]:
    # hex text: compressible about 2:1, like typical JSON-ish payloads
    base = 1_700_000_000_000
    return [
        (base + i, b"key-%08d" % i, os.urandom(value_size // 2).hex().encode()[:value_size])
        for i in range(count)
    ]


def _measure(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call: repeat ``fn`` for at least ``seconds``, best of 3 rounds."""
    fn()
    best = float("inf")
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        elapsed = 0.0
        while elapsed < seconds / 3:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
        best = min(best, elapsed / calls)
    return best


def _ours_encode(records: list[tuple[int, bytes, bytes]], codec: CompressionType) -> bytes:
    builder = RecordBatchBuilder(compression=codec)
    append = builder.append
    for timestamp, key, value in records:
        append(timestamp, key, value)
    return builder.build()


def _theirs_encode(records: list[tuple[int, bytes, bytes]], codec: CompressionType) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    append = builder.append
    for offset, (timestamp, key, value) in enumerate(records):
        append(offset, timestamp, key, value, [])
    return bytes(builder.build())


def _theirs_decode(data: bytes) -> list:
    batch = DefaultRecordBatch(data)
    batch.validate_crc()
    return list(batch)


def _row(label: str, records: int, raw_bytes: int, seconds: float) -> str:
    return f"  {label:<22} {records / seconds:>14,.0f} rec/s {raw_bytes / seconds / 1e6:>10.1f} MB/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.6, help="time per measurement")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    for title, value_size, count in CASES:
        records = _records(value_size, count)
        raw = len(_ours_encode(records, CompressionType.NONE))
        print(f"\n{title}: uncompressed batch {raw:,} bytes")
        for codec in CODECS:
            ours = _ours_encode(records, codec)
            theirs = _theirs_encode(records, codec)
            print(f" {codec.label}: kctl batch {len(ours):,} bytes, kafka-python batch {len(theirs):,} bytes")
            encode = _measure(partial(_ours_encode, records, codec), args.seconds)
            decode = _measure(partial(decode_batch, ours), args.seconds)
            peer_encode = _measure(partial(_theirs_encode, records, codec), args.seconds)
            peer_decode = _measure(partial(_theirs_decode, theirs), args.seconds)
            print(_row("kctl encode", count, raw, encode))
            print(_row("kctl decode", count, raw, decode))
            print(_row("kafka-python encode", count, raw, peer_encode))
            print(_row("kafka-python decode", count, raw, peer_decode))


if __name__ == "__main__":
    main()
