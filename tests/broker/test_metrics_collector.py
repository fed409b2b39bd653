"""kctl.broker.metrics without a broker process: the counters the request path updates, the
collector's gauges computed from in-memory partitions, groups and a controller, the catalog every
emitted metric must be in, and Kafka's API names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from kctl.broker.group.membership import Group, GroupState
from kctl.broker.metrics.catalog import METRICS, render_reference
from kctl.broker.metrics.collector import BrokerCollector, Families
from kctl.broker.metrics.listener import MetricsListener, parse_metrics_listener
from kctl.broker.metrics.stats import TIME_BUCKETS_MS, BrokerStats, cumulative, kafka_api_name
from kctl.common.topic_partition import TopicPartition
from kctl.testing.metrics import Samples


def _partition(topic: str, index: int, *, leader: bool, isr: int, replicas: int = 3, min_isr: int = 2) -> Any:
    log = SimpleNamespace(
        size_in_bytes=100 * index, log_start_offset=index, log_end_offset=50, segments=[1, 2]
    )
    return SimpleNamespace(
        topic_partition=TopicPartition(topic, index),
        is_leader=leader,
        isr=tuple(range(isr)),
        replicas=tuple(range(replicas)),
        min_insync_replicas=min_isr,
        log=log,
        high_watermark=40,
        log_start_offset=index,
        log_end_offset=50,
    )


def _broker(partitions: list[Any], groups: list[Group], *, active: bool) -> Any:
    replicas = SimpleNamespace(
        partitions={p.topic_partition: p for p in partitions},
        isr_shrinks=2,
        isr_expands=1,
        fetchers=None,
        offline_partitions={("b", 0): None, ("b", 1): None},  # two replicas in a failed log dir
        log_manager=SimpleNamespace(offline_dirs={"/failed"}),
    )
    metadata = SimpleNamespace(
        brokers=lambda: [SimpleNamespace(broker_id=1), SimpleNamespace(broker_id=2)],
        topics=lambda: {"a": SimpleNamespace(assignment={0: (1, 2), 1: (2, 3)})},
        partition_state=lambda name, index: SimpleNamespace(leader=1 if index == 0 else 3),
    )
    controller = SimpleNamespace(active=active, leader_elections=5, unclean_leader_elections=1)
    return SimpleNamespace(
        replicas=replicas,
        metadata=metadata,
        controller=controller,
        replicated=True,
        servers=[],
        groups=SimpleNamespace(groups={g.group_id: g for g in groups}),
        registry=SimpleNamespace(),  # the embedded registry: no ZooKeeper request latency
        quotas=SimpleNamespace(client_metrics=lambda: []),
    )


def _scrape(broker: Any, stats: BrokerStats | None = None) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, stats or BrokerStats()))
    return Samples(generate_latest(registry).decode())


def test_replica_manager_gauges_count_led_partitions_by_isr_size() -> None:
    partitions = [
        _partition("a", 0, leader=True, isr=3),  # fully replicated
        _partition("a", 1, leader=True, isr=2),  # under-replicated, at min ISR
        _partition("a", 2, leader=True, isr=1),  # under-replicated, under min ISR
        _partition("a", 3, leader=False, isr=1),  # followed: not this broker's to report
    ]
    samples = _scrape(_broker(partitions, [], active=False))
    assert samples.value("kafka_server_replicamanager_partitioncount") == 4
    assert samples.value("kafka_server_replicamanager_leadercount") == 3
    assert samples.value("kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert samples.value("kafka_server_replicamanager_atminisrpartitioncount") == 1
    assert samples.value("kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert samples.value("kafka_server_replicamanager_isrshrinks_total") == 2
    assert samples.value("kafka_server_replicamanager_offlinereplicacount") == 2
    assert samples.value("kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert samples.value("kafka_log_log_size", topic="a", partition="2") == 200
    assert samples.value("kafka_log_log_numlogsegments", topic="a", partition="3") == 2
    assert samples.value("kafka_topic_partition_current_offset", topic="a", partition="0") == 40
    assert samples.value("kafka_topic_partition_current_offset", topic="a", partition="3") is None


def test_controller_gauges_only_on_the_active_controller() -> None:
    active = _scrape(_broker([], [], active=True))
    assert active.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert active.value("kafka_controller_kafkacontroller_globaltopiccount") == 1
    assert active.value("kafka_controller_kafkacontroller_globalpartitioncount") == 2
    assert active.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 1  # leader 3 is gone
    assert active.value("kafka_controller_controllerstats_uncleanleaderelections_total") == 1
    other = _scrape(_broker([], [], active=False))
    assert other.value("kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert other.value("kafka_controller_kafkacontroller_globalpartitioncount") == 0


def test_consumer_lag_is_high_watermark_minus_committed_for_hosted_partitions() -> None:
    group = Group("g", state=GroupState.STABLE)
    group.offsets[("a", 0)] = SimpleNamespace(offset=35)  # type: ignore[assignment]
    group.offsets[("a", 1)] = SimpleNamespace(offset=45)  # type: ignore[assignment]  # past the HW: 0
    group.offsets[("b", 0)] = SimpleNamespace(offset=7)  # type: ignore[assignment]  # not hosted
    partitions = [_partition("a", 0, leader=True, isr=3), _partition("a", 1, leader=True, isr=3)]
    samples = _scrape(_broker(partitions, [group, Group("e")], active=False))
    assert samples.value("kafka_consumergroup_lag", consumergroup="g", topic="a", partition="0") == 5
    assert samples.value("kafka_consumergroup_lag", consumergroup="g", topic="a", partition="1") == 0
    assert samples.value("kafka_consumergroup_lag", consumergroup="g", topic="b", partition="0") is None
    assert (
        samples.value("kafka_consumergroup_current_offset", consumergroup="g", topic="b", partition="0") == 7
    )
    assert samples.value("kafka_consumergroup_lag_sum", consumergroup="g", topic="a") == 5
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroups") == 2
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numoffsets") == 3


def test_topic_counters_per_topic_and_for_all_topics() -> None:
    stats = BrokerStats()
    stats.produced("a", 10, 1000)
    stats.produced("b", 3, 300)
    stats.produce_failed("a", 500)
    stats.fetched("a", 2, 1, 700, follower=False)
    stats.fetched("a", 1, 0, 900, follower=True)
    stats.produce_failed("no-such-topic", 0, known=False)
    samples = _scrape(_broker([], [], active=False), stats)
    name = "kafka_server_brokertopicmetrics_"
    assert samples.value(name + "messagesin_total", topic="a") == 10
    assert samples.value(name + "messagesin_total") == 13
    assert samples.value(name + "messagesin_total", topic="b") is None  # not in the metadata: deleted
    assert "b" not in stats.topics and "no-such-topic" not in stats.topics
    assert samples.value(name + "totalproducerequests_total", topic="a") == 2
    assert samples.value(name + "failedproducerequests_total") == 2
    assert samples.value(name + "failedproducerequests_total", topic="a") == 1
    assert samples.value(name + "bytesrejected_total", topic="a") == 500
    assert samples.value(name + "bytesout_total", topic="a") == 700  # followers' bytes are replication
    assert samples.value(name + "replicationbytesout_total") == 900
    assert samples.value(name + "failedfetchrequests_total") == 1
    assert samples.value(name + "totalfetchrequests_total", topic="a") == 3


def _context(api_key: int, metric_name: str | None = None) -> Any:
    return SimpleNamespace(header=SimpleNamespace(api_key=api_key), metric_name=metric_name)


def test_request_histograms_are_cumulative_in_milliseconds() -> None:
    stats = BrokerStats()
    stats.observe_request(_context(1, "FetchConsumer"), 100, 200, 0.0001, 0.002, 0.3, 0.0, 0.3021)
    stats.observe_request(_context(1, "FetchConsumer"), 100, 200, 0.0, 0.001, 0.0, 0.0, 0.001)
    stats.observe_request(_context(0), 100, 200, 0.0, 0.001, 0.0, 0.0, 0.001)
    samples = _scrape(_broker([], [], active=False), stats)
    assert samples.value("kafka_network_requestmetrics_requests_total", request="FetchConsumer") == 2
    assert samples.value("kafka_network_requestmetrics_requests_total", request="Fetch") == 2
    assert samples.value("kafka_network_requestmetrics_requests_total", request="Produce") == 1
    assert samples.value("kafka_network_requestmetrics_remotetimems_count", request="Fetch") == 2
    assert samples.value("kafka_network_requestmetrics_remotetimems_bucket", request="Fetch", le="0.1") == 1
    assert samples.value("kafka_network_requestmetrics_remotetimems_bucket", request="Fetch", le="250.0") == 1
    assert samples.value("kafka_network_requestmetrics_remotetimems_bucket", request="Fetch", le="500.0") == 2
    assert (
        samples.value("kafka_network_requestmetrics_requestqueuetimems_bucket", request="Fetch", le="0.1")
        == 2
    )
    total = samples.value("kafka_network_requestmetrics_totaltimems_sum", request="Fetch")
    assert total == pytest.approx(303.1)


def test_an_apis_histograms_add_up_its_parts_observed_once_each() -> None:
    """A fetch is observed once, under FetchConsumer or FetchFollower (or Fetch when its handler set no
    second name); the Fetch series are their sum at scrape time."""
    stats = BrokerStats()
    stats.observe_request(_context(1, "FetchConsumer"), 100, 200, 0.0, 0.001, 0.0, 0.0, 0.001)
    stats.observe_request(_context(1, "FetchFollower"), 100, 200, 0.0, 0.001, 0.4, 0.0, 0.401)
    stats.observe_request(_context(1, "FetchFollower"), 100, 200, 0.0, 0.001, 0.4, 0.0, 0.401)
    stats.observe_request(_context(1), 100, 200, 0.0, 0.002, 0.0, 0.0, 0.002)
    assert {name: s.requests for name, s in stats.requests.items()} == {
        "FetchConsumer": 1,
        "FetchFollower": 2,
        "Fetch": 1,
    }
    samples = _scrape(_broker([], [], active=False), stats)
    count = "kafka_network_requestmetrics_requests_total"
    assert [samples.value(count, request=r) for r in ("Fetch", "FetchConsumer", "FetchFollower")] == [4, 1, 2]
    remote = "kafka_network_requestmetrics_remotetimems_bucket"
    assert samples.value(remote, request="Fetch", le="0.1") == 2
    assert samples.value(remote, request="Fetch", le="500.0") == 4
    local = samples.value("kafka_network_requestmetrics_localtimems_sum", request="Fetch")
    assert local == pytest.approx(5.0)
    # the stats the request path updates are left as they were (a scrape adds up copies)
    assert stats.requests["Fetch"].requests == 1


def test_histogram_buckets() -> None:
    broker_stats = BrokerStats()
    for seconds in (0.00005, 0.0001, 0.007, 1000.0):
        broker_stats.observe_request(_context(0), 100, 200, 0.0, 0.0, 0.0, 0.0, seconds)
    stats = broker_stats.requests["Produce"]
    counts, sum_ms = stats.histogram(4)  # total time
    buckets = dict(cumulative(counts))
    assert buckets["0.1"] == 2  # an upper bound is inclusive
    assert buckets["10.0"] == 3
    assert buckets["+Inf"] == 4 and stats.requests == 4
    assert len(buckets) == len(TIME_BUCKETS_MS) + 1
    assert sum_ms == pytest.approx(1_000_007.15)
    assert dict(cumulative(stats.histogram(0)[0]))["0.1"] == 4  # queue time: all 0


def test_a_metric_missing_from_the_catalog_is_refused() -> None:
    with pytest.raises(KeyError):
        Families().add("kafka_server_made_up", 1)


def test_catalog_names_are_unique_and_documented() -> None:
    names = [metric.name for metric in METRICS]
    assert len(names) == len(set(names))
    reference = render_reference()
    for metric in METRICS:
        assert f"`{metric.name}`" in reference
        assert metric.help and metric.mbean
        assert (metric.type == "counter") == metric.name.endswith("_total")


@pytest.mark.parametrize(
    ("key", "name"),
    [(0, "Produce"), (1, "Fetch"), (18, "ApiVersions"), (23, "OffsetForLeaderEpoch"), (22, "InitProducerId")],
)
def test_kafka_api_names(key: int, name: str) -> None:
    assert kafka_api_name(key) == name


def test_metrics_listener_values() -> None:
    assert parse_metrics_listener("http://127.0.0.1:9404") == ("127.0.0.1", 9404)
    assert parse_metrics_listener("http://0.0.0.0:0/") == ("0.0.0.0", 0)
    assert MetricsListener()("") == ""
    for bad in ("9404", "https://h:1", "http://h", "http://h:1/other", "http://:1"):
        with pytest.raises(ValueError):
            MetricsListener()(bad)


def test_replica_fetcher_max_lag_connections_and_zookeeper_counters() -> None:
    behind = _partition("a", 0, leader=False, isr=3)  # log end offset 50
    states = [
        SimpleNamespace(partition=behind, leader_high_watermark=72),
        SimpleNamespace(partition=_partition("a", 1, leader=False, isr=3), leader_high_watermark=-1),
    ]
    broker = _broker([behind], [], active=False)
    broker.replicas.fetchers = SimpleNamespace(
        fetchers={2: SimpleNamespace(partitions=dict(enumerate(states)))}
    )
    broker.servers = [
        SimpleNamespace(
            name="PLAINTEXT",
            connection_count=2,
            connections_created=5,
            failed_authentications=1,
            connections_refused=3,
        )
    ]
    stats = BrokerStats()
    stats.zookeeper_expires = 1
    samples = _scrape(broker, stats)
    assert samples.value("kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 22
    prefix = "kafka_server_socket_server_metrics_"
    assert samples.value(prefix + "connection_count", listener="PLAINTEXT") == 2
    assert samples.value(prefix + "connection_refused_total", listener="PLAINTEXT") == 3
    assert samples.value(prefix + "failed_authentication_total", listener="PLAINTEXT") == 1
    assert samples.value("kafka_server_sessionexpirelistener_zookeeperexpires_total") == 1
    assert samples.value("kafka_server_sessionexpirelistener_zookeeperdisconnects_total") == 0
