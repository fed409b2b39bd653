#!/usr/bin/env python3
"""Run ``kctl broker start`` with cProfile switched on only between two signals, for bench_broker.py.

SIGUSR1 enables the profiler (after clearing what it held); SIGUSR2 disables it and writes the stats to
the path most recently written to ``<control>`` (a file named by the first argument), then creates
``<that path>.done``. The profile so covers exactly one measurement window of the benchmark, not the
broker's start-up (imports, compiled codecs) nor its shutdown. Signal handlers run on the main thread,
which is the thread running the broker's event loop, so that is the thread profiled.

Usage: python bench/broker_profiled.py CONTROL_FILE [kctl broker start arguments...]"""

from __future__ import annotations

import cProfile
import signal
import sys
from pathlib import Path


def main() -> int:
    control = Path(sys.argv[1])
    profiler = cProfile.Profile()

    def start(_signum: int, _frame: object) -> None:
        profiler.clear()
        profiler.enable()

    def stop(_signum: int, _frame: object) -> None:
        profiler.disable()
        target = Path(control.read_text().strip())
        profiler.dump_stats(target)
        target.with_name(target.name + ".done").touch()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from kctl.__main__ import main as kctl_main

    return kctl_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
