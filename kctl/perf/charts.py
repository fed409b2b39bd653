"""Terminal graphics for `kctl perf`: a sparkline of recent figures (the live display's throughput
and latency trend) and a latency histogram drawn with block characters (printed at the end of a run
on a terminal). Pure functions of numbers: they return text, the command decides where it goes."""

from __future__ import annotations

import math
from collections.abc import Iterable

from kctl.perf.stats import LatencyHistogram

SPARK = "▁▂▃▄▅▆▇█"
BAR = "█"
PARTIAL = " ▏▎▍▌▋▊▉"  # eighths of a cell, for the end of a bar


def sparkline(values: Iterable[float], width: int = 30) -> str:
    """The last ``width`` values as one block character each, scaled from 0 to their maximum (a
    run that has not moved yet is all low blocks)."""
    recent = [max(v, 0.0) for v in list(values)[-width:]]
    if not recent:
        return ""
    top = max(recent)
    if top <= 0:
        return SPARK[0] * len(recent)
    last = len(SPARK) - 1
    return "".join(SPARK[min(last, round(v / top * last))] for v in recent)


def _bar(fraction: float, width: int) -> str:
    eighths = round(max(0.0, min(fraction, 1.0)) * width * 8)
    full, rest = divmod(eighths, 8)
    return BAR * full + (PARTIAL[rest] if rest else "")


def _format_ms(value_us: float) -> str:
    ms = value_us / 1000
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


def latency_histogram(histogram: LatencyHistogram, *, rows: int = 12, width: int = 40) -> list[str]:
    """The latency distribution in at most ``rows`` ranges of equal width on a log scale between
    the smallest and the largest latency seen, each a bar of its share of the records, with the
    count and the running percentage; empty when nothing was measured."""
    buckets = histogram.buckets()
    if not buckets or histogram.min is None or histogram.max is None:
        return []
    low = max(float(histogram.min), 1.0)
    high = max(float(histogram.max), low * 1.01) + 1
    ratio = (high / low) ** (1 / rows)
    edges = [low * ratio**i for i in range(rows + 1)]
    counts = [0] * rows
    for bucket_low, bucket_high, count in buckets:
        middle = max((bucket_low + bucket_high - 1) / 2, low)
        index = min(rows - 1, max(0, int(math.log(middle / low, ratio)))) if ratio > 1 else 0
        counts[index] += count
    total = sum(counts)
    peak = max(counts)
    label_width = max(len(f"{_format_ms(edges[i])}-{_format_ms(edges[i + 1])}") for i in range(rows))
    lines = [f"latency histogram (ms), {total:,} records"]
    seen = 0
    for i, count in enumerate(counts):
        seen += count
        label = f"{_format_ms(edges[i])}-{_format_ms(edges[i + 1])}".rjust(label_width)
        bar = _bar(count / peak, width) if peak else ""
        lines.append(f"  {label} │{bar.ljust(width)} {count:>10,}  {seen / total * 100:6.2f}%")
    return lines
