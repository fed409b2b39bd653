"""`kctl perf produce|consume`: measure throughput and latency against a running cluster, like
Kafka's kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

Both commands print progress on stderr every `--interval` (a live display when stderr is a
terminal, one plain line per interval otherwise) and a summary on stdout at the end: a KEY/VALUE
table, or one JSON object with `--format json|jsonl`. The instruments (histogram, pacing,
sampling) are in `kctl.commands.perf_stats`.

How the producer side measures, and why:

- Records are sent with `Producer.send` in chunks; with `--throughput` a token bucket grants each
  chunk, so the pacing costs a clock read per chunk, not a sleep per record.
- Latency is send -> acknowledgement (monotonic clock), taken by a done-callback on the record's
  future. A per-record callback costs the Python producer more than the send itself, so by default
  only a random sample of records carries one (every record below about 4,000 records/s, then
  about 4,000 per second), each sample weighted by how many records it stands for; `--latency-every 1`
  measures every record.
- Delivery is checked for every record: the futures wait in send order and are collected as they
  complete, so the failed count is exact.
"""

from __future__ import annotations

import collections
import math
import signal
import sys
import time
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

from kctl.client import KafkaError, TopicPartition
from kctl.client.consumer import Consumer, ConsumerRecord
from kctl.client.offsets_spec import (
    OffsetRange,
    OffsetSpecError,
    parse_offset_point,
    parse_offset_spec,
    resolve_ranges,
)
from kctl.client.producer import Producer, ProducerClosedError, ProducerConfig, RecordFuture
from kctl.commands.clients import client_errors
from kctl.commands.consume import consumer_config, select_partitions, select_topics
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_BOOTSTRAP_SERVER,
    DEFAULT_FORMAT,
    BootstrapServerOption,
    ConfigFileOption,
    ConfigOverrideOption,
)
from kctl.commands.output import OutputFormat, progress, render_object, warn
from kctl.commands.perf_stats import (
    MB,
    IntervalStats,
    LatencyHistogram,
    Sampler,
    TokenBucket,
    Warmup,
    human_count,
    interval_line,
    make_keys,
    make_payload,
    parse_duration,
    parse_warmup,
)
from kctl.commands.produce import check_topic, producer_config

app = typer.Typer(
    help=(
        "Measure producer and consumer throughput and latency (like Kafka's kafka-*-perf-test.sh; "
        "talks to a running cluster)."
    ),
    no_args_is_help=True,
)

CHUNK = 256
"""Records sent between two looks at the clock (progress, end of run, pacing)."""
TICK = 0.05
"""Seconds between two rounds of bookkeeping (collecting futures, progress, sampling rate)."""
LIVE_REFRESH = 0.25
"""Seconds between two updates of the live display."""
INTERRUPT_FLUSH = 5.0
"""After Ctrl-C, how long the records on their way may take to be acknowledged (a second Ctrl-C
stops waiting)."""
METADATA_TIMEOUT = 15.0
"""How long the producer may wait for the topic's partitions and leaders before the run starts."""

_monotonic = time.monotonic


# -- shared options and plumbing -------------------------------------------------------------------
NumRecordsOption = Annotated[
    int | None,
    typer.Option("--num-records", "-n", metavar="N", min=1, help="Stop after N records.", show_default=False),
]
DurationOption = Annotated[
    str | None,
    typer.Option(
        "--duration",
        "-d",
        metavar="DURATION",
        help="Stop after this long: 30s, 500ms, 5m, 1h30m (or seconds).",
        show_default=False,
    ),
]
IntervalOption = Annotated[
    str,
    typer.Option(
        "--interval",
        "-i",
        metavar="DURATION",
        help="Print progress every DURATION on stderr (0: no progress lines).",
    ),
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress on stderr; only the summary on stdout.")
]
SummaryFormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        "-f",
        case_sensitive=False,
        help="Summary format: table (KEY/VALUE rows), json (one pretty object) or jsonl (one line).",
    ),
]
LatencyEveryOption = Annotated[
    int | None,
    typer.Option(
        "--latency-every",
        metavar="K",
        min=1,
        help=(
            "Measure the latency of one record in about K (each counted K times); 1: every record. "
            "Default: adapted to the rate, about 4000 measured records per second."
        ),
        show_default=False,
    ),
]


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _duration(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as error:
        raise KctlError(f"invalid {option}: {error}", ExitCode.USAGE) from None
    return seconds


class Interrupts:
    """Ctrl-C as a request: the first sets `stop` (the run ends and its summary is printed), the
    second `abort` (stop waiting for what is on its way), the third raises KeyboardInterrupt."""

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


class Reporter:
    """Progress on stderr: a line per interval, and a live display when stderr is a terminal."""

    def __init__(
        self,
        description: str,
        *,
        interval: float,
        quiet: bool,
        latency: bool,
        total_records: int | None = None,
        total_seconds: float | None = None,
    ) -> None:
        self.description = description
        self.interval = interval if not quiet else 0.0
        self.latency = latency
        self.total_records = total_records
        self.total_seconds = total_seconds
        self.live = not quiet and _stderr_is_terminal()
        self._progress: Any = None
        self._task: Any = None
        self.started = 0.0
        self.next_line = math.inf
        self.next_refresh = 0.0
        self._warm = False

    def __enter__(self) -> Reporter:
        if self.live:
            self._progress = progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[stats]}", markup=False),
                TimeElapsedColumn(),
                transient=True,
            )
            self._progress.start()
            bounded = self.total_records is not None or self.total_seconds is not None
            self._task = self._progress.add_task(self.description, total=100.0 if bounded else None, stats="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def start(self, now: float, *, warmup: bool = False) -> None:
        self.started = now
        self._warm = warmup
        self.next_line = now + self.interval if self.interval > 0 else math.inf

    def line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            try:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def tick(
        self,
        now: float,
        stats: IntervalStats,
        *,
        records: int,
        rate: float,
        mb_rate: float,
        latency_ms: float | None,
        warmup: bool = False,
    ) -> None:
        """Print the interval's line when it is due, and refresh the live display."""
        if now >= self.next_line:
            interval = stats.take(now)
            warm = warmup or self._warm  # the interval began or ended in the warm-up
            self.line(interval_line(now - self.started, interval, latency=self.latency, warmup=warm))
            self._warm = warmup
            self.next_line += self.interval * max(1, math.floor((now - self.next_line) / self.interval) + 1)
        if self._progress is None or now < self.next_refresh:
            return
        self.next_refresh = now + LIVE_REFRESH
        fractions = []
        if self.total_records:
            fractions.append(records / self.total_records)
        if self.total_seconds:
            fractions.append((now - self.started) / self.total_seconds)
        text = f"{records:,} records · {human_count(rate)} rec/s · {mb_rate:.2f} MB/s"
        if self.latency and latency_ms is not None:
            text += f" · avg {latency_ms:.2f} ms"
        if warmup:
            text += " · warm-up"
        completed = min(max(fractions), 1.0) * 100.0 if fractions else None
        self._progress.update(self._task, completed=completed, stats=text)


def _number(value: float | None) -> float | int | None:
    """A float that holds a whole number as an int (`--throughput 1000` shows as 1000)."""
    return int(value) if value is not None and float(value).is_integer() else value


def _render_summary(summary: dict[str, Any], fmt: OutputFormat, title: str) -> None:
    render_object(summary, fmt, title=title)


def _latency_fields(histogram: LatencyHistogram | None) -> dict[str, Any]:
    if histogram is None:
        return {}
    figures = histogram.summary_ms()
    fields = {f"latency_{name}_ms": value for name, value in figures.items()}
    fields["latency_samples"] = histogram.samples
    return fields


# -- produce ---------------------------------------------------------------------------------------
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
        reporter: Reporter,
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
        self.reporter = reporter
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
        latency_us = int((_monotonic() - sent_at) * 1_000_000)
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
        self.reporter.tick(
            now,
            self.stats,
            records=self.delivered,
            rate=rate,
            mb_rate=rate * self.record_bytes / MB,
            latency_ms=mean / 1000.0 if mean is not None else None,
            warmup=self.in_warmup,
        )

    def run(self) -> None:
        bucket = TokenBucket(self.throughput) if self.throughput else None
        self.started = now = _monotonic()
        self.measure_start = now
        self.reporter.start(now, warmup=self.in_warmup)
        self.stats.started = now
        deadline = now + self.duration if self.duration is not None else math.inf
        warmup_end = now + self.warmup.seconds if self.warmup.seconds else math.inf
        try:
            self.sent = self._send_loop(deadline, warmup_end, bucket)
        except KafkaError as error:  # send refused: stop sending, report what was sent
            self.send_error = error
            self.sent = self.collected + len(self.pending)
        if self.in_warmup:  # the run ended within the warm-up: nothing measured
            self._end_warmup(_monotonic(), self.sent)
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
            now = _monotonic()
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
                    sent_at = _monotonic()
                    future = send(topic, payload, key)
                    weight, warm = sampler.every, self.in_warmup
                    future.add_done_callback(
                        lambda f, s=sent_at, w=weight, m=warm: self._on_sample(s, w, m, f)
                    )
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
                wait_until = _monotonic() + INTERRUPT_FLUSH
            remaining = self.producer.flush(TICK)
            now = _monotonic()
            self._tick(now)
            if not remaining:
                break
            if self.interrupts.abort or now >= wait_until:
                break
        self.finished = _monotonic()
        self.collect()
        if self.pending:  # given up waiting (interrupted): closing fails them
            self.producer.close(timeout=0)
            self.collect()

    def summary(self, config: ProducerConfig, record_size: int) -> dict[str, Any]:
        measured = self.measured
        elapsed = max(self.finished - self.measure_start, 1e-9)
        rate = measured / elapsed if measured else 0.0
        summary: dict[str, Any] = {
            "topic": self.topic,
            "records": measured,
            "failed": self.failed,
            "elapsed_s": round(elapsed, 3),
            "records_per_s": round(rate, 1),
            "mb_per_s": round(rate * self.record_bytes / MB, 3),
            "bytes": measured * self.record_bytes,
            **_latency_fields(self.histogram),
            "warmup_records": self.warmup_sent,
            "record_size": record_size,
            "keys": len(self.keys),
            "key_size": len(self.keys[0]) if self.keys else 0,
            "acks": "all" if config.acks == -1 else config.acks,
            "compression": config.compression_type,
            "throughput_limit": _number(self.throughput),
            "interrupted": self.interrupted,
        }
        if self.aborted:
            summary["aborted"] = self.aborted
        return summary


@app.command("produce")
def produce(
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="The topic to write to.", show_default=False)],
    num_records: NumRecordsOption = None,
    duration: DurationOption = None,
    record_size: Annotated[
        int,
        typer.Option("--record-size", "-s", metavar="BYTES", min=0, help="Size of each record's value."),
    ] = 100,
    throughput: Annotated[
        float,
        typer.Option(
            "--throughput",
            "-t",
            metavar="N",
            help="Send at most N records per second (-1: as fast as possible).",
        ),
    ] = -1,
    warmup: Annotated[
        str | None,
        typer.Option(
            "--warmup",
            "-w",
            metavar="N|DURATION",
            help=(
                "Leave the first N records (e.g. 10000) or the first DURATION (e.g. 5s) out of the "
                "figures; they count toward --num-records and --duration."
            ),
            show_default=False,
        ),
    ] = None,
    keys: Annotated[
        int | None,
        typer.Option(
            "--keys",
            "-k",
            metavar="N",
            min=1,
            help="Give records N distinct keys, in turn (default: no keys; sticky partitioning).",
            show_default=False,
        ),
    ] = None,
    key_size: Annotated[
        int | None,
        typer.Option(
            "--key-size",
            metavar="BYTES",
            min=1,
            help="Size of each key (default: the digits the key numbers need); alone: 1000 keys.",
            show_default=False,
        ),
    ] = None,
    acks: Annotated[
        str | None,
        typer.Option("--acks", "-a", metavar="ACKS", help="all (default), 1 or 0 (acks)."),
    ] = None,
    compression: Annotated[
        str | None,
        typer.Option(
            "--compression", "-z", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd (compression.type)."
        ),
    ] = None,
    interval: IntervalOption = "5s",
    latency_every: LatencyEveryOption = None,
    quiet: QuietOption = False,
    fmt: SummaryFormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Send records to TOPIC as fast as allowed and measure throughput and latency.

    Give --num-records, --duration or both (whichever comes first ends the run). Every record has
    the same value: --record-size random letters and digits, generated once. Latency is the time
    from `send` to the broker's acknowledgement (with --acks 0: until the request was written); by
    default a random sample of the records is measured, each sample weighted by the records it
    stands for (--latency-every 1 measures each one). Throughput counts acknowledged records and
    their key and value bytes (MB = 2^20 bytes), from the first record after the warm-up to the
    last acknowledgement.

    Summary (stdout): records, failed, elapsed_s, records_per_s, mb_per_s, bytes,
    latency_{avg,p50,p95,p99,p99_9,max}_ms, latency_samples, and the settings of the run.

    Producer properties use Kafka's names (linger.ms, batch.size, buffer.memory,
    enable.idempotence, ...) in --config or -X; --acks and --compression win over them. A topic
    that does not exist is created if the broker creates topics on demand. Exit status 1 when
    records failed delivery, 3 when no broker can be reached or the topic does not exist, 130
    after Ctrl-C (the summary so far is printed first; a second Ctrl-C stops waiting for the
    records on their way)."""
    if not topic:
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    seconds = _duration(duration, "--duration")
    if num_records is None and seconds is None:
        raise KctlError("give --num-records N or --duration DURATION (or both)", ExitCode.USAGE)
    if seconds is not None and seconds <= 0:
        raise KctlError("--duration must be more than 0", ExitCode.USAGE)
    every_seconds = _duration(interval, "--interval") or 0.0
    if throughput == 0 or (throughput < 0 and throughput != -1):
        raise KctlError(
            f"--throughput must be a positive rate or -1 (no limit), got {throughput:g}", ExitCode.USAGE
        )
    limit = throughput if throughput > 0 else None
    try:
        warm = parse_warmup(warmup) if warmup is not None else Warmup()
    except ValueError as error:
        raise KctlError(f"invalid --warmup: {error}", ExitCode.USAGE) from None
    if warm.records and num_records is not None and warm.records >= num_records:
        raise KctlError(
            f"--warmup {warm.records} leaves none of the {num_records} records to measure", ExitCode.USAGE
        )
    if warm.seconds and seconds is not None and warm.seconds >= seconds:
        raise KctlError(f"--warmup {warmup} leaves none of --duration {duration} to measure", ExitCode.USAGE)
    if key_size is not None and keys is None:
        keys = 1000
    try:
        key_list = make_keys(keys, key_size) if keys else []
    except ValueError as error:
        raise KctlError(f"invalid --key-size: {error}", ExitCode.USAGE) from None
    explicit = {}
    if acks is not None:
        explicit["acks"] = acks
    if compression is not None:
        explicit["compression.type"] = compression
    bootstrap, config = producer_config(config_file, overrides, bootstrap_server, explicit)
    check_topic(bootstrap, config, topic)

    payload = make_payload(record_size)
    if latency_every is not None:
        sampler = Sampler(latency_every)
    else:  # adaptive; start from the rate cap, or sparse until the first rate is known
        sampler = Sampler(1, adaptive=True)
        sampler.adapt(limit if limit is not None else 500_000.0)
    reporter = Reporter(
        f"produce {topic}",
        interval=every_seconds,
        quiet=quiet,
        latency=True,
        total_records=num_records,
        total_seconds=seconds,
    )
    try:
        producer = Producer(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    try:
        with client_errors():  # the topic's partitions and leaders, before the clock starts
            producer.partitions_for(topic, timeout=METADATA_TIMEOUT)
        with Interrupts() as interrupts, reporter:
            run = ProduceRun(
                producer,
                topic,
                payload,
                key_list,
                num_records=num_records,
                duration=seconds,
                throughput=limit,
                warmup=warm,
                sampler=sampler,
                reporter=reporter,
                interrupts=interrupts,
            )
            run.run()
    finally:
        producer.close(timeout=0)
    _render_summary(run.summary(config, record_size), fmt, f"kctl perf produce {topic}")
    failures = None
    if run.failed:
        first, _ = run.errors.most_common(1)[0]
        kinds = f" ({len(run.errors)} kinds of error)" if len(run.errors) > 1 else ""
        failures = f"{run.failed} of {run.sent} records failed delivery{kinds}; most often: {first}"
    if run.interrupted:
        if failures:
            warn(failures)
        raise typer.Exit(ExitCode.INTERRUPTED)
    if failures:
        raise KctlError(failures, ExitCode.FAILURE)
    if run.send_error is not None:
        raise KctlError(f"sending stopped after {run.sent} records: {run.send_error}", ExitCode.FAILURE)
    if not run.measured:
        warn("no record was measured")


# -- consume ---------------------------------------------------------------------------------------
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
        reporter: Reporter,
        interrupts: Interrupts,
    ) -> None:
        self.consumer = consumer
        self.num_records = num_records
        self.duration = duration
        self.idle_timeout = idle_timeout
        self.sampler = sampler
        self.reporter = reporter
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
        self.reporter.tick(
            now,
            self.stats,
            records=self.records,
            rate=rate,
            mb_rate=self.bytes / MB / elapsed,
            latency_ms=(
                self.histogram.mean / 1000.0
                if self.histogram is not None and self.histogram.mean is not None
                else None
            ),
        )

    def run(self) -> None:
        consumer, sampler, stats, histogram = self.consumer, self.sampler, self.stats, self.histogram
        self.started = now = _monotonic()
        self.reporter.start(now)
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
            now = _monotonic()
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
            now = _monotonic()
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
        self._tick(_monotonic())

    def summary(self, topics: Sequence[str], partitions: int) -> dict[str, Any]:
        end = self.last_record if self.records else _monotonic()
        elapsed = max(end - self.started, 1e-9)
        rate = self.records / elapsed if self.records else 0.0
        summary: dict[str, Any] = {
            "topics": ",".join(topics),
            "partitions": partitions,
            "records": self.records,
            "elapsed_s": round(elapsed, 3),
            "records_per_s": round(rate, 1),
            "mb_per_s": round(self.bytes / MB / elapsed, 3),
            "bytes": self.bytes,
            "first_record_ms": round((self.first_record - self.started) * 1000, 1) if self.records else None,
            **_latency_fields(self.histogram),
            "interrupted": self.interrupted,
        }
        return summary


@app.command("consume")
def consume(
    topics: Annotated[list[str], typer.Argument(metavar="TOPIC...", help="The topics to read.")],
    num_records: NumRecordsOption = None,
    duration: DurationOption = None,
    offset: Annotated[
        str,
        typer.Option(
            "--offset",
            "-o",
            metavar="SPEC",
            help=(
                "Where to start, or a range START:END, in kctl's offset grammar: beginning, end, N, "
                "-N, +N, @TIME, e.g. @-1h or 1000:2000."
            ),
        ),
    ] = "beginning",
    partitions: Annotated[
        list[int] | None,
        typer.Option(
            "--partition", "-p", metavar="N", min=0, help="Read only partition N of each topic (repeatable)."
        ),
    ] = None,
    latency: Annotated[
        bool,
        typer.Option(
            "--latency",
            "-l",
            help=(
                "Also measure each record's age when it arrives (now - its timestamp): end-to-end "
                "latency while a producer writes (the clocks must agree)."
            ),
        ),
    ] = False,
    idle_timeout: Annotated[
        str | None,
        typer.Option(
            "--idle-timeout",
            metavar="DURATION",
            help="End the run when no record came for this long (default: 10s; with --duration: none).",
            show_default=False,
        ),
    ] = None,
    interval: IntervalOption = "5s",
    latency_every: LatencyEveryOption = None,
    quiet: QuietOption = False,
    fmt: SummaryFormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Read records from topics as fast as possible and measure the throughput.

    The run ends after --num-records, after --duration, at the END of an --offset range, or, with
    none of these, at the end offsets the topics have when the run starts (what they hold now);
    also when no record arrived for --idle-timeout. Throughput counts the records and their key and
    value bytes (MB = 2^20 bytes) from the first fetch to the last record; first_record_ms is how
    long the first one took. With --latency, record ages (now - record timestamp) are measured
    too, on a sample of the records (--latency-every).

    Summary (stdout): topics, partitions, records, elapsed_s, records_per_s, mb_per_s, bytes,
    first_record_ms, and with --latency latency_{avg,p50,p95,p99,p99_9,max}_ms, latency_samples.

    Consumer properties use Kafka's names (fetch.max.wait.ms, max.partition.fetch.bytes,
    max.poll.records, ...) in --config or -X. Exit status 1 when --num-records were asked for and
    fewer arrived before --idle-timeout, 2 for a bad option, 3 when a topic or partition does not
    exist or no broker can be reached, 130 after Ctrl-C (the summary so far is printed first)."""
    names = list(dict.fromkeys(topics))
    if any(not n for n in names):
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    seconds = _duration(duration, "--duration")
    if seconds is not None and seconds <= 0:
        raise KctlError("--duration must be more than 0", ExitCode.USAGE)
    every_seconds = _duration(interval, "--interval") or 0.0
    if idle_timeout is None:
        idle_timeout = "10s" if seconds is None else "0"
    idle = _duration(idle_timeout, "--idle-timeout") or None
    try:
        spec = parse_offset_spec(offset)
    except OffsetSpecError as error:
        raise KctlError(f"invalid --offset: {error}", ExitCode.USAGE) from None
    # without a count, a time or a range END: read what the topics hold now
    until = (
        parse_offset_point("end") if spec.end is None and num_records is None and seconds is None else None
    )
    bootstrap, config = consumer_config(config_file, overrides, bootstrap_server)
    try:
        consumer = Consumer(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    sampler = Sampler(latency_every) if latency_every is not None else Sampler(1, adaptive=True)
    if latency_every is None:
        sampler.adapt(500_000.0)
    with consumer, client_errors():
        selected = select_topics(consumer.cluster, names, None)
        tps = select_partitions(consumer.cluster, selected, partitions or [])
        ranges = resolve_ranges(spec, tps, consumer, until=until)
        total = None
        if all(r.stop is not None for r in ranges.values()):
            total = sum(max(r.stop - r.start, 0) for r in ranges.values() if r.stop is not None)
            if num_records is not None:
                total = min(total, num_records)
        elif num_records is not None:
            total = num_records
        consumer.assign(list(ranges))
        for tp, offset_range in ranges.items():
            consumer.seek(tp, offset_range.start)
        reporter = Reporter(
            f"consume {','.join(selected)}",
            interval=every_seconds,
            quiet=quiet,
            latency=latency,
            total_records=total,
            total_seconds=seconds,
        )
        with Interrupts() as interrupts, reporter:
            run = ConsumeRun(
                consumer,
                ranges,
                num_records=num_records,
                duration=seconds,
                idle_timeout=idle,
                latency=latency,
                sampler=sampler,
                reporter=reporter,
                interrupts=interrupts,
            )
            run.run()
    if total == 0:
        warn("nothing to read: the partitions hold no records in the range")
    _render_summary(run.summary(selected, len(ranges)), fmt, f"kctl perf consume {','.join(selected)}")
    if run.interrupted:
        raise typer.Exit(ExitCode.INTERRUPTED)
    if run.idle and num_records is not None and run.records < num_records:
        raise KctlError(
            f"only {run.records} of {num_records} records arrived (none for {idle_timeout})", ExitCode.FAILURE
        )
