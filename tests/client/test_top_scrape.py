"""`kctl top`'s reading of a broker's metrics, without a broker: where the endpoint is (a wildcard
host is the broker's own), which series count (Fetch's second names are not counted twice), and
rates over counter resets."""

from __future__ import annotations

import pytest

from kctl.client.top.scrape import MetricsUnavailable, metrics_url, parse_counters, rate
from kctl.client.types import BrokerInfo

BROKER = BrokerInfo(3, "broker3.example", 9092)

SCRAPE = """\
# TYPE kafka_network_requestmetrics_requests counter
kafka_network_requestmetrics_requests_total{request="Produce"} 10.0
kafka_network_requestmetrics_requests_total{request="Fetch"} 5.0
kafka_network_requestmetrics_requests_total{request="FetchConsumer"} 4.0
kafka_network_requestmetrics_requests_total{request="FetchFollower"} 1.0
# TYPE kafka_server_brokertopicmetrics_messagesin counter
kafka_server_brokertopicmetrics_messagesin_total 30.0
kafka_server_brokertopicmetrics_messagesin_total{topic="a"} 20.0
kafka_server_brokertopicmetrics_messagesin_total{topic="b"} 10.0
# TYPE kafka_server_brokertopicmetrics_bytesin counter
kafka_server_brokertopicmetrics_bytesin_total 3000.0
kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 2000.0
# TYPE kafka_server_brokertopicmetrics_bytesout counter
kafka_server_brokertopicmetrics_bytesout_total 700.0
# TYPE kctl_eventloop_busy_ratio gauge
kctl_eventloop_busy_ratio 0.25
"""


def test_the_series_top_reads() -> None:
    counters = parse_counters(SCRAPE, at=12.5)
    assert counters.requests == 15  # Produce + Fetch; FetchConsumer/FetchFollower are Fetch again
    assert (counters.records_in, counters.bytes_in, counters.bytes_out) == (30, 3000, 700)
    assert counters.topic_records_in == {"a": 20, "b": 10} and counters.topic_bytes_in == {"a": 2000}
    assert counters.loop_busy == 0.25 and counters.at == 12.5


@pytest.mark.parametrize(
    ("listener", "url"),
    [
        ("http://0.0.0.0:9404", "http://broker3.example:9404/metrics"),
        ("http://[::]:9404", "http://broker3.example:9404/metrics"),
        ("http://10.0.0.7:9405/", "http://10.0.0.7:9405/metrics"),
        ("http://[fe80::1]:9404", "http://[fe80::1]:9404/metrics"),
    ],
)
def test_the_endpoint_of_a_metrics_listener(listener: str, url: str) -> None:
    assert metrics_url(listener, BROKER) == url


@pytest.mark.parametrize("listener", ["", "  ", None])
def test_no_metrics_listener_is_no_endpoint(listener: str | None) -> None:
    with pytest.raises(MetricsUnavailable, match=r"no metrics endpoint \(metrics.listener is empty\)"):
        metrics_url(listener, BROKER)


def test_rates() -> None:
    assert rate(150.0, 100.0, 2.0) == 25.0
    assert rate(10.0, 100.0, 2.0) == 0.0  # the broker restarted: its counters began again
    assert rate(150.0, 100.0, 0.0) == 0.0
