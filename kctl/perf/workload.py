"""What the load generators send and how fast: the pacing of sends, the payloads and keys, and the
durations and warm-up the runs are given. Pure Python, no I/O.

- `TokenBucket`: paces sends to a rate without a sleep per record: tokens accrue continuously up to
  a burst of 50 ms worth (a stall of the sender that long is made up for), the sender takes them in
  chunks and sleeps only when the bucket is empty.
- `parse_duration`, `parse_warmup`: `30s`, `500ms`, `1h30m`; a warm-up of N records or a duration.
- `make_payload`, `make_keys`: the value every record carries and the keys they take in turn.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass


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
