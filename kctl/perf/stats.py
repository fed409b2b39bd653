"""The measuring instruments of the load generators: a latency histogram, interval figures and
sampling. Pure Python, no I/O, no client: unit-testable on its own.

- `LatencyHistogram`: HDR-style log-linear buckets of microseconds, fixed memory (about 3,300
  counters up to an hour) and a relative error below 1/128 (0.8 %) for any recorded value, with
  weighted recording (a sampled value stands for `weight` records).
- `IntervalStats`: what one progress interval saw (records, bytes, latency avg and max).
- `LatencySummary`: the figures of a histogram (avg, percentiles, max in ms; samples) as a result.
- `Sampler`: picks which records get their latency measured: every record, or a random record about
  every `k`-th (the histogram weights it by `k`, so the figures stay per-record estimates), with `k`
  adapted to the achieved rate so that measuring never costs more than a few thousand callbacks per
  second.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass
from typing import Any

MB = 1024 * 1024
"""The MB of the MB/s figures: 2**20 bytes, as Kafka's perf tools count."""

SUB_BUCKET_BITS = 7
"""Each power-of-two range of values is split into 2**7 = 128 buckets (exact below 256 µs)."""
MAX_LATENCY_US = 3_600_000_000
"""Values above an hour are counted in the last bucket (the exact maximum is kept apart)."""

PERCENTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p99_9", 99.9))


def _bucket_index(value: int) -> int:
    """The bucket of a non-negative value: the value itself below 256, then 128 buckets per doubling."""
    if value < 256:
        return value
    shift = value.bit_length() - (SUB_BUCKET_BITS + 1)
    return (shift << SUB_BUCKET_BITS) + (value >> shift)


def _bucket_range(index: int) -> tuple[int, int]:
    """The values `[low, high)` that fall in bucket `index`."""
    if index < 256:
        return index, index + 1
    shift = (index >> SUB_BUCKET_BITS) - 1
    mantissa = index - (shift << SUB_BUCKET_BITS)
    return mantissa << shift, (mantissa + 1) << shift


BUCKETS = _bucket_index(MAX_LATENCY_US) + 1


class LatencyHistogram:
    """Counts of latencies in microseconds in log-linear buckets; thread-safe recording.

    Percentiles are the middle of the bucket holding the requested rank, clamped to the exact
    minimum and maximum seen; `mean` is exact (a running sum)."""

    __slots__ = ("_counts", "_lock", "count", "max", "min", "samples", "total")

    def __init__(self) -> None:
        self._counts = [0] * BUCKETS
        self._lock = threading.Lock()
        self.samples = 0
        """Values recorded (each may stand for several records)."""
        self.count = 0
        """Records the values stand for: the sum of the weights."""
        self.total = 0
        self.min: int | None = None
        self.max: int | None = None

    def record(self, value_us: int, weight: int = 1) -> None:
        """Count `value_us` (negative values count as 0) `weight` times."""
        value = max(int(value_us), 0)
        index = _bucket_index(min(value, MAX_LATENCY_US))
        with self._lock:
            self._counts[index] += weight
            self.samples += 1
            self.count += weight
            self.total += value * weight
            if self.max is None or value > self.max:
                self.max = value
            if self.min is None or value < self.min:
                self.min = value

    def merge(self, other: LatencyHistogram) -> None:
        """Add every count of `other` to this histogram."""
        with other._lock:
            counts, samples, count, total, low, high = (
                list(other._counts),
                other.samples,
                other.count,
                other.total,
                other.min,
                other.max,
            )
        with self._lock:
            for i, n in enumerate(counts):
                if n:
                    self._counts[i] += n
            self.samples += samples
            self.count += count
            self.total += total
            if high is not None and (self.max is None or high > self.max):
                self.max = high
            if low is not None and (self.min is None or low < self.min):
                self.min = low

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def buckets(self) -> list[tuple[int, int, int]]:
        """The non-empty buckets as (low, high, count): values in ``[low, high)`` microseconds."""
        with self._lock:
            counts = list(self._counts)
        return [(*_bucket_range(index), n) for index, n in enumerate(counts) if n]

    def percentile(self, percent: float) -> float | None:
        """The value below which `percent` % of the recorded values lie (None when empty)."""
        with self._lock:
            if not self.count:
                return None
            rank = max(1, math.ceil(self.count * percent / 100.0))
            seen = 0
            for index, n in enumerate(self._counts):
                seen += n
                if seen >= rank:
                    low, high = _bucket_range(index)
                    middle = (low + high - 1) / 2
                    assert self.min is not None and self.max is not None
                    return float(min(max(middle, self.min), self.max))
        return float(self.max) if self.max is not None else None  # pragma: no cover (counts add up)

    def summary_ms(self) -> dict[str, float | None]:
        """avg, p50, p95, p99, p99_9 and max in milliseconds (None when nothing was recorded)."""
        result: dict[str, float | None] = {"avg": _ms(self.mean)}
        for name, percent in PERCENTILES:
            result[name] = _ms(self.percentile(percent))
        result["max"] = _ms(self.max)
        return result


@dataclass(frozen=True)
class LatencySummary:
    """A histogram's figures in milliseconds (None when nothing was recorded), and how many values
    were recorded (`samples`: each may stand for several records)."""

    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p99_9_ms: float | None
    max_ms: float | None
    samples: int

    @classmethod
    def of(cls, histogram: LatencyHistogram) -> LatencySummary:
        figures = histogram.summary_ms()
        return cls(**{f"{name}_ms": value for name, value in figures.items()}, samples=histogram.samples)

    def fields(self) -> dict[str, Any]:
        """`latency_avg_ms`, `latency_p50_ms`, ... `latency_max_ms`, `latency_samples`: the summary
        keys of `kctl perf`, in that order."""
        return {
            "latency_avg_ms": self.avg_ms,
            "latency_p50_ms": self.p50_ms,
            "latency_p95_ms": self.p95_ms,
            "latency_p99_ms": self.p99_ms,
            "latency_p99_9_ms": self.p99_9_ms,
            "latency_max_ms": self.max_ms,
            "latency_samples": self.samples,
        }


def _ms(value_us: float | None) -> float | None:
    return None if value_us is None else round(value_us / 1000.0, 3)


class IntervalStats:
    """Records, bytes and latency (weighted avg, max) of one progress interval; `take()` returns
    them and starts the next interval. Latency may be added from other threads."""

    __slots__ = ("_lock", "bytes", "latency_count", "latency_max", "latency_total", "records", "started")

    def __init__(self, started: float) -> None:
        self._lock = threading.Lock()
        self.started = started
        self.records = 0
        self.bytes = 0
        self.latency_count = 0
        self.latency_total = 0
        self.latency_max: int | None = None

    def add_latency(self, value_us: int, weight: int = 1) -> None:
        value = max(int(value_us), 0)
        with self._lock:
            self.latency_count += weight
            self.latency_total += value * weight
            if self.latency_max is None or value > self.latency_max:
                self.latency_max = value

    def take(self, now: float) -> Interval:
        with self._lock:
            interval = Interval(
                seconds=max(now - self.started, 1e-9),
                records=self.records,
                bytes=self.bytes,
                latency_avg_ms=(
                    self.latency_total / self.latency_count / 1000.0 if self.latency_count else None
                ),
                latency_max_ms=self.latency_max / 1000.0 if self.latency_max is not None else None,
            )
            self.started = now
            self.records = self.bytes = self.latency_count = self.latency_total = 0
            self.latency_max = None
        return interval


@dataclass(frozen=True)
class Interval:
    """One progress interval's figures."""

    seconds: float
    records: int
    bytes: int
    latency_avg_ms: float | None = None
    latency_max_ms: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds


class Sampler:
    """Which records to measure: `every` = 1 measures each record; `every` = k > 1 measures one
    random record in about k (gaps uniform in 1..2k-1, mean k), each standing for k records.

    With `adaptive`, `adapt(rate)` re-picks k as the power of two that keeps the measured records
    near `target` per second at the observed `rate` (records/s). Weighting each sample by the k in
    force when it was picked keeps the histogram an unbiased estimate of every record's latency."""

    __slots__ = ("adaptive", "every", "next", "rng", "target")

    def __init__(
        self, every: int = 1, *, adaptive: bool = False, target: float = 4096.0, seed: int | None = None
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.every = every
        self.adaptive = adaptive
        self.target = target
        self.rng = random.Random(seed)
        self.next = 0  # the index of the next record to measure

    @classmethod
    def measuring(cls, every: int | None, expected_rate: float = 500_000.0) -> Sampler:
        """One record in about `every`, or with None adaptive: starting as sparse as `expected_rate`
        (records/s, e.g. a throughput cap) needs, until the first rate is observed."""
        if every is not None:
            return cls(every)
        sampler = cls(1, adaptive=True)
        sampler.adapt(expected_rate)
        return sampler

    def pick(self, index: int) -> None:
        """Choose the next record to measure after `index` (the one just measured)."""
        k = self.every
        self.next = index + (1 if k == 1 else self.rng.randint(1, 2 * k - 1))

    def adapt(self, rate: float) -> None:
        if not self.adaptive or rate <= 0:
            return
        wanted = max(1, math.ceil(rate / self.target))
        self.every = 1 << (wanted - 1).bit_length()
