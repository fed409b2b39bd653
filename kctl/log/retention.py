"""Retention rules: which whole segments, oldest first, are deleted by age (``retention.ms``), by total
size (``retention.bytes``) and by the log start offset. Pure planning over segment summaries, shared by
the broker's retention task and ``kctl log purge``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BY_START_OFFSET = "log-start-offset"
BY_TIME = "retention.ms"
BY_SIZE = "retention.bytes"


@dataclass(frozen=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int  # -1 when the segment has no timestamps
    modified_ms: int
    is_active: bool

    @property
    def largest_timestamp(self) -> int:
        """What age retention compares: the max record timestamp, else the file's modification time."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.modified_ms


@dataclass(frozen=True)
class RetentionDecision:
    base_offset: int
    next_offset: int
    size: int
    reason: str  # BY_START_OFFSET | BY_TIME | BY_SIZE
    detail: str


def plan_retention(
    segments: Sequence[SegmentSummary],
    *,
    now_ms: int,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    log_start_offset: int = 0,
) -> list[RetentionDecision]:
    """Segments to delete, oldest first. Each rule deletes a prefix of the log; an empty active segment
    is never deleted (there is nothing in it), a non-empty one may be (the log rolls first)."""
    decisions: list[RetentionDecision] = []
    remaining = [segment for segment in segments]

    def take(reason: str, detail: str) -> None:
        segment = remaining.pop(0)
        decisions.append(
            RetentionDecision(segment.base_offset, segment.next_offset, segment.size, reason, detail)
        )

    # 1. Everything below the log start offset (DeleteRecords, purge --before-offset).
    while remaining and remaining[0].size and remaining[0].next_offset <= log_start_offset:
        first, last = remaining[0].base_offset, remaining[0].next_offset - 1
        take(BY_START_OFFSET, f"every offset in it ({first}..{last}) is below {log_start_offset}")
    # 2. Age.
    if retention_ms >= 0:
        cutoff = now_ms - retention_ms
        while remaining and remaining[0].size and remaining[0].largest_timestamp < cutoff:
            age = now_ms - remaining[0].largest_timestamp
            take(BY_TIME, f"newest record is {age} ms old (retention.ms={retention_ms})")
    # 3. Total size.
    if retention_bytes >= 0:
        excess = sum(segment.size for segment in remaining) - retention_bytes
        while remaining and remaining[0].size and excess - remaining[0].size >= 0:
            excess -= remaining[0].size
            take(
                BY_SIZE,
                f"log is {excess + remaining[0].size if remaining else excess} bytes over "
                f"retention.bytes={retention_bytes}",
            )
    return decisions
