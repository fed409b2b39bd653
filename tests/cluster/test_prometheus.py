"""A real Prometheus (Debian's ``prometheus`` package, kctl.testing.prometheus) scraping a 3-broker
cluster's /metrics, asserted through its HTTP query API as an operator's dashboards and alerts would
see it: a produce load shows up as a rate and an exact count; a stopped consumer group's lag grows by
exactly the records produced; killing a follower raises the under-replicated partitions to the count
it hosted and restarting it brings them back to 0; killing the controller moves
activecontrollercount to another broker (the sum stays 1). The alert rules and the Grafana dashboard
under deploy/ are loaded (Prometheus checks the rules) and reference only metrics a broker serves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from kctl.testing import LocalCluster, wait_for
from kctl.testing.cluster_clients import create_topic
from kctl.testing.metrics import scrape
from kctl.testing.prometheus import PrometheusServer, PrometheusUnavailableError, prometheus_binary
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "kctl-alerts.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "kctl-dashboard.json"
PROPERTIES = {
    "metrics.listener": "http://127.0.0.1:0",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.num.partitions": "3",
}
TOPIC = "observed"
PARTITIONS = 3
GROUP = "stopped-group"
TIMEOUT = 60.0
URP = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    cluster = module_cluster_factory(3, PROPERTIES)
    create_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS, 3)
    return cluster


@pytest.fixture(scope="module")
def prometheus(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    try:
        prometheus_binary()
    except PrometheusUnavailableError as error:
        pytest.fail(str(error), pytrace=False)
    targets = {broker_id: b.metrics_url for broker_id, b in cluster.brokers.items() if b.metrics_url}
    assert len(targets) == 3
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets, rule_files=[ALERTS])
    with server:
        server.wait_for_targets(3)
        yield server


@pytest.fixture(autouse=True)
def all_brokers_running(cluster: LocalCluster) -> Iterator[None]:
    yield
    for broker_id, broker in cluster.brokers.items():
        if not broker.running:
            cluster.restart(broker_id)


def _produce(cluster: LocalCluster, count: int) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for n in range(count):
        producer.produce(TOPIC, f"record {n}".encode(), partition=n % PARTITIONS)
    assert producer.flush(30) == 0


def _eventually(prometheus: PrometheusServer, expr: str, expected: float, what: str) -> None:
    wait_for(
        lambda: prometheus.value(expr) == expected,
        f"{what}: {expr} == {expected}",
        TIMEOUT,
        interval=0.25,
        describe=lambda: f"{expr} = {prometheus.query(expr)}",
    )


def _referenced_metrics(text: str) -> set[str]:
    return set(re.findall(r"\b(?:kafka|kctl)_[a-z0-9_]+", text))


def test_alert_rules_and_dashboard_reference_only_metrics_a_broker_serves(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    url = cluster.broker(1).metrics_url
    assert url is not None
    served = set(scrape(url).families)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    referenced = _referenced_metrics(ALERTS.read_text()) | _referenced_metrics("\n".join(exprs))
    assert len(referenced) > 10

    def family(name: str) -> str:
        for suffix in ("_total", "_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name.removesuffix(suffix) in served:
                return name.removesuffix(suffix)
        return name

    assert {name for name in referenced if family(name) not in served} == set()
    alerts = {rule["name"] for rule in prometheus.rules() if rule["type"] == "alerting"}
    assert {"KctlUnderReplicatedPartitions", "KctlOfflinePartitions", "KctlNoActiveController",
            "KctlUnderMinIsr", "KctlConsumerLagGrowing", "KctlDiskUsage"} <= alerts  # fmt: skip
    for expr in exprs:  # every panel's query is valid PromQL (Prometheus parses it)
        prometheus.query(expr.replace("$job", "kctl"))


def test_a_produce_load_shows_up_as_a_rate_and_an_exact_count(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    count = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
    rate = f'sum(rate(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}}[15s]))'
    requests = 'sum(rate(kafka_network_requestmetrics_requests_total{request="Produce"}[15s]))'
    before = prometheus.value(count) or 0
    produced = [30]
    _produce(cluster, 30)
    _eventually(prometheus, count, before + 30, "the first records produced")  # the series exist

    def loaded() -> bool:  # a load: records keep coming while Prometheus scrapes
        _produce(cluster, 50)
        produced.append(50)
        return (prometheus.value(rate) or 0) > 0 and (prometheus.value(requests) or 0) > 0

    wait_for(loaded, f"{rate} > 0 and {requests} > 0 under load", TIMEOUT, interval=0.1)
    _eventually(prometheus, count, before + sum(produced), "every record produced, counted once")


def test_a_stopped_groups_lag_grows_by_exactly_the_records_produced(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    _produce(cluster, 30)
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        metadata = consumer.list_topics(TOPIC, timeout=30)
        ends = {
            p: consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, p), timeout=30)[1]
            for p in metadata.topics[TOPIC].partitions
        }
        consumer.commit(
            offsets=[ck.TopicPartition(TOPIC, p, end) for p, end in ends.items()], asynchronous=False
        )
    finally:
        consumer.close()  # the group is stopped: nothing consumes from here on
    lag = f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}",topic="{TOPIC}"}})'
    _eventually(prometheus, lag, 0, "no lag right after the commit")
    _produce(cluster, 45)
    _eventually(prometheus, lag, 45, "the lag grown by the records produced since")
    lag_sum = f'sum(kafka_consumergroup_lag_sum{{consumergroup="{GROUP}",topic="{TOPIC}"}})'
    assert prometheus.value(lag_sum) == 45


def test_killing_a_follower_raises_urp_to_what_it_hosted_and_a_restart_clears_it(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    _eventually(prometheus, URP, 0, "a healthy cluster")
    controller = _controller(prometheus)
    victim = max(b for b in cluster.brokers if b != controller)
    topics = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=30).topics
    hosted = sum(1 for t in topics.values() for p in t.partitions.values() if victim in p.replicas)
    assert hosted >= PARTITIONS
    cluster.kill(victim)
    _eventually(prometheus, URP, hosted, f"the partitions broker {victim} hosted")
    assert prometheus.value(f"sum({ACTIVE})") == 1
    cluster.restart(victim)
    _eventually(prometheus, URP, 0, f"broker {victim} back in every ISR")


def test_killing_the_controller_moves_activecontrollercount_to_another_broker(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    prometheus.wait_for_targets(3)
    controller = _controller(prometheus)
    cluster.kill(controller)
    wait_for(
        lambda: _controller(prometheus, wanted=False) not in (None, controller),
        f"another broker than {controller} active controller",
        TIMEOUT,
        interval=0.25,
        describe=lambda: str(prometheus.query(ACTIVE)),
    )
    assert prometheus.value(f"sum({ACTIVE})") == 1
    cluster.restart(controller)
    prometheus.wait_for_targets(3)
    assert prometheus.value(f"sum({ACTIVE})") == 1


def _controller(prometheus: PrometheusServer, *, wanted: bool = True) -> int | None:
    """The broker id whose activecontrollercount is 1 (waited for unless ``wanted`` is False)."""

    def find() -> int | None:
        ids = [int(labels["broker"]) for labels, value in prometheus.query(ACTIVE) if value == 1]
        return ids[0] if len(ids) == 1 else None

    if not wanted:
        return find()
    return wait_for(find, "exactly one active controller", TIMEOUT, interval=0.25,
                    describe=lambda: str(prometheus.query(ACTIVE)))  # fmt: skip
