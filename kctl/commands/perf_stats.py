"""The measuring instruments of `kctl perf`: a latency histogram, throughput pacing, sampling, and
the parsing and formatting of the numbers. Pure Python, no I/O, no client: unit-testable on its own.

- `LatencyHistogram`: HDR-style log-linear buckets of microseconds, fixed memory (about 3,300
  counters up to an hour) and a relative error below 1/128 (0.8 %) for any recorded value, with
  weighted recording (a sampled value stands for `weight` records).
- `IntervalStats`: what one progress interval saw (records, bytes, latency avg and max).
- `TokenBucket`: paces sends to a rate without a sleep per record: tokens accrue continuously up to
  a burst of 50 ms worth (a stall of the sender that long is made up for), the sender takes them in
  chunks and sleeps only when the bucket is empty.
- `Sampler`: picks which records get their latency measured: every record, or a random record about
  every `k`-th (the histogram weights it by `k`, so the figures stay per-record estimates), with `k`
  adapted to the achieved rate so that measuring never costs more than a few thousand callbacks per
  second.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

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


class TokenBucket:
    """`rate` tokens per second, at most `burst` kept (default: 50 ms worth, at least 1).

    `take(n)` returns how many of `n` wanted tokens are available now (0 to n) and consumes them;
    `wait()` is how long until the next token. A sender that sends what `take` grants and sleeps
    `wait()` when it grants nothing keeps to `rate` on average, in bursts of at most `burst`."""

    def __init__(
        self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.rate = float(rate)
        self.burst = max(1.0, burst if burst is not None else self.rate * 0.05)
        self.clock = clock
        self.tokens = 1.0  # the first record goes at once; the rest accrue
        self.updated = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def take(self, wanted: int) -> int:
        self._refill()
        granted = min(int(self.tokens), wanted)
        if granted > 0:
            self.tokens -= granted
        return max(granted, 0)

    def wait(self) -> float:
        """Seconds until one token is available (0 when one is)."""
        self._refill()
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


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

    def pick(self, index: int) -> None:
        """Choose the next record to measure after `index` (the one just measured)."""
        k = self.every
        self.next = index + (1 if k == 1 else self.rng.randint(1, 2 * k - 1))

    def adapt(self, rate: float) -> None:
        if not self.adaptive or rate <= 0:
            return
        wanted = max(1, math.ceil(rate / self.target))
        self.every = 1 << (wanted - 1).bit_length()


# -- parsing -----------------------------------------------------------------------------------------
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(ms|s|m|h|d))", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds from `30s`, `1.5s`, `500ms`, `5m`, `1h30m`, `2d`, or a bare number of seconds.

    Raises ValueError with a message for anything else (or a negative value)."""
    value = text.strip().lower()
    if not value:
        raise ValueError("expected a duration such as 30s, 500ms, 5m or 1h30m, got an empty value")
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"expected a non-negative duration, got {text!r}")
        return seconds
    position = 0
    total = 0.0
    for match in _DURATION.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(value) or position == 0:
        raise ValueError(f"expected a duration such as 30s, 500ms, 5m or 1h30m, got {text!r}")
    return total


@dataclass(frozen=True)
class Warmup:
    """The warm-up: the first `records` records, or the first `seconds` seconds (one of them)."""

    records: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        if self.seconds:
            return f"{self.seconds:g}s"
        return f"{self.records} records"

    @property
    def none(self) -> bool:
        return not self.records and not self.seconds


def parse_warmup(text: str) -> Warmup:
    """`--warmup`: a record count (`10000`) or a duration with a unit (`5s`, `500ms`, `1m`)."""
    value = text.strip()
    if value.isdigit():
        return Warmup(records=int(value))
    try:
        return Warmup(seconds=parse_duration(value))
    except ValueError:
        raise ValueError(
            f"expected a number of records (10000) or a duration with a unit (5s, 1m), got {text!r}"
        ) from None


# -- payloads ----------------------------------------------------------------------------------------
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def make_payload(size: int, seed: int | None = None) -> bytes:
    """`size` random letters and digits, generated once (compressible about as much as text, like the
    random uppercase payload of kafka-producer-perf-test.sh)."""
    rng = random.Random(seed)
    return bytes(rng.choice(_ALPHABET) for _ in range(size))


def make_keys(count: int, size: int | None) -> list[bytes]:
    """`count` distinct keys: zero-padded decimal numbers, `size` bytes each (default: the width of
    the largest). Raises ValueError when `size` is too small for `count` distinct keys."""
    width = len(str(max(count - 1, 0)))
    if size is None:
        size = width
    if size < width:
        raise ValueError(f"{count} distinct keys need at least {width} bytes each, not {size}")
    return [str(i).zfill(size).encode("ascii") for i in range(count)]


# -- formatting --------------------------------------------------------------------------------------
def human_count(value: float) -> str:
    """`950`, `12.3k`, `4.56M`: a count or rate for the live display."""
    magnitude = abs(value)
    if magnitude >= 1e9:
        return f"{value / 1e9:.2f}G"
    if magnitude >= 1e6:
        return f"{value / 1e6:.2f}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def interval_line(elapsed: float, interval: Interval, *, latency: bool, warmup: bool = False) -> str:
    """One progress line, in the manner of Kafka's perf tools::

    5.0s: 1000234 records, 200046.8 records/s (19.08 MB/s), latency avg 3.21 ms, max 45.02 ms
    """
    line = (
        f"{elapsed:.1f}s: {interval.records} records, {interval.records_per_s:.1f} records/s "
        f"({interval.mb_per_s:.2f} MB/s)"
    )
    if latency:
        if interval.latency_avg_ms is None or interval.latency_max_ms is None:
            line += ", latency avg - ms, max - ms"
        else:
            line += f", latency avg {interval.latency_avg_ms:.2f} ms, max {interval.latency_max_ms:.2f} ms"
    if warmup:
        line += " (warm-up)"
    return line
