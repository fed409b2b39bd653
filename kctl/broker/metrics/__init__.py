"""Broker metrics: counters the request path updates (``stats``), a Collector computing the rest from
the broker's state at scrape time (``collector``), the catalog of every metric and its Kafka MBean
(``catalog``, rendered into docs/metrics.md), the event loop monitor (``loop``) and the ``/metrics``
HTTP endpoint on the event loop (``http``). ``BrokerMetrics`` ties them to one broker: the counters
always exist (a few integer additions per request), the endpoint, the collector and the loop monitor
only when ``metrics.listener`` is set."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from kctl.broker.metrics.stats import BrokerStats

if TYPE_CHECKING:
    from kctl.broker.metrics.http import MetricsServer
    from kctl.broker.metrics.leader_offsets import LeaderOffsets
    from kctl.broker.metrics.loop import EventLoopMonitor
    from kctl.broker.metrics.source import MetricsSource


class BrokerMetrics:
    """One broker's metrics: ``stats`` for the handlers; ``start``/``stop`` the endpoint."""

    def __init__(self, listener: str) -> None:
        self.listener = listener.strip()
        self.stats = BrokerStats()
        self.server: MetricsServer | None = None
        self.loop_monitor: EventLoopMonitor | None = None
        self.leader_offsets: LeaderOffsets | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.listener)

    @property
    def url(self) -> str | None:
        """http://HOST:PORT/metrics once serving."""
        return self.server.url if self.server is not None else None

    async def start(self, broker: MetricsSource) -> None:
        """Serve /metrics on metrics.listener (nothing when it is empty)."""
        if not self.enabled:
            return
        from prometheus_client.registry import CollectorRegistry

        from kctl.broker.metrics.collector import BrokerCollector
        from kctl.broker.metrics.http import MetricsServer
        from kctl.broker.metrics.listener import parse_metrics_listener
        from kctl.broker.metrics.loop import EventLoopMonitor

        host, port = parse_metrics_listener(self.listener)
        self.loop_monitor = EventLoopMonitor()
        if broker.replicated:
            from kctl.broker.metrics.leader_offsets import LeaderOffsets

            self.leader_offsets = LeaderOffsets(broker)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker, self.stats, self.loop_monitor, self.leader_offsets))
        server = MetricsServer(registry, host, port)
        await server.start()
        self.server = server
        self.loop_monitor.start()
        if self.leader_offsets is not None:
            self.leader_offsets.start()
        # The imports above (prometheus_client, the collector) leave some 25,000 new objects behind,
        # which make the interpreter's first full collection due: left to itself it falls on the next
        # allocations, a scrape or the first seconds of traffic (~30 ms of the loop, measured with
        # bench_broker; a 0.3 s benchmark run loses 10% to it). Made here, at start, it costs nothing
        # once serving. Then what survived is frozen (out of every later collection's walk: these
        # objects live as long as the broker).
        gc.collect()
        gc.freeze()

    async def stop(self) -> None:
        if self.leader_offsets is not None:
            await self.leader_offsets.stop()
            self.leader_offsets = None
        if self.loop_monitor is not None:
            await self.loop_monitor.stop()
            self.loop_monitor = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
