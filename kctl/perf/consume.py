"""The consumer load generator of `kctl perf consume`: read assigned partitions as fast as
possible up to their ends (or a count, a time, an idle timeout), count records and key + value
bytes, and optionally measure record ages (now - record timestamp) on a sample of the records."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kctl.client import TopicPartition
from kctl.client.consumer import Consumer, ConsumerRecord
from kctl.client.offsets_spec import OffsetPoint, OffsetRange, OffsetSpec, parse_offset_point
from kctl.perf.run import TICK, Figures, Interrupts, Progress, monotonic
from kctl.perf.stats import MB, IntervalStats, LatencyHistogram, LatencySummary, Sampler


def default_end(spec: OffsetSpec, num_records: int | None, seconds: float | None) -> OffsetPoint | None:
    """Where a run without a count, a time or a range END stops: the end offsets the partitions
    have when it starts (what they hold now); None when something else ends it."""
    if spec.end is None and num_records is None and seconds is None:
        return parse_offset_point("end")
    return None


def records_expected(ranges: dict[TopicPartition, OffsetRange], num_records: int | None) -> int | None:
    """How many records the run will read when that is known (every partition has an end, or a
    count was asked for): the progress display's total."""
    total = None
    if all(r.stop is not None for r in ranges.values()):
        total = sum(max(r.stop - r.start, 0) for r in ranges.values() if r.stop is not None)
        if num_records is not None:
            total = min(total, num_records)
    elif num_records is not None:
        total = num_records
    return total


@dataclass(frozen=True)
class ConsumeSummary:
    """What a consume run read: records and key + value bytes from the first fetch to the last
    record, how long the first record took, and with latency the record ages."""

    topics: tuple[str, ...]
    partitions: int
    records: int
    elapsed_s: float
    records_per_s: float
    mb_per_s: float
    bytes: int
    first_record_ms: float | None
    latency: LatencySummary | None
    interrupted: bool

    def as_dict(self) -> dict[str, Any]:
        """The flat summary `kctl perf consume` prints, keys in order."""
        return {
            "topics": ",".join(self.topics),
            "partitions": self.partitions,
            "records": self.records,
            "elapsed_s": self.elapsed_s,
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "bytes": self.bytes,
            "first_record_ms": self.first_record_ms,
            **(self.latency.fields() if self.latency is not None else {}),
            "interrupted": self.interrupted,
        }


class ConsumeRun:
    """One `kctl perf consume` run: poll, count records and bytes, optionally sample record ages."""

    def __init__(
        self,
        consumer: Consumer,
        ranges: dict[TopicPartition, OffsetRange],
        *,
        num_records: int | None,
        duration: float | None,
        idle_timeout: float | None,
        latency: bool,
        sampler: Sampler,
        progress: Progress,
        interrupts: Interrupts,
    ) -> None:
        self.consumer = consumer
        self.num_records = num_records
        self.duration = duration
        self.idle_timeout = idle_timeout
        self.sampler = sampler
        self.progress = progress
        self.interrupts = interrupts
        self.histogram = LatencyHistogram() if latency else None
        self.stats = IntervalStats(0.0)
        self.stops = {tp: r.stop for tp, r in ranges.items() if r.stop is not None}
        self.done: set[TopicPartition] = {tp for tp, stop in self.stops.items() if ranges[tp].start >= stop}
        self.bounded = len(self.stops) == len(ranges)  # every partition has an end
        self.records = 0
        self.bytes = 0
        self.started = 0.0
        self.first_record = 0.0
        self.last_record = 0.0
        self.interrupted = False
        self.idle = False  # ended because nothing came for idle_timeout

    def _finished(self) -> bool:
        if self.num_records is not None and self.records >= self.num_records:
            return True
        return self.num_records is None and self.bounded and len(self.done) >= len(self.stops)

    def _trim(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """Drop the records at or past their partition's end, and pause the partitions that got
        there (or whose position did, over gaps); only partitions with an end are looked at."""
        consumer, stops, done = self.consumer, self.stops, self.done
        ended = [tp for tp, stop in stops.items() if tp not in done and consumer.position(tp) >= stop]
        if not ended:
            return records
        done.update(ended)
        consumer.pause(ended)
        kept = []
        for record in records:
            stop = stops.get(TopicPartition(record.topic, record.partition))
            if stop is None or record.offset < stop:
                kept.append(record)
        return kept

    def _tick(self, now: float) -> None:
        elapsed = max((self.last_record or now) - self.started, 1e-9)
        rate = self.records / elapsed
        latency_ms = (
            self.histogram.mean / 1000.0
            if self.histogram is not None and self.histogram.mean is not None
            else None
        )
        figures = Figures(self.records, rate, self.bytes / MB / elapsed, latency_ms)
        self.progress.tick(now, self.stats, figures)

    def run(self) -> None:
        consumer, sampler, stats, histogram = self.consumer, self.sampler, self.stats, self.histogram
        self.started = now = monotonic()
        self.progress.start(now)
        stats.started = now
        deadline = now + self.duration if self.duration is not None else math.inf
        idle_since = now
        next_tick = now + TICK
        last_rate_at, last_rate_count = now, 0
        if self.done:
            consumer.pause(list(self.done))
        while not self._finished():
            if self.interrupts.stop:
                self.interrupted = True
                break
            now = monotonic()
            if now >= deadline:
                break
            if self.idle_timeout is not None and now - idle_since >= self.idle_timeout:
                self.idle = True
                break
            if now >= next_tick:
                self._tick(now)
                if now - last_rate_at >= 0.25:
                    sampler.adapt((self.records - last_rate_count) / (now - last_rate_at))
                    last_rate_at, last_rate_count = now, self.records
                next_tick = now + TICK
            records = consumer.poll(max(min(0.25, deadline - now), 0.0))
            if self.stops:
                records = self._trim(records)
            if not records:
                continue
            now = monotonic()
            idle_since = now
            if self.num_records is not None and self.records + len(records) > self.num_records:
                records = records[: self.num_records - self.records]
            size = 0
            for record in records:
                value, key = record.value, record.key
                if value is not None:
                    size += len(value)
                if key is not None:
                    size += len(key)
            count = len(records)
            if histogram is not None:
                k = sampler.every
                now_ms = time.time() * 1000.0
                start = sampler.rng.randrange(k) if k > 1 else 0
                for index in range(start, count, k):
                    age_us = int((now_ms - records[index].timestamp) * 1000)
                    histogram.record(age_us, k)
                    stats.add_latency(age_us, k)
            if not self.records:
                self.first_record = now
            self.records += count
            self.bytes += size
            stats.records += count
            stats.bytes += size
            self.last_record = now
        self._tick(monotonic())

    def summary(self, topics: Sequence[str], partitions: int) -> ConsumeSummary:
        """The run's figures (so far, if it still runs)."""
        end = self.last_record if self.records else monotonic()
        elapsed = max(end - self.started, 1e-9)
        rate = self.records / elapsed if self.records else 0.0
        return ConsumeSummary(
            topics=tuple(topics),
            partitions=partitions,
            records=self.records,
            elapsed_s=round(elapsed, 3),
            records_per_s=round(rate, 1),
            mb_per_s=round(self.bytes / MB / elapsed, 3),
            bytes=self.bytes,
            first_record_ms=round((self.first_record - self.started) * 1000, 1) if self.records else None,
            latency=LatencySummary.of(self.histogram) if self.histogram is not None else None,
            interrupted=self.interrupted,
        )
