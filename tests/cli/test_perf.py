"""kctl.perf without a broker: the summaries (figures, key order, what is left out), the latency
summary of a histogram, what a consume run expects to read and where it ends by default, and
Ctrl-C as a stop request. (The histogram, pacing and sampling are tested in test_cli_perf.py.)"""

from __future__ import annotations

import os
import signal
import time

import pytest

from kctl.client import TopicPartition
from kctl.client.offsets_spec import OffsetRange, parse_offset_spec
from kctl.perf import (
    ConsumeSummary,
    Interrupts,
    LatencyHistogram,
    LatencySummary,
    ProduceSummary,
    Sampler,
    default_end,
    records_expected,
)

LATENCY_KEYS = [
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p99_9_ms",
    "latency_max_ms",
    "latency_samples",
]


def test_latency_summary_in_milliseconds() -> None:
    histogram = LatencyHistogram()
    for value_us in range(1, 1001):  # 1 µs .. 1 ms
        histogram.record(value_us * 10)  # 10 µs .. 10 ms
    summary = LatencySummary.of(histogram)
    assert summary.samples == 1000
    assert summary.avg_ms == pytest.approx(5.005)
    assert summary.p50_ms == pytest.approx(5.0, rel=0.01)
    assert summary.p99_ms == pytest.approx(9.9, rel=0.01)
    assert summary.max_ms == 10.0
    fields = summary.fields()
    assert list(fields) == LATENCY_KEYS
    assert fields["latency_p95_ms"] == summary.p95_ms
    empty = LatencySummary.of(LatencyHistogram()).fields()
    assert empty == {**dict.fromkeys(LATENCY_KEYS), "latency_samples": 0}


def _produce_summary(**changes: object) -> ProduceSummary:
    histogram = LatencyHistogram()
    histogram.record(2000, weight=4)
    fields: dict[str, object] = {
        "topic": "t",
        "records": 4,
        "failed": 0,
        "elapsed_s": 0.5,
        "records_per_s": 8.0,
        "mb_per_s": 0.0,
        "bytes": 400,
        "latency": LatencySummary.of(histogram),
        "warmup_records": 0,
        "record_size": 100,
        "keys": 0,
        "key_size": 0,
        "acks": "all",
        "compression": "none",
        "throughput_limit": None,
        "interrupted": False,
        **changes,
    }
    return ProduceSummary(**fields)  # type: ignore[arg-type]


def test_produce_summary_keys_in_order_and_aborted_only_when_some_were() -> None:
    document = _produce_summary().as_dict()
    assert list(document) == [
        "topic", "records", "failed", "elapsed_s", "records_per_s", "mb_per_s", "bytes",
        *LATENCY_KEYS,
        "warmup_records", "record_size", "keys", "key_size", "acks", "compression", "throughput_limit",
        "interrupted",
    ]  # fmt: skip
    assert document["latency_avg_ms"] == 2.0 and document["latency_samples"] == 1
    interrupted = _produce_summary(interrupted=True, aborted=7).as_dict()
    assert list(interrupted)[-2:] == ["interrupted", "aborted"] and interrupted["aborted"] == 7


def test_consume_summary_with_and_without_latency() -> None:
    plain = ConsumeSummary(("a", "b"), 6, 10, 1.0, 10.0, 0.001, 1000, 12.5, None, False)
    assert plain.as_dict() == {
        "topics": "a,b",
        "partitions": 6,
        "records": 10,
        "elapsed_s": 1.0,
        "records_per_s": 10.0,
        "mb_per_s": 0.001,
        "bytes": 1000,
        "first_record_ms": 12.5,
        "interrupted": False,
    }
    histogram = LatencyHistogram()
    histogram.record(1500)
    timed = ConsumeSummary(("a",), 1, 1, 1.0, 1.0, 0.0, 3, 1.0, LatencySummary.of(histogram), True)
    keys = list(timed.as_dict())
    assert keys[keys.index("first_record_ms") + 1 : -1] == LATENCY_KEYS
    assert keys[-1] == "interrupted"


def test_records_expected_and_the_default_end() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    bounded = {a: OffsetRange(10, 110), b: OffsetRange(50, 40)}  # b: nothing to read
    assert records_expected(bounded, None) == 100
    assert records_expected(bounded, 30) == 30
    assert records_expected({a: OffsetRange(0, 10), b: OffsetRange(0)}, None) is None  # b never ends
    assert records_expected({a: OffsetRange(0)}, 5) == 5
    beginning = parse_offset_spec("beginning")
    end = default_end(beginning, None, None)
    assert end is not None and str(end) == "end"
    assert default_end(beginning, 10, None) is None
    assert default_end(beginning, None, 5.0) is None
    assert default_end(parse_offset_spec("0:100"), None, None) is None


def _wait_for(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_ctrl_c_asks_to_stop_then_to_abort_then_interrupts() -> None:
    before = signal.getsignal(signal.SIGINT)
    with Interrupts() as interrupts:
        assert not interrupts.stop and not interrupts.abort
        os.kill(os.getpid(), signal.SIGINT)
        _wait_for(lambda: interrupts.stop)
        assert interrupts.stop and not interrupts.abort
        os.kill(os.getpid(), signal.SIGINT)
        _wait_for(lambda: interrupts.abort)
        assert interrupts.abort
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
    assert signal.getsignal(signal.SIGINT) is before


def test_sampler_defaults() -> None:
    fixed = Sampler.measuring(8)
    assert (fixed.every, fixed.adaptive) == (8, False)
    capped = Sampler.measuring(None, 1000.0)  # a slow run: every record
    assert (capped.every, capped.adaptive) == (1, True)
    fast = Sampler.measuring(None)  # unknown rate: sparse until measured
    assert fast.adaptive and fast.every == 128
