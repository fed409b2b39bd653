"""Reading a broker's ``/metrics`` in tests: `scrape` fetches the endpoint over HTTP and parses it
with prometheus_client's own parser into `Samples`, which answer a series' value by name and labels.

    samples = scrape(broker.metrics_url)
    samples.value("kafka_server_brokertopicmetrics_messagesin_total", topic="orders")
    samples.total("kafka_server_replicamanager_underreplicatedpartitions")
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "scrape", "scrape_all"]


class Samples:
    """The samples of one scrape: (sample name, labels) -> value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self.series: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in self.families.values():
            for sample in family.samples:
                self.series[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the series ``name`` with exactly ``labels``, or None if there is none."""
        return self.series.get((name, frozenset(labels.items())))

    def matching(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every series of ``name`` whose labels include ``labels``, by its labels."""
        wanted = set(labels.items())
        return {lbl: v for (n, lbl), v in self.series.items() if n == name and wanted <= lbl}

    def total(self, name: str, **labels: str) -> float:
        """The sum of the series of ``name`` whose labels include ``labels``."""
        return sum(self.matching(name, **labels).values())

    def names(self) -> set[str]:
        """The sample names present (a counter's ``_total``, a histogram's ``_bucket``/``_sum``/...)."""
        return {name for name, _ in self.series}


def scrape(url: str, timeout: float = 10.0) -> Samples:
    """GET ``url`` (a broker's ``metrics_url``) and parse it."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return Samples(response.read().decode("utf-8"))


def scrape_all(urls: Iterable[str | None], timeout: float = 10.0) -> list[Samples]:
    """Scrape each URL (None: a broker not running, left out)."""
    return [scrape(url, timeout) for url in urls if url is not None]
