"""The producer load generator of `kctl perf produce`: send one payload as fast as allowed, pace
it, measure latency on a sample, and collect the outcome of every record.

How it measures, and why:

- Records are sent with `Producer.send` in chunks; with a throughput limit a token bucket grants
  each chunk, so the pacing costs a clock read per chunk, not a sleep per record.
- Latency is send -> acknowledgement (monotonic clock), taken by a done-callback on the record's
  future. A per-record callback costs the Python producer more than the send itself, so by default
  only a random sample of records carries one (every record below about 4,000 records/s, then
  about 4,000 per second), each sample weighted by how many records it stands for (`Sampler`).
- Delivery is checked for every record: the futures wait in send order and are collected as they
  complete, so the failed count is exact.
"""

from __future__ import annotations

import collections
import functools
import math
import time
from dataclasses import dataclass
from typing import Any

from kctl.client import KafkaError
from kctl.client.producer import Producer, ProducerClosedError, ProducerConfig, RecordFuture
from kctl.perf.run import TICK, Figures, Interrupts, Progress, monotonic
from kctl.perf.stats import MB, IntervalStats, LatencyHistogram, LatencySummary, Sampler
from kctl.perf.workload import TokenBucket, Warmup

CHUNK = 256
"""Records sent between two looks at the clock (progress, end of run, pacing)."""
INTERRUPT_FLUSH = 5.0
"""After Ctrl-C, how long the records on their way may take to be acknowledged (a second Ctrl-C
stops waiting)."""
METADATA_TIMEOUT = 15.0
"""How long the producer may wait for the topic's partitions and leaders before the run starts."""


def _number(value: float | None) -> float | int | None:
    """A float that holds a whole number as an int (`--throughput 1000` shows as 1000)."""
    return int(value) if value is not None and float(value).is_integer() else value


@dataclass(frozen=True)
class ProduceSummary:
    """What a produce run achieved (records and bytes acknowledged after the warm-up, over the time
    from the first measured send to the last acknowledgement) and the settings it ran with."""

    topic: str
    records: int
    failed: int
    elapsed_s: float
    records_per_s: float
    mb_per_s: float
    bytes: int
    latency: LatencySummary
    warmup_records: int
    record_size: int
    keys: int
    key_size: int
    acks: str | int
    compression: str
    throughput_limit: float | int | None
    interrupted: bool
    aborted: int = 0
    """Records not acknowledged when an interrupted run gave up waiting."""

    def as_dict(self) -> dict[str, Any]:
        """The flat summary `kctl perf produce` prints, keys in order (`aborted` only when some were)."""
        summary: dict[str, Any] = {
            "topic": self.topic,
            "records": self.records,
            "failed": self.failed,
            "elapsed_s": self.elapsed_s,
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "bytes": self.bytes,
            **self.latency.fields(),
            "warmup_records": self.warmup_records,
            "record_size": self.record_size,
            "keys": self.keys,
            "key_size": self.key_size,
            "acks": self.acks,
            "compression": self.compression,
            "throughput_limit": self.throughput_limit,
            "interrupted": self.interrupted,
        }
        if self.aborted:
            summary["aborted"] = self.aborted
        return summary


class ProduceRun:
    """One `kctl perf produce` run: send, pace, measure, collect the outcome of every record."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        payload: bytes,
        keys: list[bytes],
        *,
        num_records: int | None,
        duration: float | None,
        throughput: float | None,
        warmup: Warmup,
        sampler: Sampler,
        progress: Progress,
        interrupts: Interrupts,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.payload = payload
        self.keys = keys
        self.record_bytes = len(payload) + (len(keys[0]) if keys else 0)
        self.num_records = num_records
        self.duration = duration
        self.throughput = throughput
        self.warmup = warmup
        self.sampler = sampler
        self.progress = progress
        self.interrupts = interrupts

        self.pending: collections.deque[RecordFuture] = collections.deque()
        self.histogram = LatencyHistogram()  # measured records only
        self.stats = IntervalStats(0.0)  # every record, warm-up included
        self.sent = 0
        self.collected = 0  # futures taken from `pending` (in send order)
        self.in_warmup = not warmup.none
        self.warmup_sent = 0  # final once the warm-up is over
        self.failed_warmup = 0
        self.failed_measured = 0
        self.aborted = 0  # not acknowledged when an interrupted run gave up waiting
        self.aborted_warmup = 0
        self.send_error: KafkaError | None = None  # send refused (e.g. buffer full for max.block.ms)
        self.errors: collections.Counter[str] = collections.Counter()
        self.started = 0.0
        self.measure_start = 0.0
        self.finished = 0.0
        self.interrupted = False

    # the outcome of records ----------------------------------------------------------------------
    def _on_sample(self, sent_at: float, weight: int, warm: bool, future: RecordFuture) -> None:
        """Done-callback of a sampled record (on the producer's I/O thread)."""
        latency_us = int((monotonic() - sent_at) * 1_000_000)
        if future.exception() is not None:
            return  # counted by `collect`
        self.stats.add_latency(latency_us, weight)
        if not warm:
            self.histogram.record(latency_us, weight)

    def collect(self) -> None:
        """Take the completed futures at the head of `pending` and count their outcomes."""
        pending = self.pending
        taken = 0
        failed = 0
        while pending:
            try:  # one look under the producer's lock: done or not, and the error
                error = pending[0].exception(0)
            except TimeoutError:
                break
            pending.popleft()
            if error is not None:
                failed += 1
                self._failure(self.collected + taken, error)
            taken += 1
        if taken:
            self.collected += taken
            delivered = taken - failed
            self.stats.records += delivered
            self.stats.bytes += delivered * self.record_bytes

    def _failure(self, index: int, error: BaseException) -> None:
        warm = self.in_warmup or index < self.warmup_sent
        if self.interrupted and isinstance(error, ProducerClosedError):
            self.aborted += 1  # given up on after Ctrl-C: not a delivery failure
            self.aborted_warmup += warm
            return
        if warm:
            self.failed_warmup += 1
        else:
            self.failed_measured += 1
        self.errors[str(error)] += 1

    @property
    def failed(self) -> int:
        return self.failed_warmup + self.failed_measured

    @property
    def delivered(self) -> int:
        """Records acknowledged so far, warm-up included."""
        return self.collected - self.failed - self.aborted

    @property
    def measured(self) -> int:
        """Records acknowledged so far that were sent after the warm-up."""
        warm_done = min(self.collected, self.warmup_sent) - self.failed_warmup - self.aborted_warmup
        return self.delivered - (warm_done if not self.in_warmup else self.delivered)

    # the run -------------------------------------------------------------------------------------
    def _end_warmup(self, now: float, sent: int) -> None:
        self.in_warmup = False
        self.warmup_sent = sent
        self.measure_start = now

    def _tick(self, now: float) -> None:
        self.collect()
        if self.in_warmup:
            records, since = self.delivered, self.started
        else:
            records, since = self.measured, self.measure_start
        rate = records / max(now - since, 1e-9)
        mean = self.histogram.mean
        latency_ms = mean / 1000.0 if mean is not None else None
        figures = Figures(self.delivered, rate, rate * self.record_bytes / MB, latency_ms, self.in_warmup)
        self.progress.tick(now, self.stats, figures)

    def run(self) -> None:
        bucket = TokenBucket(self.throughput) if self.throughput else None
        self.started = now = monotonic()
        self.measure_start = now
        self.progress.start(now, warmup=self.in_warmup)
        self.stats.started = now
        deadline = now + self.duration if self.duration is not None else math.inf
        warmup_end = now + self.warmup.seconds if self.warmup.seconds else math.inf
        try:
            self.sent = self._send_loop(deadline, warmup_end, bucket)
        except KafkaError as error:  # send refused: stop sending, report what was sent
            self.send_error = error
            self.sent = self.collected + len(self.pending)
        if self.in_warmup:  # the run ended within the warm-up: nothing measured
            self._end_warmup(monotonic(), self.sent)
        self._drain()

    def _send_loop(self, deadline: float, warmup_end: float, bucket: TokenBucket | None) -> int:
        producer, topic, payload, keys = self.producer, self.topic, self.payload, self.keys
        send = producer.send
        append = self.pending.append
        sampler = self.sampler
        interrupts = self.interrupts
        key_count = len(keys)
        num_records = self.num_records
        warmup_records = self.warmup.records
        next_tick = self.started + TICK
        last_rate_at, last_rate_sent = self.started, 0
        i = 0
        while True:
            now = monotonic()
            if interrupts.stop:
                self.interrupted = True
                break
            if (num_records is not None and i >= num_records) or now >= deadline:
                break
            if self.in_warmup and (i >= warmup_records if warmup_records else now >= warmup_end):
                self._end_warmup(now, i)
            if now >= next_tick:
                self.sent = i
                self._tick(now)
                if now - last_rate_at >= 0.25:
                    sampler.adapt((i - last_rate_sent) / (now - last_rate_at))
                    last_rate_at, last_rate_sent = now, i
                next_tick = now + TICK
            count = CHUNK
            if num_records is not None:
                count = min(count, num_records - i)
            if self.in_warmup and warmup_records:
                count = min(count, warmup_records - i)
            if bucket is not None:
                count = bucket.take(count)
                if not count:
                    time.sleep(min(bucket.wait(), TICK, max(deadline - now, 0.0)))
                    continue
            end = i + count
            while i < end:
                key = keys[i % key_count] if key_count else None
                if i == sampler.next:
                    sent_at = monotonic()
                    future = send(topic, payload, key)
                    weight, warm = sampler.every, self.in_warmup
                    future.add_done_callback(functools.partial(self._on_sample, sent_at, weight, warm))
                    sampler.pick(i)
                else:
                    future = send(topic, payload, key)
                append(future)
                i += 1
            self.sent = i
        return i

    def _drain(self) -> None:
        """Wait until every record sent is acknowledged or failed (after Ctrl-C: for a while)."""
        wait_until = math.inf
        while True:
            if self.interrupts.stop and not self.interrupted:
                self.interrupted = True
            if self.interrupted and wait_until == math.inf:
                wait_until = monotonic() + INTERRUPT_FLUSH
            remaining = self.producer.flush(TICK)
            now = monotonic()
            self._tick(now)
            if not remaining:
                break
            if self.interrupts.abort or now >= wait_until:
                break
        self.finished = monotonic()
        self.collect()
        if self.pending:  # given up waiting (interrupted): closing fails them
            self.producer.close(timeout=0)
            self.collect()

    def summary(self, config: ProducerConfig, record_size: int) -> ProduceSummary:
        """The run's figures (so far, if it still runs) and its settings."""
        measured = self.measured
        elapsed = max(self.finished - self.measure_start, 1e-9)
        rate = measured / elapsed if measured else 0.0
        return ProduceSummary(
            topic=self.topic,
            records=measured,
            failed=self.failed,
            elapsed_s=round(elapsed, 3),
            records_per_s=round(rate, 1),
            mb_per_s=round(rate * self.record_bytes / MB, 3),
            bytes=measured * self.record_bytes,
            latency=LatencySummary.of(self.histogram),
            warmup_records=self.warmup_sent,
            record_size=record_size,
            keys=len(self.keys),
            key_size=len(self.keys[0]) if self.keys else 0,
            acks="all" if config.acks == -1 else config.acks,
            compression=config.compression_type,
            throughput_limit=_number(self.throughput),
            interrupted=self.interrupted,
            aborted=self.aborted,
        )

    def failure_message(self) -> str | None:
        """`N of M records failed delivery ...; most often: <error>`, or None when none failed."""
        if not self.failed:
            return None
        first, _ = self.errors.most_common(1)[0]
        kinds = f" ({len(self.errors)} kinds of error)" if len(self.errors) > 1 else ""
        return f"{self.failed} of {self.sent} records failed delivery{kinds}; most often: {first}"
