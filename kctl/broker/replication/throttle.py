"""Replication throttling, as Kafka's ``ReplicationQuotaManager`` does it: a byte-rate quota per
broker and direction (``leader.replication.throttled.rate``: bytes the leader sends to followers;
``follower.replication.throttled.rate``: bytes a follower fetches), applied only to the replicas
named in their topic's ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` (``partition:broker`` entries, or ``*``).

The rate is measured over a sliding window of one-second samples (Kafka's 11 × 1 s); while it is
above the limit, the leader answers a throttled follower's fetch of that partition with no records
and the follower leaves its throttled partitions out of its next fetches, so copying goes at the
limit on average. Unthrottled replicas are never held back, and their bytes are not counted.
Self-contained: the rate limit is read from a callable on every check, so a dynamic config change
applies at once. Each quota counts what it held back (``throttled_fetches``) and logs it at most
once per window, the observable the reassignment tests read.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("kctl.broker.replication")

UNLIMITED = 2**63 - 1
SAMPLES = 11
WINDOW_S = 1.0


def is_throttled(throttled_replicas: Sequence[str], partition: int, broker_id: int) -> bool:
    """Whether ``partition:broker_id`` is named by a ``*.replication.throttled.replicas`` value."""
    if not throttled_replicas:
        return False
    return throttled_replicas[0] == "*" or f"{partition}:{broker_id}" in throttled_replicas


class ReplicationQuota:
    """One direction's byte-rate quota (see the module docstring). ``rate()`` is the limit in bytes
    per second (``UNLIMITED``: none); ``clock`` is monotonic seconds."""

    def __init__(
        self, name: str, rate: Callable[[], int], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self._rate = rate
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()  # (window start, bytes)
        self.throttled_fetches = 0
        self.bytes_recorded = 0
        self._logged_at = 0.0

    @property
    def limited(self) -> bool:
        return self._rate() < UNLIMITED

    def _expire(self, now: float) -> None:
        horizon = now - SAMPLES * WINDOW_S
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    def record(self, size: int) -> None:
        """Count ``size`` bytes of throttled replication."""
        if size <= 0:
            return
        now = self._clock()
        self._expire(now)
        self.bytes_recorded += size
        if self._samples and now - self._samples[-1][0] < WINDOW_S:
            start, total = self._samples[-1]
            self._samples[-1] = (start, total + size)
        else:
            self._samples.append((now, size))

    def observed_rate(self) -> float:
        """Bytes per second over the samples kept (at least one window's span)."""
        now = self._clock()
        self._expire(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], WINDOW_S)
        return sum(size for _, size in self._samples) / elapsed

    def exceeded(self) -> bool:
        """Whether throttled replication is above the limit now."""
        rate = self._rate()
        return rate < UNLIMITED and self.observed_rate() > rate

    def hold_back(self, what: str) -> None:
        """Note one fetch held back by this quota (logged at most once per window)."""
        self.throttled_fetches += 1
        now = self._clock()
        if now - self._logged_at >= WINDOW_S:
            self._logged_at = now
            log.info(
                "replication throttle (%s): held back %s; %.0f B/s observed, limit %d B/s, "
                "%d fetches held back, %d bytes copied so far",
                self.name,
                what,
                self.observed_rate(),
                self._rate(),
                self.throttled_fetches,
                self.bytes_recorded,
            )

    def wait_s(self) -> float:
        """How long to wait before throttled replication may go on (at most one window)."""
        rate = self._rate()
        if rate >= UNLIMITED or rate <= 0:
            return WINDOW_S
        now = self._clock()
        self._expire(now)
        if not self._samples:
            return 0.0
        total = sum(size for _, size in self._samples)
        # the window's rate falls below the limit once total / elapsed <= rate
        needed = total / rate - max(now - self._samples[0][0], WINDOW_S)
        return min(max(needed, 0.01), WINDOW_S)


def _leader_throttled(partition: Any, follower_id: int) -> bool:
    replicas = partition.log.config.leader_replication_throttled_replicas
    return is_throttled(replicas, partition.topic_partition.partition, follower_id)


def leader_throttles(quota: ReplicationQuota, partition: Any, follower_id: int) -> bool:
    """The leader's check on a follower's fetch of ``partition`` (a hosted Partition): answer it
    without records (Kafka's ``shouldLeaderThrottle``); counted and logged when it does."""
    if not quota.limited or not _leader_throttled(partition, follower_id) or not quota.exceeded():
        return False
    quota.hold_back(f"{partition.topic_partition} for broker {follower_id}")
    return True


def record_leader_bytes(quota: ReplicationQuota, partition: Any, follower_id: int, size: int) -> None:
    """Count the bytes the leader sends a throttled follower."""
    if quota.limited and _leader_throttled(partition, follower_id):
        quota.record(size)
