"""Starting the metrics endpoint (kctl.broker.metrics.BrokerMetrics.start) makes the full garbage
collection its imports made due, so that it does not fall on a scrape or on the first requests served
(issue 26: the cost of metrics). Below the broker: a source whose partitions are never read (nothing
is scraped) and a real endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import urllib.error
import urllib.request
from typing import Any, cast

from kctl.broker.metrics import BrokerMetrics
from kctl.broker.metrics.source import MetricsSource


class _Source:
    """A standalone broker as far as start() reads it (not replicated: no leader-offsets poller)."""

    replicated = False
    broker_id = 0


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def test_start_makes_a_full_collection_and_serves() -> None:
    async def main() -> tuple[int, int, str | None, int]:
        metrics = BrokerMetrics("http://127.0.0.1:0")
        before = _full_collections()
        await metrics.start(cast(MetricsSource, _Source()))
        after = _full_collections()
        url = metrics.url
        try:
            assert url is not None

            def head() -> int:
                request = urllib.request.Request(url.replace("/metrics", "/nothing"), method="HEAD")
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        return int(response.status)
                except urllib.error.HTTPError as error:
                    return int(error.code)

            status = await asyncio.to_thread(head)
        finally:
            await metrics.stop()
        return before, after, url, status

    before, after, url, status = asyncio.run(main())
    assert after > before, "no full collection at start"
    assert url is not None and url.startswith("http://127.0.0.1:")
    assert status == 404  # serving (a path other than /metrics: the collector is not run)


def test_no_listener_serves_nothing() -> None:
    async def main() -> Any:
        metrics = BrokerMetrics("")
        await metrics.start(cast(MetricsSource, _Source()))
        return metrics.url

    assert asyncio.run(main()) is None
