"""Reading one broker's Prometheus ``/metrics`` for `kctl top`: where its endpoint is (its
``metrics.listener``, from DescribeConfigs), and the few series `kctl top` shows, parsed with
prometheus_client's parser into :class:`BrokerCounters`.

A broker with ``metrics.listener`` on ``0.0.0.0`` (or ``::``) is scraped at its advertised host; a
broker that bound port 0 describes the port it got (kctl.broker.apis.describe_configs)."""

from __future__ import annotations

import dataclasses
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from kctl.client.types import BrokerInfo

#: the request metrics' second names of Fetch (FetchConsumer, FetchFollower): counted under Fetch too
SECOND_NAMES = frozenset({"FetchConsumer", "FetchFollower"})
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


class MetricsUnavailable(Exception):
    """A broker's metrics cannot be read: no endpoint, or it did not answer (the message says which)."""


def metrics_url(listener: str | None, broker: BrokerInfo) -> str:
    """The ``/metrics`` URL of a broker whose ``metrics.listener`` is ``listener``; MetricsUnavailable
    when it is empty (metrics off)."""
    if not listener or not listener.strip():
        raise MetricsUnavailable("no metrics endpoint (metrics.listener is empty)")
    parts = urlsplit(listener.strip())
    host = parts.hostname or ""
    if host in _WILDCARD_HOSTS:
        host = broker.host
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme or 'http'}://{host}:{parts.port}/metrics"


@dataclasses.dataclass(frozen=True)
class BrokerCounters:
    """What one scrape of a broker says (counters are totals since the broker started)."""

    at: float  # time.monotonic() of the scrape
    requests: float  # every API, Fetch's second names left out
    bytes_in: float  # all topics
    bytes_out: float
    records_in: float
    loop_busy: float | None  # kctl_eventloop_busy_ratio
    topic_records_in: dict[str, float]
    topic_bytes_in: dict[str, float]
    topic_bytes_out: dict[str, float]
    topic_records_out: dict[str, float] = dataclasses.field(default_factory=dict)  # kctl's own counter


def parse_counters(text: str, at: float) -> BrokerCounters:
    """The series `kctl top` reads, from a scrape's text."""
    from prometheus_client.parser import text_string_to_metric_families

    requests = bytes_in = bytes_out = records_in = 0.0
    loop_busy: float | None = None
    per_topic: dict[str, dict[str, float]] = {"records": {}, "in": {}, "out": {}, "records out": {}}
    which = {
        "kafka_server_brokertopicmetrics_messagesin_total": ("records", "records_in"),
        "kafka_server_brokertopicmetrics_bytesin_total": ("in", "bytes_in"),
        "kafka_server_brokertopicmetrics_bytesout_total": ("out", "bytes_out"),
        "kctl_server_brokertopicmetrics_messagesout_total": ("records out", "records_out"),
    }
    totals = {"records_in": 0.0, "bytes_in": 0.0, "bytes_out": 0.0, "records_out": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            if name == "kafka_network_requestmetrics_requests_total":
                if labels.get("request") not in SECOND_NAMES:
                    requests += value
            elif name in which:
                kind, total = which[name]
                topic = labels.get("topic")
                if topic is None:
                    totals[total] = value
                else:
                    per_topic[kind][topic] = value
            elif name == "kctl_eventloop_busy_ratio":
                loop_busy = value
    records_in, bytes_in, bytes_out = totals["records_in"], totals["bytes_in"], totals["bytes_out"]
    return BrokerCounters(
        at,
        requests,
        bytes_in,
        bytes_out,
        records_in,
        loop_busy,
        per_topic["records"],
        per_topic["in"],
        per_topic["out"],
        per_topic["records out"],
    )


def scrape(url: str, timeout: float) -> BrokerCounters:
    """GET ``url`` and parse it; MetricsUnavailable when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            text = response.read().decode("utf-8")
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise MetricsUnavailable(f"metrics endpoint {url} did not answer ({reason})") from None
    return parse_counters(text, time.monotonic())


def rate(now: float, before: float, seconds: float) -> float:
    """A counter's rate per second between two scrapes (0 after a restart reset it)."""
    if seconds <= 0:
        return 0.0
    return max(now - before, 0.0) / seconds
