"""`kctl perf produce|consume`: the instruments on their own (histogram, pacing, sampling, parsing),
then the commands run as real processes against a real broker process: counts and delivery in the
JSON summary checked against the topic's end offsets and a consumer, pacing, warm-up, keys, the
split of progress (stderr) and summary (stdout), a terminal's live display, and the exit codes."""

from __future__ import annotations

import json
import os
import pty
import random
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cli_support import kctl
from raw_kafka import running_broker, unique

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.client.consumer import Consumer
from kctl.commands.perf import interval_line
from kctl.perf.charts import latency_histogram, sparkline
from kctl.perf.stats import BUCKETS, LatencyHistogram, Sampler, _bucket_index, _bucket_range
from kctl.perf.stats import Interval as IntervalFigures
from kctl.perf.workload import TokenBucket, Warmup, make_keys, make_payload, parse_duration, parse_warmup
from kctl.testing import BrokerProcess

PARTITIONS = 3
SUMMARY_KEYS = {
    "records",
    "failed",
    "elapsed_s",
    "records_per_s",
    "mb_per_s",
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p99_9_ms",
    "latency_max_ms",
}


# -- the instruments ---------------------------------------------------------------------------------
def test_buckets_cover_every_value_once() -> None:
    previous_high = 0
    for index in range(BUCKETS):
        low, high = _bucket_range(index)
        assert low == previous_high, index  # contiguous, no gaps or overlaps
        previous_high = high
    rng = random.Random(1)
    for value in [0, 1, 255, 256, 257, 511, 512, 10**6, 3_600_000_000] + [
        rng.randrange(10**9) for _ in range(1000)
    ]:
        low, high = _bucket_range(_bucket_index(value))
        assert low <= value < high
        assert high - low <= max(1, low / 128)  # relative width under 1/128


def test_histogram_percentiles_within_one_percent() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(8, 1.2)) for _ in range(50_000)]
    histogram = LatencyHistogram()
    for value in values:
        histogram.record(value)
    ordered = sorted(values)
    for percent in (50, 95, 99, 99.9):
        exact = ordered[max(0, int(len(ordered) * percent / 100 + 0.999999) - 1)]
        estimate = histogram.percentile(percent)
        assert estimate is not None
        assert abs(estimate - exact) <= max(1.0, exact * 0.01), (percent, exact, estimate)
    assert histogram.max == max(values)
    assert histogram.min == min(values)
    assert histogram.mean == pytest.approx(sum(values) / len(values))
    figures = histogram.summary_ms()
    assert list(figures) == ["avg", "p50", "p95", "p99", "p99_9", "max"]
    assert figures["max"] == round(max(values) / 1000, 3)


def test_histogram_weights_empty_and_merge() -> None:
    empty = LatencyHistogram()
    assert empty.percentile(50) is None
    assert empty.summary_ms() == dict.fromkeys(["avg", "p50", "p95", "p99", "p99_9", "max"])
    weighted = LatencyHistogram()
    weighted.record(100, weight=99)  # one sample standing for 99 records
    weighted.record(5000)
    assert (weighted.samples, weighted.count) == (2, 100)
    assert weighted.percentile(99) == 100
    assert weighted.percentile(99.9) == pytest.approx(5000, rel=0.01)
    assert weighted.mean == pytest.approx((100 * 99 + 5000) / 100)
    weighted.record(-5)  # a clock going backwards counts as 0
    assert weighted.min == 0
    other = LatencyHistogram()
    other.record(10**7)
    weighted.merge(other)
    assert (weighted.samples, weighted.count, weighted.max) == (4, 102, 10**7)
    huge = LatencyHistogram()
    huge.record(10**12)  # beyond the last bucket: counted there, exact max kept
    assert huge.max == 10**12 and huge.percentile(50) == 10**12


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_keeps_the_rate_in_bounded_bursts() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1000, clock=clock)
    assert bucket.burst == 50
    granted = bucket.take(256)
    assert granted == 1  # the first record at once, the rest accrue
    assert bucket.wait() == pytest.approx(0.001)
    total = granted
    for _ in range(2000):  # 2 s in 1 ms steps, asking for more than allowed each time
        clock.now += 0.001
        got = bucket.take(256)
        assert got <= bucket.burst
        total += got
    assert 1990 <= total <= 2002
    clock.now += 60  # idle for a minute: no more than one burst saved up
    assert bucket.take(10_000) == 50
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_sampler_gaps_and_adaptation() -> None:
    every = Sampler(1)
    every.pick(41)
    assert every.next == 42
    sampler = Sampler(16, seed=3)
    index, picks = 0, 0
    while index < 160_000:
        sampler.pick(index)
        index = sampler.next
        picks += 1
    assert 9_000 <= picks <= 11_000  # about one in 16
    adaptive = Sampler(1, adaptive=True, target=4096)
    adaptive.adapt(300_000)
    assert adaptive.every == 128
    adaptive.adapt(1000)
    assert adaptive.every == 1
    fixed = Sampler(8)
    fixed.adapt(10**6)
    assert fixed.every == 8
    with pytest.raises(ValueError):
        Sampler(0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("500ms", 0.5), ("1.5s", 1.5), ("5m", 300), ("1h30m", 5400), ("2d", 172800), ("7", 7)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "5x", "-1", "1h 30m", "m5", "nan"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_parse_warmup_and_payloads() -> None:
    assert parse_warmup("10000") == Warmup(records=10000)
    assert parse_warmup("5s") == Warmup(seconds=5.0)
    assert parse_warmup("0").none
    with pytest.raises(ValueError):
        parse_warmup("ten")
    payload = make_payload(1000)
    assert len(payload) == 1000 and payload.isalnum() and len(set(payload)) > 30
    assert make_keys(3, None) == [b"0", b"1", b"2"]
    assert make_keys(100, 8)[99] == b"00000099"
    with pytest.raises(ValueError):
        make_keys(1000, 2)


def test_sparkline_scales_to_the_largest_value() -> None:
    assert sparkline([]) == ""
    assert sparkline([0, 0, 0]) == "▁▁▁"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 10]) == "▅█"
    assert sparkline([1000, 1, 2, 3, 4], width=4) == "▃▅▆█"  # the last 4 only, scaled to theirs


def test_latency_histogram_rows_add_up() -> None:
    histogram = LatencyHistogram()
    assert latency_histogram(histogram) == []
    for value_us, weight in ((500, 70), (2_000, 20), (40_000, 9), (900_000, 1)):
        histogram.record(value_us, weight)
    lines = latency_histogram(histogram, rows=6, width=20)
    assert lines[0] == "latency histogram (ms), 100 records"
    rows = lines[1:]
    assert len(rows) == 6
    counts = [int(row.split()[-2].replace(",", "")) for row in rows]
    assert sum(counts) == 100 and counts[0] == 70 and counts[-1] == 1
    assert rows[-1].endswith("100.00%")
    bars = [row.split("│")[1].rstrip("0123456789,.% ") for row in rows]
    assert bars[0] == "█" * 20  # the fullest range fills the width
    assert len(bars[1].strip()) < len(bars[0])  # the others in proportion
    assert rows[0].lstrip().startswith("0.50-")  # from the smallest latency, in ms


def test_interval_line() -> None:
    figures = IntervalFigures(
        seconds=2.0, records=1000, bytes=2 * 1024 * 1024, latency_avg_ms=1.5, latency_max_ms=9.25
    )
    assert (
        interval_line(4.0, figures, latency=True)
        == "4.0s: 1000 records, 500.0 records/s (1.00 MB/s), latency avg 1.50 ms, max 9.25 ms"
    )
    assert interval_line(4.0, figures, latency=False, warmup=True) == (
        "4.0s: 1000 records, 500.0 records/s (1.00 MB/s) (warm-up)"
    )


# -- against a broker ------------------------------------------------------------------------------

def summary(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    document = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": str(PARTITIONS)}, "perf") as process:
        yield process


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of the topic's end offsets (0 for a topic that does not exist yet)."""
    with AdminClient(bootstrap) as admin:
        topics = {t.name: t for t in admin.list_topics()}
        if topic not in topics:
            return 0
        tps = [TopicPartition(topic, p.partition) for p in topics[topic].partitions]
        results = admin.list_offsets(tps, "latest")
    assert all(r.ok for r in results.values()), results
    return sum(r.offset for r in results.values())


def read_all(bootstrap: str, topic: str) -> list[Any]:
    with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while sum(consumer.position(tp) for tp in tps) < sum(ends.values()) and time.monotonic() < deadline:
            records += consumer.poll(0.5)
    return records


def test_produce_then_consume_counts_and_summary(shared: BrokerProcess) -> None:
    topic = unique("perf")
    before = end_offsets(shared.bootstrap, topic)
    produced = kctl("perf", "produce", topic, "-n", "5000", "-s", "100", "-f", "json", "-b", shared.bootstrap)
    assert produced.returncode == 0, produced.stderr
    document = summary(produced)
    assert set(document) >= SUMMARY_KEYS
    assert document["topic"] == topic
    assert document["records"] == 5000
    assert document["failed"] == 0
    assert document["bytes"] == 5000 * 100
    assert document["warmup_records"] == 0
    assert document["interrupted"] is False
    assert document["records_per_s"] > 0 and document["mb_per_s"] > 0
    assert 1 <= document["latency_samples"] <= 5000
    latencies = [document[f"latency_{name}_ms"] for name in ("p50", "p95", "p99", "p99_9", "max")]
    assert latencies == sorted(latencies) and latencies[0] > 0
    assert end_offsets(shared.bootstrap, topic) - before == 5000

    consumed = kctl("perf", "consume", topic, "--offset", "beginning", "-f", "json", "-b", shared.bootstrap)
    assert consumed.returncode == 0, consumed.stderr
    read = summary(consumed)
    assert read["records"] == 5000
    assert read["bytes"] == 5000 * 100
    assert read["partitions"] == PARTITIONS
    assert read["topics"] == topic
    assert read["first_record_ms"] is not None
    assert "latency_avg_ms" not in read  # record ages only with --latency

    some = kctl("perf", "consume", topic, "-n", "1200", "--latency", "-f", "jsonl", "-b", shared.bootstrap)
    assert some.returncode == 0, some.stderr
    assert len(some.stdout.splitlines()) == 1
    partial = summary(some)
    assert partial["records"] == 1200
    assert partial["latency_p50_ms"] > 0  # the records' age: they were written moments ago
    assert partial["latency_samples"] >= 1


def test_throughput_cap_paces_the_run_and_progress_goes_to_stderr(shared: BrokerProcess) -> None:
    topic = unique("paced")
    started = time.monotonic()
    result = kctl(
        "perf",
        "produce",
        topic,
        "-n",
        "1500",
        "-t",
        "1000",
        "-i",
        "250ms",
        "-f",
        "json",
        "-b",
        shared.bootstrap,
    )
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    document = summary(result)
    assert document["records"] == 1500
    assert document["throughput_limit"] == 1000
    assert document["latency_samples"] == 1500  # at 1000 records/s every record is measured
    # pacing, checked loosely: 1500 records at 1000/s cannot be done in much less than 1.5 s
    assert document["elapsed_s"] >= 1500 / 1000 * 0.8
    assert took >= 1500 / 1000 * 0.8
    lines = [line for line in result.stderr.splitlines() if "records/s" in line]
    assert len(lines) >= 3, result.stderr
    assert all(" MB/s), latency avg " in line and line.endswith(" ms") for line in lines)
    assert "records/s" not in result.stdout.replace('"records_per_s"', "")


def test_duration_warmup_keys_compression_and_table(shared: BrokerProcess) -> None:
    topic = unique("keyed")
    before = end_offsets(shared.bootstrap, topic)
    result = kctl(
        "perf", "produce", topic,
        "-d", "1.5s", "-t", "2000", "-w", "500",
        "--keys", "10", "--key-size", "8", "-s", "50",
        "-z", "lz4", "-a", "1", "--latency-every", "4",
        "-b", shared.bootstrap,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines()[1:])
    assert result.stdout.split()[:2] == ["KEY", "VALUE"]
    assert rows["warmup_records"].strip() == "500"
    assert rows["compression"].strip() == "lz4"
    assert rows["acks"].strip() == "1"
    assert rows["keys"].strip() == "10" and rows["key_size"].strip() == "8"
    measured = int(rows["records"])
    total = end_offsets(shared.bootstrap, topic) - before
    assert total == measured + 500  # warm-up records are written, just left out of the figures
    assert 2000 <= total <= 3300  # 1.5 s at 2000/s, loosely
    assert int(rows["bytes"]) == measured * (50 + 8)
    records = read_all(shared.bootstrap, topic)
    assert len(records) == total
    assert {r.key for r in records} == {b"%08d" % i for i in range(10)}
    assert {len(r.value) for r in records} == {50}


def test_failed_deliveries_exit_1_with_the_count(shared: BrokerProcess) -> None:
    topic = unique("small")
    with AdminClient(shared.bootstrap) as admin:
        [created] = admin.create_topics([NewTopic(topic, 1, 1, {"max.message.bytes": "1000"})])
        assert created.ok, created
    result = kctl(
        "perf", "produce", topic, "-n", "3", "-s", "5000", "-f", "jsonl", "-i", "0",
        "-X", "retries=0", "-b", shared.bootstrap,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    document = summary(result)
    assert document["failed"] == 3
    assert document["records"] == 0
    assert "kctl: error: 3 of 3 records failed delivery" in result.stderr
    assert "MESSAGE_TOO_LARGE" in result.stderr


def test_consume_stops_after_idle_timeout_short_of_num_records(shared: BrokerProcess) -> None:
    topic = unique("idle")
    assert kctl("perf", "produce", topic, "-n", "10", "-q", "-b", shared.bootstrap).returncode == 0
    result = kctl(
        "perf", "consume", topic, "-n", "50", "--idle-timeout", "1s", "-f", "jsonl", "-b", shared.bootstrap
    )
    assert result.returncode == 1
    assert summary(result)["records"] == 10
    assert "only 10 of 50 records arrived" in result.stderr


def test_ctrl_c_prints_the_summary_so_far_and_exits_130(shared: BrokerProcess) -> None:
    topic = unique("interrupted")
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kctl", "perf", "produce", topic, "-d", "60s", "-t", "2000", "-i", "200ms",
         "-f", "json", "-b", shared.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )  # fmt: skip
    assert process.stderr is not None
    first = process.stderr.readline()  # the first progress line: records are flowing
    assert "records/s" in first
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    document = json.loads(stdout)
    assert document["interrupted"] is True
    assert document["records"] > 0
    assert document["failed"] == 0
    assert end_offsets(shared.bootstrap, topic) >= document["records"]


def _on_a_terminal(args: list[str]) -> tuple[int, bytes, str]:
    """`kctl ARGS` with stderr on a pseudo-terminal: exit status, stdout, what the terminal showed."""
    master, slave = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in ("KCTL_BOOTSTRAP_SERVER", "NO_COLOR")}
    process = subprocess.Popen(
        [sys.executable, "-m", "kctl", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**environment, "COLUMNS": "160", "TERM": "xterm"},
    )
    os.close(slave)
    terminal = b""
    with selectors.DefaultSelector() as selector:
        selector.register(master, selectors.EVENT_READ)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not selector.select(0.2):
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            terminal += chunk
    os.close(master)
    assert process.stdout is not None
    stdout = process.stdout.read()
    return process.wait(timeout=30), stdout, terminal.decode("utf-8", "replace")


def test_live_display_on_a_terminal_keeps_stdout_clean(shared: BrokerProcess) -> None:
    topic = unique("tty")
    args = ["perf", "produce", topic, "-n", "3000", "-t", "3000", "-i", "500ms", "-f", "json"]
    status, stdout, text = _on_a_terminal([*args, "-b", shared.bootstrap])
    assert status == 0
    document = json.loads(stdout)
    assert document["records"] == 3000
    assert f"produce {topic}" in text  # the live display's description
    assert "rec/s" in text  # its running figures
    assert any(block in text for block in "▂▃▄▅▆▇█")  # with their sparkline
    assert "records/s (" in text  # and the interval lines printed above it
    assert "latency histogram" not in text  # json: the run prints nothing more than before


def test_a_table_run_on_a_terminal_ends_with_a_latency_histogram(shared: BrokerProcess) -> None:
    topic = unique("tty-hist")
    status, stdout, text = _on_a_terminal(
        ["perf", "produce", topic, "-n", "2000", "-t", "2000", "-f", "table", "-b", shared.bootstrap]
    )
    assert status == 0 and b"records" in stdout
    assert "latency histogram (ms), 2,000 records" in text, text[-2000:]
    rows = [line for line in text.splitlines() if "│" in line and "%" in line]
    assert 2 <= len(rows) <= 12
    assert rows[-1].rstrip().endswith("100.00%")
    assert sum(int(row.split()[-2].replace(",", "")) for row in rows) == 2000


# -- exit codes --------------------------------------------------------------------------------------
def test_unreachable_broker_exits_3() -> None:
    for command in (["produce", "t", "-n", "1"], ["consume", "t"]):
        result = kctl("perf", *command, "-b", "127.0.0.1:1")
        assert result.returncode == 3, result.stderr
        assert "cannot reach" in result.stderr or "refused" in result.stderr
        assert result.stdout == ""


def test_missing_topic_exits_3_without_auto_create(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    for command in (["produce", "absent", "-n", "1"], ["consume", "absent"]):
        result = kctl("perf", *command, "-b", broker.bootstrap)
        assert result.returncode == 3, result.stderr
        assert "'absent' does not exist" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["produce", "t"], "--num-records N or --duration"),
        (["produce", "t", "-n", "5", "-t", "0"], "--throughput must be"),
        (["produce", "t", "-n", "5", "-w", "5"], "leaves none"),
        (["produce", "t", "-d", "2s", "-w", "3s"], "leaves none"),
        (["produce", "t", "-n", "5", "-w", "soon"], "invalid --warmup"),
        (["produce", "t", "-d", "forever"], "invalid --duration"),
        (["produce", "t", "-n", "5", "--keys", "1000", "--key-size", "2"], "invalid --key-size"),
        (["produce", "t", "-n", "5", "-a", "2"], "acks"),
        (["produce", "t", "-n", "5", "-X", "linger.msec=5"], "unknown producer property"),
        (["consume", "t", "--offset", "sideways"], "invalid --offset"),
        (["consume", "t", "--interval", "often"], "invalid --interval"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = kctl("perf", *args, "-b", "127.0.0.1:1")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
