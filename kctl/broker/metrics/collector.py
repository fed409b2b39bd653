"""The prometheus_client Collector of one broker: at each scrape it turns the request-path counters
(kctl.broker.metrics.stats) into metric families and computes every gauge from the broker's state —
hosted partitions and their ISR, logs, the controller's view, connections, groups and their committed
offsets (consumer lag). Nothing is kept up to date between scrapes for the gauges: their cost is the
scrape's, never the request path's.

``collect`` runs on the event loop (kctl.broker.metrics.http calls it there), so it reads the broker's
dicts with nothing changing under it. Names, types, labels and help come from
kctl.broker.metrics.catalog; ``families`` refuses a name missing there."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kctl.broker.group.membership import GroupState
from kctl.broker.metrics.catalog import BY_NAME, COUNTER, GAUGE, HISTOGRAM
from kctl.broker.metrics.stats import REQUEST_TIMES, TOPIC_COUNTERS, BrokerStats, cumulative
from kctl.broker.quotas import FETCH, PRODUCE
from kctl.common.time_histogram import TimeHistogram
from kctl.common.topic_partition import TopicPartition
from kctl.log.flush_stats import LOG_FLUSHES

if TYPE_CHECKING:
    from kctl.broker.metrics.source import MetricsSource


class LoopReadings(Protocol):
    """What the collector reads of the event loop monitor (kctl.broker.metrics.loop)."""

    busy_ratio: float
    lag_seconds: float


class Families:
    """The families of one scrape, by catalog name: ``add(name, labels, value)``."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def family(self, name: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            spec = BY_NAME[name]  # KeyError: a metric missing from the catalog
            labels = list(spec.labels)
            if spec.type == COUNTER:
                family = CounterMetricFamily(spec.family, spec.help, labels=labels)
            elif spec.type == GAUGE:
                family = GaugeMetricFamily(spec.family, spec.help, labels=labels)
            else:
                assert spec.type == HISTOGRAM
                family = HistogramMetricFamily(spec.family, spec.help, labels=labels)
            self._families[name] = family
        return family

    def add(self, name: str, value: float, *labels: str) -> None:
        family = self.family(name)
        family.add_metric(list(labels), value)  # type: ignore[attr-defined]

    def declare(self, *names: str) -> None:
        """Families exported even when no sample has been added (a scrape still lists them)."""
        for name in names:
            self.family(name)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


class RemoteOffsets(Protocol):
    """High watermarks of partitions this broker does not host (kctl.broker.metrics.leader_offsets)."""

    high_watermarks: dict[TopicPartition, int]


class BrokerCollector(Collector):
    """Collects one broker's metrics (register it in a CollectorRegistry of the broker's own)."""

    def __init__(
        self,
        broker: MetricsSource,
        stats: BrokerStats,
        loop: LoopReadings | None = None,
        remote: RemoteOffsets | None = None,
    ) -> None:
        self.broker = broker
        self.stats = stats
        self.loop = loop
        self.remote = remote

    def collect(self) -> Iterable[Metric]:
        families = Families()
        self._topics(families)
        self._requests(families)
        self._replicas(families)
        self._controller(families)
        self._connections(families)
        self._groups(families)
        self._event_loop(families)
        self._replication(families)
        return list(families)

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on the broker's state: not known in advance

    # -- counters from the request path ---------------------------------------------------------
    def _topics(self, families: Families) -> None:
        stats = self.stats
        existing = self.broker.metadata.topics()  # a deleted topic's series go, as Kafka removes its metrics
        for gone in [name for name in stats.topics if name not in existing]:
            stats.forget_topic(gone)
        for attribute, name in TOPIC_COUNTERS:
            family = families.family(name)
            # the all-topics series has no topic label (Kafka's MBean without topic=)
            family.add_sample(name, {}, getattr(stats.all_topics, attribute))
            for topic, topic_stats in stats.topics.items():
                family.add_sample(name, {"topic": topic}, getattr(topic_stats, attribute))
        families.add("kafka_server_brokertopicmetrics_replicationbytesout_total", stats.replication_bytes_out)

    def _requests(self, families: Families) -> None:
        families.declare("kafka_network_requestmetrics_requests_total")
        for request, stats in self.stats.request_totals().items():
            families.add("kafka_network_requestmetrics_requests_total", stats.requests, request)
            for index, short in enumerate(REQUEST_TIMES):
                counts, sum_ms = stats.histogram(index)
                family = families.family(f"kafka_network_requestmetrics_{short}")
                family.add_metric([request], cumulative(counts), sum_ms)  # type: ignore[attr-defined]

    # -- gauges computed now ------------------------------------------------------------------
    def _replicas(self, families: Families) -> None:
        replicas = self.broker.replicas
        partitions = list(replicas.partitions.values())
        leaders = under = under_min = at_min = 0
        for partition in partitions:
            if not partition.is_leader:
                continue
            leaders += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                under += 1
            min_isr = partition.min_insync_replicas
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
        prefix = "kafka_server_replicamanager_"
        families.add(prefix + "partitioncount", len(partitions))
        families.add(prefix + "leadercount", leaders)
        families.add(prefix + "underreplicatedpartitions", under)
        families.add(prefix + "underminisrpartitioncount", under_min)
        families.add(prefix + "atminisrpartitioncount", at_min)
        families.add(prefix + "offlinereplicacount", len(replicas.offline_partitions))
        families.add("kafka_log_logmanager_offlinelogdirectorycount", len(replicas.log_manager.offline_dirs))
        families.add(prefix + "isrshrinks_total", replicas.isr_shrinks)
        families.add(prefix + "isrexpands_total", replicas.isr_expands)
        families.declare(
            "kafka_log_log_size",
            "kafka_log_log_logstartoffset",
            "kafka_log_log_logendoffset",
            "kafka_log_log_numlogsegments",
            "kafka_topic_partition_current_offset",
            "kafka_topic_partition_oldest_offset",
        )
        for partition in partitions:
            tp = partition.topic_partition
            labels = (tp.topic, str(tp.partition))
            plog = partition.log
            families.add("kafka_log_log_size", plog.size_in_bytes, *labels)
            families.add("kafka_log_log_logstartoffset", plog.log_start_offset, *labels)
            families.add("kafka_log_log_logendoffset", plog.log_end_offset, *labels)
            families.add("kafka_log_log_numlogsegments", len(plog.segments), *labels)
            if partition.is_leader:
                families.add("kafka_topic_partition_current_offset", partition.high_watermark, *labels)
                families.add("kafka_topic_partition_oldest_offset", partition.log_start_offset, *labels)

    def _controller(self, families: Families) -> None:
        broker = self.broker
        controller = broker.controller
        metadata = broker.metadata
        active = controller.active
        offline = partitions = topics = 0
        if active:
            live = {b.broker_id for b in metadata.brokers()}
            for name, record in metadata.topics().items():
                topics += 1
                for index in record.assignment:
                    partitions += 1
                    state = metadata.partition_state(name, index)
                    if broker.replicated and (state is None or state.leader < 0 or state.leader not in live):
                        offline += 1
        prefix = "kafka_controller_kafkacontroller_"
        families.add(prefix + "activecontrollercount", 1 if active else 0)
        families.add(prefix + "offlinepartitionscount", offline)
        families.add(prefix + "globalpartitioncount", partitions)
        families.add(prefix + "globaltopiccount", topics)
        families.add(
            "kafka_controller_controllerstats_leaderelection_total",
            controller.leader_elections,
        )
        families.add(
            "kafka_controller_controllerstats_uncleanleaderelections_total",
            controller.unclean_leader_elections,
        )

    def _connections(self, families: Families) -> None:
        families.declare(
            "kafka_server_socket_server_metrics_connection_count",
            "kafka_server_socket_server_metrics_connection_creation_total",
            "kafka_server_socket_server_metrics_failed_authentication_total",
            "kafka_server_socket_server_metrics_connection_refused_total",
        )
        for server in self.broker.servers:
            prefix = "kafka_server_socket_server_metrics_"
            families.add(prefix + "connection_count", server.connection_count, server.name)
            families.add(prefix + "connection_creation_total", server.connections_created, server.name)
            families.add(prefix + "failed_authentication_total", server.failed_authentications, server.name)
            families.add(prefix + "connection_refused_total", server.connections_refused, server.name)

    def _groups(self, families: Families) -> None:
        groups = list(self.broker.groups.groups.values())
        by_state = dict.fromkeys(GroupState, 0)
        offsets = 0
        for group in groups:
            by_state[group.state] += 1
            offsets += len(group.offsets)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        families.add(prefix + "numgroups", len(groups))
        for state, count in by_state.items():
            families.add(prefix + f"numgroups{state.value.lower()}", count)
        families.add(prefix + "numoffsets", offsets)
        families.declare(
            "kafka_consumergroup_current_offset", "kafka_consumergroup_lag", "kafka_consumergroup_lag_sum"
        )
        hosted: dict[Any, Any] = self.broker.replicas.partitions
        remote = self.remote.high_watermarks if self.remote is not None else {}
        for group in groups:
            sums: dict[str, int] = {}
            for (topic, index), value in sorted(group.offsets.items()):
                labels = (group.group_id, topic, str(index))
                families.add("kafka_consumergroup_current_offset", value.offset, *labels)
                tp = TopicPartition(topic, index)
                partition = hosted.get(tp)
                if partition is not None:
                    high_watermark = partition.high_watermark
                elif tp in remote:  # asked of its leader (at most a few seconds ago)
                    high_watermark = remote[tp]
                else:
                    continue
                lag = max(high_watermark - value.offset, 0)
                families.add("kafka_consumergroup_lag", lag, *labels)
                sums[topic] = sums.get(topic, 0) + lag
            for topic, total in sums.items():
                families.add("kafka_consumergroup_lag_sum", total, group.group_id, topic)

    def _replication(self, families: Families) -> None:
        fetchers = self.broker.replicas.fetchers  # None without replication
        lag = 0
        for fetcher in list(fetchers.fetchers.values()) if fetchers is not None else []:
            for state in fetcher.partitions.values():
                if state.leader_high_watermark >= 0:
                    lag = max(lag, state.leader_high_watermark - state.partition.log_end_offset)
        families.add("kafka_server_replicafetchermanager_maxlag", lag, "Replica")
        stats = self.stats
        families.add("kafka_server_sessionexpirelistener_zookeeperexpires_total", stats.zookeeper_expires)
        families.add(
            "kafka_server_sessionexpirelistener_zookeeperdisconnects_total", stats.zookeeper_disconnects
        )
        families.declare("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms")
        latency = getattr(self.broker.registry, "request_latency", None)  # the ZooKeeper backend's
        if isinstance(latency, TimeHistogram):
            family = families.family("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms")
            family.add_metric([], cumulative(latency.counts), latency.sum_s * 1000)  # type: ignore[attr-defined]
        self._quotas(families)
        flushes = families.family("kafka_log_logflushstats_logflushrateandtimems")
        flushes.add_metric([], cumulative(LOG_FLUSHES.counts), LOG_FLUSHES.sum_s * 1000)  # type: ignore[attr-defined]

    def _quotas(self, families: Families) -> None:
        kinds = {PRODUCE: "produce", FETCH: "fetch"}
        names = [f"kafka_server_{k}_{a}" for k in kinds.values() for a in ("byte_rate", "throttle_time")]
        families.declare(*names)
        quotas = self.broker.quotas
        for key, user, client, byte_rate, throttle in quotas.client_metrics():
            kind = kinds.get(key)
            if kind is not None:
                families.add(f"kafka_server_{kind}_byte_rate", byte_rate, user, client)
                families.add(f"kafka_server_{kind}_throttle_time", throttle, user, client)

    def _event_loop(self, families: Families) -> None:
        loop = self.loop
        busy = loop.busy_ratio if loop is not None else 0.0
        families.add("kctl_eventloop_busy_ratio", busy)
        families.add("kctl_eventloop_lag_seconds", loop.lag_seconds if loop is not None else 0.0)
        families.add("kafka_network_socketserver_networkprocessoravgidlepercent", 1.0 - busy)
