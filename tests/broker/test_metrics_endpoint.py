"""The broker's /metrics endpoint against a real `kctl broker start` with ``metrics.listener``:
records produced by confluent-kafka show up exactly in MessagesIn (per topic and for all topics), a
consumer's fetch in BytesOut and the request metrics, each partition's log end offset in the log
gauges, and a group's committed offsets as consumer lag (high watermark minus committed). Scraped
over HTTP and parsed with prometheus_client's parser (kctl.testing.metrics)."""

from __future__ import annotations

import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest

from kctl.testing import BrokerProcess, create_topic, wait_for
from kctl.testing.metrics import Samples, scrape
from kctl.testing.pytest_plugin import BrokerFactory

TOPIC = "metered"
OTHER = "other"
PARTITIONS = 3
PER_PARTITION = 10
OTHER_RECORDS = 7
VALUE = b"v" * 100
GROUP = "lagging"
COMMITTED = {0: 10, 1: 3}  # partition 2: nothing committed


def _produce(bootstrap: str) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(PARTITIONS * PER_PARTITION):
        producer.produce(TOPIC, VALUE, partition=n % PARTITIONS)
    for _ in range(OTHER_RECORDS):
        producer.produce(OTHER, VALUE, partition=0)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    broker = module_broker_factory({"metrics.listener": "http://127.0.0.1:0"})
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    create_topic(broker.bootstrap, OTHER, 1)
    _produce(broker.bootstrap)
    return broker


def _metrics(broker: BrokerProcess) -> Samples:
    assert broker.metrics_url is not None, "the broker printed no metrics URL"
    return scrape(broker.metrics_url)


def test_the_broker_announces_its_metrics_url(broker: BrokerProcess) -> None:
    assert broker.metrics_url is not None
    assert broker.metrics_url.startswith("http://127.0.0.1:") and broker.metrics_url.endswith("/metrics")
    assert not broker.metrics_url.endswith(":0/metrics")
    assert f"serving metrics on {broker.metrics_url}" in broker.log_tail(200)


def test_messages_in_counts_every_record_produced_per_topic_and_in_total(broker: BrokerProcess) -> None:
    samples = _metrics(broker)
    name = "kafka_server_brokertopicmetrics_messagesin_total"
    assert samples.value(name, topic=TOPIC) == PARTITIONS * PER_PARTITION
    assert samples.value(name, topic=OTHER) == OTHER_RECORDS
    assert samples.value(name) == PARTITIONS * PER_PARTITION + OTHER_RECORDS
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    topic_bytes = samples.value(bytes_in, topic=TOPIC)
    assert topic_bytes is not None and topic_bytes >= PARTITIONS * PER_PARTITION * len(VALUE)
    assert samples.value(bytes_in) == topic_bytes + (samples.value(bytes_in, topic=OTHER) or 0)
    assert samples.value("kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    produce_requests = samples.value("kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests is not None and produce_requests >= 1
    # every request handled is observed once in each time histogram
    assert (
        samples.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    )
    assert (
        samples.value("kafka_network_requestmetrics_localtimems_count", request="Produce") == produce_requests
    )


def test_log_gauges_give_each_partitions_end_offset(broker: BrokerProcess) -> None:
    samples = _metrics(broker)
    for partition in range(PARTITIONS):
        labels = {"topic": TOPIC, "partition": str(partition)}
        assert samples.value("kafka_log_log_logendoffset", **labels) == PER_PARTITION
        assert samples.value("kafka_log_log_logstartoffset", **labels) == 0
        assert samples.value("kafka_log_log_numlogsegments", **labels) == 1
        size = samples.value("kafka_log_log_size", **labels)
        assert size is not None and size > PER_PARTITION * len(VALUE)
        assert samples.value("kafka_topic_partition_current_offset", **labels) == PER_PARTITION
    assert samples.value("kafka_server_replicamanager_partitioncount") == PARTITIONS + 1
    assert samples.value("kafka_server_replicamanager_leadercount") == PARTITIONS + 1
    assert samples.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert samples.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert samples.value("kafka_controller_kafkacontroller_globaltopiccount") == 2


def test_a_consumer_fetch_shows_in_bytes_out_and_group_lag_is_produced_minus_committed(
    broker: BrokerProcess,
) -> None:
    before = _metrics(broker)
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        read = []
        wait_for(
            lambda: read.extend(consumer.consume(PER_PARTITION, 1.0)) or len(read) >= PER_PARTITION,
            f"{PER_PARTITION} records of {TOPIC}-0",
        )
        assert all(m.error() is None for m in read)
        consumer.commit(
            offsets=[ck.TopicPartition(TOPIC, p, offset) for p, offset in COMMITTED.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()
    samples = _metrics(broker)
    bytes_out = samples.value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) or 0
    assert bytes_out - (before.value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) or 0) >= (
        PER_PARTITION * len(VALUE)
    )
    assert samples.value("kafka_server_brokertopicmetrics_bytesout_total") == sum(
        samples.matching("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC).values()
    ) + (samples.value("kafka_server_brokertopicmetrics_bytesout_total", topic=OTHER) or 0)
    fetches = samples.value("kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    assert fetches is not None and fetches >= 1
    assert samples.value("kafka_network_requestmetrics_requests_total", request="Fetch") == fetches
    for partition, offset in COMMITTED.items():
        labels = {"consumergroup": GROUP, "topic": TOPIC, "partition": str(partition)}
        assert samples.value("kafka_consumergroup_current_offset", **labels) == offset
        assert samples.value("kafka_consumergroup_lag", **labels) == PER_PARTITION - offset
    assert samples.value("kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition="2") is None
    assert samples.value("kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == sum(
        PER_PARTITION - offset for offset in COMMITTED.values()
    )
    assert (samples.value("kafka_coordinator_group_groupmetadatamanager_numgroups") or 0) >= 1
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numoffsets") == len(COMMITTED)


def test_connections_and_the_event_loop_are_reported(broker: BrokerProcess) -> None:
    samples = _metrics(broker)
    created = samples.value(
        "kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT"
    )
    assert created is not None and created >= 1
    assert (
        samples.value("kafka_server_socket_server_metrics_failed_authentication_total", listener="PLAINTEXT")
        == 0
    )
    busy = samples.value("kctl_eventloop_busy_ratio")
    assert busy is not None and 0 <= busy <= 1
    idle = samples.value("kafka_network_socketserver_networkprocessoravgidlepercent")
    assert idle is not None and abs(busy + idle - 1) < 1e-9


def test_other_paths_are_not_found_and_openmetrics_is_served_when_asked(broker: BrokerProcess) -> None:
    assert broker.metrics_url is not None
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(broker.metrics_url.replace("/metrics", "/nothing"), timeout=10)
    assert error.value.code == 404
    request = urllib.request.Request(
        broker.metrics_url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert response.read().decode().rstrip().endswith("# EOF")


def test_without_metrics_listener_nothing_is_served(broker_factory: BrokerFactory) -> None:
    plain = broker_factory()
    assert plain.metrics_url is None
    assert "serving metrics" not in plain.log_tail(200)


def test_a_bad_metrics_listener_is_refused_at_start(broker_factory: BrokerFactory) -> None:
    from kctl.testing import BrokerStartError

    with pytest.raises(BrokerStartError, match=r"metrics\.listener"):
        broker_factory({"metrics.listener": "9404"})


def test_the_broker_serves_exactly_the_metrics_of_the_catalog(broker: BrokerProcess) -> None:
    from kctl.broker.metrics.catalog import METRICS

    served = set(_metrics(broker).families)
    assert served == {metric.family for metric in METRICS}


def test_log_flushes_are_timed(broker: BrokerProcess) -> None:
    """Every fsync of a log (here: one per append, flush.messages=1 on the topic) is counted in the
    LogFlushRateAndTimeMs histogram; the embedded broker has no ZooKeeper latency samples."""
    name = "kafka_log_logflushstats_logflushrateandtimems_count"
    before = _metrics(broker).value(name) or 0
    topic = "flushed"
    create_topic(broker.bootstrap, topic, 1, 1, {"flush.messages": "1"})
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
    for _ in range(5):
        producer.produce(topic, VALUE, partition=0)
        assert producer.flush(30) == 0  # one request, one append, one fsync each
    samples = _metrics(broker)
    assert (samples.value(name) or 0) >= before + 5
    assert (samples.value("kafka_log_logflushstats_logflushrateandtimems_sum") or 0) > 0
    assert samples.value("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count") is None
