"""Every metric a broker exports: its Prometheus name, type, labels, meaning and the Kafka MBean it
mirrors. The collector takes each metric's help text from here (a metric it emits without an entry
here is a bug: ``tests/broker/test_metrics_collector.py``), and ``scripts/gen_docs.py`` renders the
table into ``docs/metrics.md``.

The names are what the Prometheus JMX exporter's usual Kafka rules (``lowercaseOutputName``) make of
Kafka's MBeans: ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`` becomes the
counter ``kafka_server_brokertopicmetrics_messagesin_total{topic="T"}``, a ``Value`` gauge such as
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` becomes
``kafka_server_replicamanager_underreplicatedpartitions``. Kafka's request timers
(``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``) are Prometheus histograms in
milliseconds here (``_bucket``, ``_sum``, ``_count``), not the exporter's emulated quantiles.
Consumer lag uses kafka_exporter's names (``kafka_consumergroup_lag``). What Kafka has no MBean for
(the event loop, records out) is named ``kctl_*``."""

from __future__ import annotations

from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"

TP = ("topic", "partition")
GROUP_TP = ("consumergroup", "topic", "partition")


@dataclass(frozen=True)
class MetricDef:
    """One exported metric. ``name`` is the family name as scraped (counters end in ``_total``)."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    mbean: str

    @property
    def family(self) -> str:
        """The name prometheus_client's metric families take (a counter's without ``_total``)."""
        return self.name.removesuffix("_total") if self.type == COUNTER else self.name


def _topic_counter(short: str, mbean_name: str, meaning: str) -> MetricDef:
    return MetricDef(
        f"kafka_server_brokertopicmetrics_{short}_total",
        COUNTER,
        ("topic",),
        f"{meaning} Without the topic label: all topics together.",
        f"kafka.server:type=BrokerTopicMetrics,name={mbean_name}[,topic=T]",
    )


def _replica_gauge(short: str, mbean_name: str, meaning: str) -> MetricDef:
    return MetricDef(
        f"kafka_server_replicamanager_{short}",
        GAUGE,
        (),
        meaning,
        f"kafka.server:type=ReplicaManager,name={mbean_name}",
    )


def _controller_gauge(short: str, mbean_name: str, meaning: str) -> MetricDef:
    return MetricDef(
        f"kafka_controller_kafkacontroller_{short}",
        GAUGE,
        (),
        meaning,
        f"kafka.controller:type=KafkaController,name={mbean_name}",
    )


def _request_time(short: str, mbean_name: str, meaning: str) -> MetricDef:
    return MetricDef(
        f"kafka_network_requestmetrics_{short}",
        HISTOGRAM,
        ("request",),
        f"{meaning} (milliseconds), per API (Kafka's API names; Fetch also as FetchConsumer or "
        "FetchFollower).",
        f"kafka.network:type=RequestMetrics,name={mbean_name},request=R",
    )


def _groups(short: str, mbean_name: str, meaning: str) -> MetricDef:
    return MetricDef(
        f"kafka_coordinator_group_groupmetadatamanager_{short}",
        GAUGE,
        (),
        meaning,
        f"kafka.coordinator.group:type=GroupMetadataManager,name={mbean_name}",
    )


METRICS: tuple[MetricDef, ...] = (
    # -- topics (counted once per partition of a request, never per record) --------------------
    _topic_counter("messagesin", "MessagesInPerSec", "Records appended by produce requests."),
    MetricDef(
        "kctl_server_brokertopicmetrics_messagesout_total",
        COUNTER,
        ("topic",),
        "kctl's own: records sent to consumers, counted per partition of a fetch response from the log "
        "read (offset after the last whole batch sent - fetch offset; a partial last batch does not "
        "count, nor do followers' fetches). Without the topic label: all topics together.",
        "(none; Kafka counts no records out)",
    ),
    _topic_counter("bytesin", "BytesInPerSec", "Bytes of record batches appended by produce requests."),
    _topic_counter("bytesout", "BytesOutPerSec", "Bytes of records sent to consumers by fetch responses."),
    _topic_counter(
        "bytesrejected",
        "BytesRejectedPerSec",
        "Bytes of record batches refused for what they hold (too large, corrupt, invalid records).",
    ),
    _topic_counter(
        "failedproducerequests", "FailedProduceRequestsPerSec", "Partitions of produce requests that failed."
    ),
    _topic_counter(
        "failedfetchrequests", "FailedFetchRequestsPerSec", "Partitions of fetch requests that failed."
    ),
    _topic_counter(
        "totalproducerequests", "TotalProduceRequestsPerSec", "Partitions of produce requests received."
    ),
    _topic_counter(
        "totalfetchrequests", "TotalFetchRequestsPerSec", "Partitions of fetch requests received."
    ),
    MetricDef(
        "kafka_server_brokertopicmetrics_replicationbytesout_total",
        COUNTER,
        (),
        "Bytes of records sent to follower replicas.",
        "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec",
    ),
    # -- replica manager (computed at scrape time from the hosted partitions) -------------------
    _replica_gauge("partitioncount", "PartitionCount", "Partitions this broker hosts (leader or follower)."),
    _replica_gauge("leadercount", "LeaderCount", "Partitions this broker leads."),
    _replica_gauge(
        "underreplicatedpartitions",
        "UnderReplicatedPartitions",
        "Partitions this broker leads whose ISR is smaller than their replica set.",
    ),
    _replica_gauge(
        "underminisrpartitioncount",
        "UnderMinIsrPartitionCount",
        "Partitions this broker leads whose ISR is smaller than min.insync.replicas (acks=all fails).",
    ),
    _replica_gauge(
        "atminisrpartitioncount",
        "AtMinIsrPartitionCount",
        "Partitions this broker leads whose ISR is exactly min.insync.replicas.",
    ),
    _replica_gauge(
        "offlinereplicacount",
        "OfflineReplicaCount",
        "Replicas in offline log directories (their disk failed; they answer KAFKA_STORAGE_ERROR).",
    ),
    MetricDef(
        "kafka_server_replicamanager_isrshrinks_total",
        COUNTER,
        (),
        "ISR changes written by this broker as leader that removed replicas.",
        "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
    ),
    MetricDef(
        "kafka_server_replicamanager_isrexpands_total",
        COUNTER,
        (),
        "ISR changes written by this broker as leader that added replicas.",
        "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec",
    ),
    # -- controller (the cluster-wide gauges only on the active controller, 0 elsewhere) --------
    _controller_gauge(
        "activecontrollercount",
        "ActiveControllerCount",
        "1 on the active controller, 0 on the other brokers (summed over a cluster: 1).",
    ),
    _controller_gauge(
        "offlinepartitionscount",
        "OfflinePartitionsCount",
        "On the active controller: partitions without a live leader.",
    ),
    _controller_gauge(
        "globalpartitioncount", "GlobalPartitionCount", "On the active controller: partitions in the cluster."
    ),
    _controller_gauge(
        "globaltopiccount", "GlobalTopicCount", "On the active controller: topics in the cluster."
    ),
    MetricDef(
        "kafka_controller_controllerstats_leaderelection_total",
        COUNTER,
        (),
        "Partition leaders this broker elected (changed) while active controller.",
        "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
    ),
    MetricDef(
        "kafka_controller_controllerstats_uncleanleaderelections_total",
        COUNTER,
        (),
        "Unclean leader elections (a leader from outside the ISR) this broker made as controller.",
        "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
    ),
    # -- requests ---------------------------------------------------------------------------------
    MetricDef(
        "kafka_network_requestmetrics_requests_total",
        COUNTER,
        ("request",),
        "Requests handled, per API (Kafka's API names; Fetch also as FetchConsumer or FetchFollower).",
        "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R",
    ),
    _request_time("totaltimems", "TotalTimeMs", "Time from a request's arrival to its response's sending"),
    _request_time(
        "requestqueuetimems",
        "RequestQueueTimeMs",
        "Time a request waited behind earlier requests of its connection",
    ),
    _request_time("localtimems", "LocalTimeMs", "Time a request spent in its handler, not parked"),
    _request_time(
        "remotetimems",
        "RemoteTimeMs",
        "Time a request was parked: an acks=all produce waiting for followers, a fetch long-polling",
    ),
    _request_time(
        "responsesendtimems", "ResponseSendTimeMs", "Time spent handing the response to the socket"
    ),
    # -- the event loop (Kafka's network/handler thread idle ratios' equivalent) -----------------
    MetricDef(
        "kctl_eventloop_busy_ratio",
        GAUGE,
        (),
        "Fraction of the last interval (1 s) the event loop's thread spent on the CPU.",
        "(none; the inverse of NetworkProcessorAvgIdlePercent)",
    ),
    MetricDef(
        "kctl_eventloop_lag_seconds",
        GAUGE,
        (),
        "How late the event loop ran a callback due now, last measured (once a second).",
        "(none)",
    ),
    MetricDef(
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        GAUGE,
        (),
        "1 - kctl_eventloop_busy_ratio: the event loop does Kafka's network and handler threads' work.",
        "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent",
    ),
    # -- logs ---------------------------------------------------------------------------------------
    MetricDef(
        "kafka_log_logmanager_offlinelogdirectorycount",
        GAUGE,
        (),
        "Log directories offline since their disk failed (the broker halts when the last one fails).",
        "kafka.log:type=LogManager,name=OfflineLogDirectoryCount",
    ),
    MetricDef(
        "kafka_log_log_size",
        GAUGE,
        TP,
        "Bytes of the partition's log on disk.",
        "kafka.log:type=Log,name=Size",
    ),
    MetricDef(
        "kafka_log_log_logstartoffset",
        GAUGE,
        TP,
        "The partition's log start offset.",
        "kafka.log:type=Log,name=LogStartOffset",
    ),
    MetricDef(
        "kafka_log_log_logendoffset",
        GAUGE,
        TP,
        "The partition's log end offset.",
        "kafka.log:type=Log,name=LogEndOffset",
    ),
    MetricDef(
        "kafka_log_log_numlogsegments",
        GAUGE,
        TP,
        "Segments of the partition's log.",
        "kafka.log:type=Log,name=NumLogSegments",
    ),
    # -- connections -------------------------------------------------------------------------------
    MetricDef(
        "kafka_server_socket_server_metrics_connection_count",
        GAUGE,
        ("listener",),
        "Open client connections, per listener.",
        "kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N connection-count",
    ),
    MetricDef(
        "kafka_server_socket_server_metrics_connection_creation_total",
        COUNTER,
        ("listener",),
        "Connections accepted, per listener.",
        "kafka.server:type=socket-server-metrics connection-creation-total",
    ),
    MetricDef(
        "kafka_server_socket_server_metrics_failed_authentication_total",
        COUNTER,
        ("listener",),
        "SASL authentications that failed, per listener.",
        "kafka.server:type=socket-server-metrics failed-authentication-total",
    ),
    MetricDef(
        "kafka_server_socket_server_metrics_connection_refused_total",
        COUNTER,
        ("listener",),
        "Connections closed when accepted: over max.connections or max.connections.per.ip.",
        "(kctl; Kafka counts these in its acceptor's connection throttling)",
    ),
    # -- replication and ZooKeeper -------------------------------------------------------------
    MetricDef(
        "kafka_server_replicafetchermanager_maxlag",
        GAUGE,
        ("clientid",),
        "Largest lag, in records, of a partition this broker follows: the leader's high watermark "
        "(from the last fetch) minus the follower's log end offset.",
        "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica",
    ),
    MetricDef(
        "kafka_server_sessionexpirelistener_zookeeperexpires_total",
        COUNTER,
        (),
        "Times this broker's ZooKeeper session expired.",
        "kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec",
    ),
    MetricDef(
        "kafka_server_sessionexpirelistener_zookeeperdisconnects_total",
        COUNTER,
        (),
        "Times this broker's ZooKeeper connection was lost (suspended).",
        "kafka.server:type=SessionExpireListener,name=ZooKeeperDisconnectsPerSec",
    ),
    MetricDef(
        "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
        HISTOGRAM,
        (),
        "Time of the broker's ZooKeeper operations (milliseconds): one request, or one pipelined "
        "batch of reads (a metadata refresh); no samples on a broker without ZooKeeper.",
        "kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs",
    ),
    MetricDef(
        "kafka_log_logflushstats_logflushrateandtimems",
        HISTOGRAM,
        (),
        "Time of the log's flushes (milliseconds): each segment's fsync with its indexes', whether "
        "due to flush.ms, flush.messages, a roll or a clean shutdown; the count is the flush rate.",
        "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs",
    ),
    # -- client quotas -------------------------------------------------------------------------
    *(
        MetricDef(
            f"kafka_server_{kind}_{attribute}",
            GAUGE,
            ("user", "client_id"),
            f"{meaning} of each client measured against a {quota} quota (no series without quotas).",
            f"kafka.server:type={mbean},user=U,client-id=C {attribute.replace('_', '-')}",
        )
        for kind, mbean, quota in (
            ("produce", "Produce", "producer_byte_rate"),
            ("fetch", "Fetch", "consumer_byte_rate"),
        )
        for attribute, meaning in (
            ("byte_rate", "Bytes per second over the quota's sample windows"),
            ("throttle_time", "Average throttle time (ms) given to its requests over the sample windows"),
        )
    ),
    # -- group coordinator ---------------------------------------------------------------------
    _groups("numgroups", "NumGroups", "Consumer groups this broker coordinates."),
    _groups("numgroupsstable", "NumGroupsStable", "Coordinated groups in state Stable."),
    _groups(
        "numgroupspreparingrebalance",
        "NumGroupsPreparingRebalance",
        "Coordinated groups in state PreparingRebalance.",
    ),
    _groups(
        "numgroupscompletingrebalance",
        "NumGroupsCompletingRebalance",
        "Coordinated groups in state CompletingRebalance.",
    ),
    _groups("numgroupsempty", "NumGroupsEmpty", "Coordinated groups in state Empty."),
    _groups("numgroupsdead", "NumGroupsDead", "Coordinated groups in state Dead."),
    _groups("numoffsets", "NumOffsets", "Committed offsets of the coordinated groups."),
    # -- consumer lag (kafka_exporter's names) ----------------------------------------------------
    MetricDef(
        "kafka_consumergroup_current_offset",
        GAUGE,
        GROUP_TP,
        "A coordinated group's committed offset of a partition.",
        "(kafka_exporter)",
    ),
    MetricDef(
        "kafka_consumergroup_lag",
        GAUGE,
        GROUP_TP,
        "High watermark minus committed offset, computed by the group's coordinator: from the "
        "partition's own high watermark when it hosts it, otherwise from its leader's (asked every 5 s).",
        "(kafka_exporter)",
    ),
    MetricDef(
        "kafka_consumergroup_lag_sum",
        GAUGE,
        ("consumergroup", "topic"),
        "kafka_consumergroup_lag summed over a topic's partitions.",
        "(kafka_exporter)",
    ),
    MetricDef(
        "kafka_topic_partition_current_offset",
        GAUGE,
        TP,
        "High watermark of each partition this broker leads.",
        "(kafka_exporter)",
    ),
    MetricDef(
        "kafka_topic_partition_oldest_offset",
        GAUGE,
        TP,
        "Log start offset of each partition this broker leads.",
        "(kafka_exporter)",
    ),
)

BY_NAME: dict[str, MetricDef] = {metric.name: metric for metric in METRICS}


def render_reference() -> str:
    """docs/metrics.md: the table of every metric (generated by scripts/gen_docs.py)."""
    lines = [
        "# Broker metrics",
        "",
        "<!-- generated by scripts/gen_docs.py from kctl/broker/metrics/catalog.py: do not edit -->",
        "",
        "Served in Prometheus' text format at `/metrics` on `metrics.listener` (off by default; e.g.",
        "`-X metrics.listener=http://0.0.0.0:9404`). Names follow the Prometheus JMX exporter's Kafka",
        "rules, so dashboards and alerts written for Kafka work; consumer lag uses kafka_exporter's names.",
        "Request times are histograms in milliseconds (`_bucket`, `_sum`, `_count`).",
        "",
        "| Name | Type | Labels | Meaning | Kafka MBean |",
        "|---|---|---|---|---|",
    ]
    for metric in METRICS:
        labels = ", ".join(metric.labels) or "-"
        lines.append(f"| `{metric.name}` | {metric.type} | {labels} | {metric.help} | `{metric.mbean}` |")
    return "\n".join(lines) + "\n"
