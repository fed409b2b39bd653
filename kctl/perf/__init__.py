"""Load generators and their statistics: what `kctl perf produce|consume` runs, usable from Python.

Layering: above ``kctl.client`` (and ``kctl.console``, whose topic and partition selection the
consume run shares), below ``kctl.commands``, which only parses options, calls this package and
renders the results.

* ``stats``    — ``LatencyHistogram`` (log-linear, weighted), ``LatencySummary``, ``IntervalStats`` /
  ``Interval`` (one progress interval), ``Sampler`` (which records to measure).
* ``workload`` — ``TokenBucket`` (pacing), payloads and keys, ``parse_duration``, ``Warmup``.
* ``run``      — ``Progress`` (how a run reports its ``Figures``), ``Interrupts`` (Ctrl-C as a stop request).
* ``produce``  — ``ProduceRun`` and its ``ProduceSummary``.
* ``consume``  — ``ConsumeRun`` and its ``ConsumeSummary``.
"""

from kctl.perf.consume import ConsumeRun, ConsumeSummary, default_end, records_expected
from kctl.perf.produce import METADATA_TIMEOUT, ProduceRun, ProduceSummary
from kctl.perf.run import Figures, Interrupts, NoProgress, Progress
from kctl.perf.stats import MB, Interval, IntervalStats, LatencyHistogram, LatencySummary, Sampler
from kctl.perf.workload import (
    TokenBucket,
    Warmup,
    make_keys,
    make_payload,
    parse_duration,
    parse_warmup,
)

__all__ = [
    "MB",
    "METADATA_TIMEOUT",
    "ConsumeRun",
    "ConsumeSummary",
    "Figures",
    "Interrupts",
    "Interval",
    "IntervalStats",
    "LatencyHistogram",
    "LatencySummary",
    "NoProgress",
    "ProduceRun",
    "ProduceSummary",
    "Progress",
    "Sampler",
    "TokenBucket",
    "Warmup",
    "default_end",
    "make_keys",
    "make_payload",
    "parse_duration",
    "parse_warmup",
    "records_expected",
]
