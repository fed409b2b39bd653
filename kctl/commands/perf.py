"""`kctl perf produce|consume`: measure throughput and latency against a running cluster, like
Kafka's kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

The commands parse their options, run a load generator of `kctl.perf` (`ProduceRun`,
`ConsumeRun`; how they measure is described there) and render: progress on stderr every
`--interval` (a live display when stderr is a terminal, one plain line per interval otherwise,
`Reporter`) and the summary on stdout at the end: a KEY/VALUE table, or one JSON object with
`--format json|jsonl`.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import client_errors, connect, consumer_config, producer_config, require_topic
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    AcksOption,
    ClusterOptions,
    CompressionOption,
    cluster_options,
)
from kctl.commands.output import OutputFormat, progress, render_object, warn

if TYPE_CHECKING:
    from kctl.perf import Figures, Interval, IntervalStats
    from kctl.perf.stats import LatencyHistogram

app = typer.Typer(
    help=(
        "Measure producer and consumer throughput and latency (like Kafka's kafka-*-perf-test.sh; "
        "talks to a running cluster)."
    ),
    no_args_is_help=True,
)

LIVE_REFRESH = 0.25
SPARK_WIDTH = 20  # live refreshes shown by the sparklines (5 s)
"""Seconds between two updates of the live display."""


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
    from kctl.perf import parse_duration

    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as error:
        raise KctlError(f"invalid {option}: {error}", ExitCode.USAGE) from None
    return seconds


def _run_length(duration: str | None, interval: str) -> tuple[float | None, float]:
    """--duration (None when not given; more than 0 when given) and --interval (0: no interval
    lines), in seconds."""
    seconds = _duration(duration, "--duration")
    if seconds is not None and seconds <= 0:
        raise KctlError("--duration must be more than 0", ExitCode.USAGE)
    return seconds, _duration(interval, "--interval") or 0.0


class Reporter:
    """A run's `kctl.perf.Progress` on stderr: a line per interval, and a live display when stderr
    is a terminal."""

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
        self.rates: deque[float] = deque(maxlen=SPARK_WIDTH)  # records/s at each live refresh
        self.latencies: deque[float] = deque(maxlen=SPARK_WIDTH)  # average latency (ms) likewise

    def __enter__(self) -> Reporter:
        from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

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

    def histogram(self, histogram: LatencyHistogram) -> None:
        """At the end of a run on a terminal: the latency histogram, on stderr under the lines."""
        from kctl.perf.charts import latency_histogram

        if self.live:
            for text in latency_histogram(histogram):
                self.line(text)

    def line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            try:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def tick(self, now: float, stats: IntervalStats, figures: Figures) -> None:
        """Print the interval's line when it is due, and refresh the live display."""
        if now >= self.next_line:
            interval = stats.take(now)
            warm = figures.warmup or self._warm  # the interval began or ended in the warm-up
            self.line(interval_line(now - self.started, interval, latency=self.latency, warmup=warm))
            self._warm = figures.warmup
            self.next_line += self.interval * max(1, math.floor((now - self.next_line) / self.interval) + 1)
        if self._progress is None or now < self.next_refresh:
            return
        self.next_refresh = now + LIVE_REFRESH
        fractions = []
        if self.total_records:
            fractions.append(figures.records / self.total_records)
        if self.total_seconds:
            fractions.append((now - self.started) / self.total_seconds)
        from kctl.perf.charts import sparkline

        self.rates.append(figures.rate)
        text = (
            f"{figures.records:,} records · {human_count(figures.rate)} rec/s {sparkline(self.rates)} · "
            f"{figures.mb_rate:.2f} MB/s"
        )
        if self.latency and figures.latency_ms is not None:
            self.latencies.append(figures.latency_ms)
            text += f" · avg {figures.latency_ms:.2f} ms {sparkline(self.latencies)}"
        if figures.warmup:
            text += " · warm-up"
        completed = min(max(fractions), 1.0) * 100.0 if fractions else None
        self._progress.update(self._task, completed=completed, stats=text)


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


# -- produce ---------------------------------------------------------------------------------------
@app.command("produce")
@cluster_options
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
    acks: AcksOption = None,
    compression: CompressionOption = None,
    interval: IntervalOption = "5s",
    latency_every: LatencyEveryOption = None,
    quiet: QuietOption = False,
    fmt: SummaryFormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
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
    from kctl.client.producer import Producer
    from kctl.perf import (
        METADATA_TIMEOUT,
        Interrupts,
        ProduceRun,
        Sampler,
        Warmup,
        make_keys,
        make_payload,
        parse_warmup,
    )

    if not topic:
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    seconds, every_seconds = _run_length(duration, interval)
    if num_records is None and seconds is None:
        raise KctlError("give --num-records N or --duration DURATION (or both)", ExitCode.USAGE)
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
        explicit["acks"] = acks.value
    if compression is not None:
        explicit["compression.type"] = compression.value
    bootstrap, config = producer_config(*cluster, explicit)
    require_topic(bootstrap, config, topic)

    payload = make_payload(record_size)
    sampler = Sampler.measuring(latency_every, limit if limit is not None else 500_000.0)
    reporter = Reporter(
        f"produce {topic}",
        interval=every_seconds,
        quiet=quiet,
        latency=True,
        total_records=num_records,
        total_seconds=seconds,
    )
    producer = connect(Producer, bootstrap, config)
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
                progress=reporter,
                interrupts=interrupts,
            )
            run.run()
    finally:
        producer.close(timeout=0)
    if fmt == OutputFormat.TABLE:  # a picture for a person; json and jsonl stay as they are
        reporter.histogram(run.histogram)
    render_object(run.summary(config, record_size).as_dict(), fmt, title=f"kctl perf produce {topic}")
    failures = run.failure_message()
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
@app.command("consume")
@cluster_options
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
    *,
    cluster: ClusterOptions,
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
    from kctl.client.consumer import Consumer
    from kctl.client.offsets_spec import OffsetSpecError, parse_offset_spec, resolve_ranges
    from kctl.console.selection import assign_ranges, select_partitions, select_topics
    from kctl.perf import ConsumeRun, Interrupts, Sampler, default_end, records_expected

    names = list(dict.fromkeys(topics))
    if any(not n for n in names):
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    seconds, every_seconds = _run_length(duration, interval)
    if idle_timeout is None:
        idle_timeout = "10s" if seconds is None else "0"
    idle = _duration(idle_timeout, "--idle-timeout") or None
    try:
        spec = parse_offset_spec(offset)
    except OffsetSpecError as error:
        raise KctlError(f"invalid --offset: {error}", ExitCode.USAGE) from None
    # without a count, a time or a range END: read what the topics hold now
    until = default_end(spec, num_records, seconds)
    bootstrap, config = consumer_config(*cluster)
    consumer = connect(Consumer, bootstrap, config)
    sampler = Sampler.measuring(latency_every)
    with consumer, client_errors():
        selected = select_topics(consumer.cluster, names, None)
        tps = select_partitions(consumer.cluster, selected, partitions or [])
        ranges = resolve_ranges(spec, tps, consumer, until=until)
        total = records_expected(ranges, num_records)
        assign_ranges(consumer, ranges)
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
                progress=reporter,
                interrupts=interrupts,
            )
            run.run()
    if total == 0:
        warn("nothing to read: the partitions hold no records in the range")
    summary = run.summary(selected, len(ranges))
    render_object(summary.as_dict(), fmt, title=f"kctl perf consume {','.join(selected)}")
    if run.interrupted:
        raise typer.Exit(ExitCode.INTERRUPTED)
    if run.idle and num_records is not None and run.records < num_records:
        raise KctlError(
            f"only {run.records} of {num_records} records arrived (none for {idle_timeout})", ExitCode.FAILURE
        )
