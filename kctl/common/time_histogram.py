"""A time histogram cheap enough for hot paths: fixed bucket bounds (milliseconds, shared by every
kctl histogram so dashboards compare them), per-bucket counts and a sum, updated with one bisect and
no lock (each histogram is updated from one thread, or tolerates a lost increment), turned into
Prometheus' cumulative buckets only when scraped."""

from __future__ import annotations

from bisect import bisect_left

#: bucket bounds, in milliseconds (upper bounds; +Inf is added)
TIME_BUCKETS_MS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
    10000.0, 30000.0,
)  # fmt: skip
#: the same in seconds: what is compared with measured times (no conversion per observation)
TIME_BUCKETS_S: tuple[float, ...] = tuple(bound / 1000 for bound in TIME_BUCKETS_MS)
BUCKETS = len(TIME_BUCKETS_MS) + 1


def cumulative(counts: list[int]) -> list[tuple[str, float]]:
    """prometheus_client's bucket list of one histogram's per-bucket ``counts``: (upper bound in ms,
    cumulative count), ending with +Inf."""
    buckets: list[tuple[str, float]] = []
    total = 0
    for bound, count in zip((*TIME_BUCKETS_MS, float("inf")), counts, strict=True):
        total += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(total)))
    return buckets


class TimeHistogram:
    """Observed durations (seconds) in the TIME_BUCKETS_MS buckets, and their sum."""

    __slots__ = ("counts", "sum_s")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(TIME_BUCKETS_S, seconds)] += 1
        self.sum_s += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)
