"""What the produce and consume runs of `kctl.perf` share: the clock, the bookkeeping cadence, how
a run reports progress (`Progress`, implemented by the caller: a CLI display, a log, nothing), and
how it is asked to stop (`Interrupts`: Ctrl-C as a request rather than an exception)."""

from __future__ import annotations

import dataclasses
import signal
import time
from typing import Any, Protocol

from kctl.perf.stats import IntervalStats

TICK = 0.05
"""Seconds between two rounds of bookkeeping (collecting futures, progress, sampling rate)."""

monotonic = time.monotonic


@dataclasses.dataclass(frozen=True)
class Figures:
    """A run's figures so far: `records` done, the `rate` (records/s) and `mb_rate` (MB/s) of the
    measured part, the mean latency (None when not measured), and whether it is in the warm-up."""

    records: int
    rate: float
    mb_rate: float
    latency_ms: float | None
    warmup: bool = False


class Progress(Protocol):
    """Receives a run's figures as it goes; `tick` is called about every `TICK` seconds. The
    methods do nothing unless an implementation overrides them."""

    def start(self, now: float, *, warmup: bool = False) -> None:
        """The run's clock starts at `now` (in the warm-up or not)."""

    def tick(self, now: float, stats: IntervalStats, figures: Figures) -> None:
        """The figures so far; `stats` holds the current interval (take() it to report)."""


class NoProgress(Progress):
    """A `Progress` that reports nothing."""


class Interrupts:
    """Ctrl-C as a request: the first sets `stop` (the run ends and its summary is printed), the
    second `abort` (stop waiting for what is on its way), the third raises KeyboardInterrupt.

    The SIGINT handler is installed while the object is entered as a context manager; outside one
    (or off the main thread) nothing ever sets the flags and Ctrl-C raises as usual."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None
        self._installed = False

    @property
    def stop(self) -> bool:
        return self.count >= 1

    @property
    def abort(self) -> bool:
        return self.count >= 2

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count >= 2:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def __enter__(self) -> Interrupts:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        except ValueError:  # not the main thread (e.g. an embedding test runner): Ctrl-C raises
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
