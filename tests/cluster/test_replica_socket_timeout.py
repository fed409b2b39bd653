"""``replica.socket.timeout.ms`` on real brokers: a follower whose fetch the leader does not answer
(the leader SIGSTOPped for less than its ZooKeeper session, so nothing is elected) gives the fetch up
after that long and connects again, instead of waiting on the silent connection (Kafka's default of
30 s; after a network cut heals, TCP's retransmission backoff). And the broker refuses a value below
``replica.fetch.wait.max.ms``, as Kafka does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kctl.broker.config import BrokerConfig, BrokerConfigError
from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView

pytestmark = pytest.mark.slow

PROPERTIES = {
    "zookeeper.session.timeout.ms": "10000",
    "replica.socket.timeout.ms": "1500",
}
PAUSE_S = 4.0


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("socket-timeout"), 3, properties=PROPERTIES, zookeeper=zookeeper
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def test_a_follower_gives_up_an_unanswered_fetch_after_the_socket_timeout(cluster: LocalCluster) -> None:
    topic = "socket-timeout"
    with ClusterView(cluster.zookeeper_connect) as view:
        create_topic(cluster.bootstrap_servers, topic, 1, 3)
        view.wait_for_full_isr(topic, 1)
        leader = view.wait_for_leader(topic, 0).leader
        followers = [b for b in cluster.brokers if b != leader]
        sizes = {b: cluster.broker(b).log_file.stat().st_size for b in followers}
        cluster.broker(leader).pause()
        try:
            time.sleep(PAUSE_S)  # the fault's length: the leader answers nothing meanwhile
        finally:
            cluster.broker(leader).resume()
        assert view.wait_for_leader(topic, 0).leader == leader  # nothing was elected
        timed_out = f"FETCH to broker {leader} timed out"
        for broker_id in followers:
            with open(cluster.broker(broker_id).log_file, "rb") as handle:
                handle.seek(sizes[broker_id])
                written = handle.read().decode("utf-8", "replace")
            assert timed_out in written, f"broker {broker_id} logged no fetch timeout:\n{written[-3000:]}"
        view.wait_for_full_isr(topic, 1)


def test_a_socket_timeout_below_the_fetch_wait_is_refused() -> None:
    base = {"broker.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused"}
    with pytest.raises(BrokerConfigError, match=r"replica\.socket\.timeout\.ms: 400 must be at least"):
        BrokerConfig({**base, "replica.socket.timeout.ms": "400", "replica.fetch.wait.max.ms": "500"})
    assert BrokerConfig({**base, "replica.socket.timeout.ms": "500"})["replica.socket.timeout.ms"] == 500
