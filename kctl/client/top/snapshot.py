"""`kctl top`'s view of a running cluster, one :class:`TopSnapshot` per refresh of a
:class:`TopCollector`:

- from the admin API (what metrics do not carry, or only on some brokers): the live brokers and the
  controller (DescribeCluster), every topic's partitions with leader, replicas and ISR (Metadata) —
  hence the partitions each broker leads, the brokers down (named as replicas, not alive), the
  partitions offline (no leader) or under-replicated —, and the consumer groups with their lag (ListGroups,
  DescribeGroups, OffsetFetch, ListOffsets: high watermark − committed offset, summed over the
  partitions the group committed) and its trend (the change per second since the previous refresh);
- from each broker's Prometheus ``/metrics`` (kctl.client.top.scrape): requests, bytes in and out and
  records in per second, per broker and per topic (summed over the brokers), and the broker's event
  loop busy fraction. A rate is the difference of two scrapes over the time between them, so the
  first snapshot has none (``None``); a broker without a metrics endpoint, or whose endpoint does not
  answer, has none either and says why (``metrics_error``).

Kafka's metrics count records in, not out (a fetch sends log regions without parsing them): topics
have records/s in, bytes/s in and out."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from kctl.client.admin import AdminClient
from kctl.client.top.scrape import BrokerCounters, MetricsUnavailable, metrics_url, rate, scrape
from kctl.client.types import BrokerInfo
from kctl.common.topic_partition import TopicPartition

__all__ = ["BrokerRow", "GroupRow", "PartitionProblem", "TopCollector", "TopSnapshot", "TopicRow"]


@dataclasses.dataclass(frozen=True)
class BrokerRow:
    broker_id: int
    endpoint: str | None  # None: a broker down (not among the live brokers)
    alive: bool
    controller: bool
    partitions_led: int
    replicas: int
    metrics_url: str | None
    metrics_error: str | None
    request_rate: float | None = None
    bytes_in_per_s: float | None = None
    bytes_out_per_s: float | None = None
    records_in_per_s: float | None = None
    loop_busy: float | None = None


@dataclasses.dataclass(frozen=True)
class TopicRow:
    topic: str
    partitions: int
    internal: bool
    records_in_per_s: float | None
    bytes_in_per_s: float | None
    bytes_out_per_s: float | None
    records_out_per_s: float | None = None  # kctl's own counter (Kafka counts no records out)


@dataclasses.dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    state: str  # "offline" (no leader) or "under-replicated"
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class GroupRow:
    group: str
    state: str
    members: int
    partitions: int  # with a committed offset
    lag: int | None  # None: nothing committed, or the offsets could not be read
    lag_per_s: float | None  # the lag's change per second since the previous refresh


@dataclasses.dataclass(frozen=True)
class TopSnapshot:
    taken_at: float  # time.time()
    interval_s: float | None  # seconds since the previous refresh (None: the first)
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerRow, ...]
    topics: tuple[TopicRow, ...]
    partitions: tuple[PartitionProblem, ...]
    groups: tuple[GroupRow, ...]
    notes: tuple[str, ...]  # what could not be read, and why

    def document(self) -> dict[str, Any]:
        """The snapshot as one JSON-ready object."""
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.taken_at)),
            "interval_s": _round(self.interval_s),
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "brokers": [_rounded(dataclasses.asdict(b)) for b in self.brokers],
            "topics": [_rounded(dataclasses.asdict(t)) for t in self.topics],
            "partitions": [
                {**dataclasses.asdict(p), "replicas": list(p.replicas), "isr": list(p.isr)}
                for p in self.partitions
            ],
            "groups": [_rounded(dataclasses.asdict(g)) for g in self.groups],
            "notes": list(self.notes),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _round(v) if isinstance(v, float) else v for k, v in row.items()}


class TopCollector:
    """Refreshes a :class:`TopSnapshot` of the cluster ``admin`` talks to; keeps the previous scrape
    of each broker and the previous lag of each group, for the rates and trends. ``timeout``: seconds
    each admin call and scrape may take (a broker that does not answer must not freeze the view)."""

    def __init__(self, admin: AdminClient, *, timeout: float = 5.0, groups: bool = True) -> None:
        from kctl.client.group import GroupAdmin

        self.admin = admin
        self.group_admin = GroupAdmin(admin)
        self.timeout = timeout
        self.with_groups = groups
        self._endpoints: dict[int, str | MetricsUnavailable] = {}
        self._counters: dict[int, BrokerCounters] = {}
        self._lags: dict[str, tuple[float, int]] = {}
        self._last: float | None = None

    def refresh(self) -> TopSnapshot:
        now = time.monotonic()
        interval = None if self._last is None else now - self._last
        self._last = now
        notes: list[str] = []
        cluster = self.admin.describe_cluster(timeout=self.timeout)
        topics = self.admin.list_topics(include_internal=True, timeout=self.timeout)
        led: dict[int, int] = {}
        hosted: dict[int, int] = {}
        named: set[int] = set()
        problems = []
        for topic in topics:
            for p in topic.partitions:
                named.update(p.replicas)
                for replica in p.replicas:
                    hosted[replica] = hosted.get(replica, 0) + 1
                if p.leader >= 0:
                    led[p.leader] = led.get(p.leader, 0) + 1
                state = (
                    "offline" if p.leader < 0 else "under-replicated" if len(p.isr) < len(p.replicas) else ""
                )
                if state:
                    problems.append(
                        PartitionProblem(topic.name, p.partition, state, p.leader, p.replicas, p.isr)
                    )
        live = {b.node_id: b for b in cluster.brokers}
        rows: list[BrokerRow] = []
        topic_rates: dict[str, list[float]] = {}
        for broker_id in sorted(set(live) | named):
            broker = live.get(broker_id)
            common: dict[str, Any] = {
                "broker_id": broker_id,
                "controller": broker_id == cluster.controller_id,
                "partitions_led": led.get(broker_id, 0),
                "replicas": hosted.get(broker_id, 0),
            }
            if broker is None:
                rows.append(
                    BrokerRow(endpoint=None, alive=False, metrics_url=None, metrics_error="down", **common)
                )
                self._counters.pop(broker_id, None)
                continue
            rows.append(self._broker_row(broker, common, topic_rates, notes))
        rated = any(row.request_rate is not None for row in rows)  # a topic no broker counted: 0/s
        topic_rows = [
            TopicRow(
                t.name,
                len(t.partitions),
                t.internal,
                *(
                    _sum(topic_rates.get(f"{kind}\0{t.name}"), rated)
                    for kind in ("records", "in", "out", "records out")
                ),
            )
            for t in topics
        ]
        groups = self._groups(now, notes) if self.with_groups else []
        return TopSnapshot(
            taken_at=time.time(),
            interval_s=interval,
            cluster_id=cluster.cluster_id,
            controller_id=cluster.controller_id,
            brokers=tuple(rows),
            topics=tuple(topic_rows),
            partitions=tuple(sorted(problems, key=lambda p: (p.state, p.topic, p.partition))),
            groups=tuple(groups),
            notes=tuple(notes),
        )

    # -- brokers -------------------------------------------------------------------------------
    def _endpoint(self, broker: BrokerInfo) -> str:
        """The broker's /metrics URL (asked once: DescribeConfigs of its metrics.listener)."""
        known = self._endpoints.get(broker.node_id)
        if known is None:
            try:
                entries = self.admin.describe_broker_configs(broker.node_id, timeout=self.timeout)
                listener = next((e.value for e in entries if e.name == "metrics.listener"), None)
                known = metrics_url(listener, broker)
            except MetricsUnavailable as error:
                known = error
            except Exception as error:
                raise MetricsUnavailable(f"cannot read its metrics.listener: {error}") from None
            self._endpoints[broker.node_id] = known
        if isinstance(known, MetricsUnavailable):
            raise known
        return known

    def _broker_row(
        self,
        broker: BrokerInfo,
        common: dict[str, Any],
        topic_rates: dict[str, list[float]],
        notes: list[str],
    ) -> BrokerRow:
        url: str | None = None
        try:
            url = self._endpoint(broker)
            counters = scrape(url, self.timeout)
        except MetricsUnavailable as error:
            if url is not None:  # an endpoint that stopped answering: asked for again next time
                self._endpoints.pop(broker.node_id, None)
            self._counters.pop(broker.node_id, None)
            notes.append(f"broker {broker.node_id}: {error}")
            return BrokerRow(
                endpoint=broker.address, alive=True, metrics_url=url, metrics_error=str(error), **common
            )
        before = self._counters.get(broker.node_id)
        self._counters[broker.node_id] = counters
        row = BrokerRow(
            endpoint=broker.address,
            alive=True,
            metrics_url=url,
            metrics_error=None,
            loop_busy=counters.loop_busy,
            **common,
        )
        if before is None:
            return row
        seconds = counters.at - before.at
        for kind, now, then in (
            ("records", counters.topic_records_in, before.topic_records_in),
            ("in", counters.topic_bytes_in, before.topic_bytes_in),
            ("out", counters.topic_bytes_out, before.topic_bytes_out),
            ("records out", counters.topic_records_out, before.topic_records_out),
        ):
            for topic, value in now.items():
                topic_rates.setdefault(f"{kind}\0{topic}", []).append(
                    rate(value, then.get(topic, 0.0), seconds)
                )
        return dataclasses.replace(
            row,
            request_rate=rate(counters.requests, before.requests, seconds),
            bytes_in_per_s=rate(counters.bytes_in, before.bytes_in, seconds),
            bytes_out_per_s=rate(counters.bytes_out, before.bytes_out, seconds),
            records_in_per_s=rate(counters.records_in, before.records_in, seconds),
        )

    # -- groups --------------------------------------------------------------------------------
    def _groups(self, now: float, notes: list[str]) -> list[GroupRow]:
        groups = self.group_admin
        try:
            listed = groups.list_groups(timeout=self.timeout)
            described = {
                d.group_id: d
                for d in groups.describe_groups([g.group_id for g in listed], timeout=self.timeout)
            }
            committed = {
                g.group_id: groups.committed_offsets(g.group_id, timeout=self.timeout) for g in listed
            }
            partitions = sorted({tp for offsets in committed.values() for tp in offsets})
            ends = self.admin.list_offsets(partitions, "latest", timeout=self.timeout) if partitions else {}
        except Exception as error:
            notes.append(f"consumer groups: {error}")
            return []
        rows = []
        for listing in listed:
            offsets = committed[listing.group_id]
            description = described.get(listing.group_id)
            lag: int | None = None
            for tp, value in offsets.items():
                end = ends.get(TopicPartition(*tp))
                if value is None or end is None or not end.ok:
                    continue
                lag = (lag or 0) + max(end.offset - value.offset, 0)
            trend = None
            previous = self._lags.get(listing.group_id)
            if lag is not None:
                if previous is not None and now > previous[0]:
                    trend = (lag - previous[1]) / (now - previous[0])
                self._lags[listing.group_id] = (now, lag)
            rows.append(
                GroupRow(
                    group=listing.group_id,
                    state=(description.state if description is not None else listing.state) or "",
                    members=len(description.members) if description is not None else 0,
                    partitions=len(offsets),
                    lag=lag,
                    lag_per_s=trend,
                )
            )
        return rows


def _sum(values: list[float] | None, rated: bool) -> float | None:
    if values is None:
        return 0.0 if rated else None
    return sum(values)
