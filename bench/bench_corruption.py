#!/usr/bin/env python3
"""Corruption benchmark: many more seeded partition-damage cases than the CI suite
(tests/log/test_corruption_suite.py), for the offline tool (``recover``) and broker start-up after an
unclean and a clean stop, checked against the exact-valid-prefix rule (kctl.testing.corruption).

Prints, per mode, the cases run, crashes, records lost and cases per second, and the first failures;
asserts nothing. Usage: python bench/bench_corruption.py [--cases 5000] [--seed 1] [--dir DIR]"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from kctl.testing.corruption import build_template, run_cases

MODES = ("offline", "startup-unclean", "startup-clean")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="cases per mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--dir", type=Path, default=None, help="work directory (default: /dev/shm if present)"
    )
    parser.add_argument("--segments", type=int, default=6)
    args = parser.parse_args()
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="kctl-corruption-", dir=args.dir or (shm if shm.is_dir() else None)))
    logging.disable(logging.WARNING)  # every case logs what recovery cut
    try:
        template = build_template(base, segments=args.segments)
        print(
            f"# corruption benchmark: {len(template.segments)} segments, {len(template.batches)} batches, "
            f"seed {args.seed}"
        )
        print(f"{'mode':16} {'cases':>7} {'crashed':>8} {'lost':>6} {'failures':>9} {'cases/s':>8}")
        for mode in MODES:
            start = time.perf_counter()
            summary = run_cases(template, base, seed=args.seed, count=args.cases, mode=mode)
            elapsed = time.perf_counter() - start
            print(
                f"{mode:16} {summary.cases:7d} {summary.crashed:8d} {summary.lost_records:6d} "
                f"{len(summary.failures):9d} {args.cases / elapsed:8.0f}",
                flush=True,
            )
            for failure in summary.failures[:5]:
                print(f"  {failure[:300]}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
