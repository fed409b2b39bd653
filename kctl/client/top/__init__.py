"""`kctl top`'s data: a snapshot of a running cluster from the admin API and the brokers' Prometheus
``/metrics`` (``snapshot``: TopCollector, TopSnapshot), and the reading of one broker's metrics
(``scrape``)."""

from __future__ import annotations

from kctl.client.top.scrape import MetricsUnavailable
from kctl.client.top.snapshot import (
    BrokerRow,
    GroupRow,
    PartitionProblem,
    TopCollector,
    TopicRow,
    TopSnapshot,
)

__all__ = [
    "BrokerRow",
    "GroupRow",
    "MetricsUnavailable",
    "PartitionProblem",
    "TopCollector",
    "TopSnapshot",
    "TopicRow",
]
