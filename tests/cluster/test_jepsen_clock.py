"""Wall-clock jumps (issue 24's clock nemesis): a 3-broker cluster (RF 3, min ISR 2) under acks=all
load from two idempotent writers, while one broker's wall clock jumps an hour or a day forward or
back (kctl.testing.clock_skew; its monotonic clock does not move, as with NTP stepping the clock).

What must hold, as in Kafka, which times intervals with a monotonic clock:
- nothing acknowledged is lost, duplicated, reordered or acknowledged twice at one offset;
- no jump changes a partition's state by itself: no ISR shrink or expand, no leader election (the
  ISR lag of `replica.lag.time.max.ms` is measured on the monotonic clock; timed on the wall clock,
  a leader jumping forward would drop its followers from the ISR at once);
- the wall clock is what LogAppendTime stamps: records appended while the leader's clock is an hour
  back carry that time, and are still read back in offset order with the others."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest

from kctl.testing import LocalCluster, ZooKeeperServer
from kctl.testing.clock_skew import clock_skewed_broker, jump_clock, set_clock_skew
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Campaign, ConfluentLoad, KctlLoad

pytestmark = [pytest.mark.e2e, pytest.mark.zk, pytest.mark.slow]

PARTITIONS = 3
HOUR, DAY = 3600.0, 86400.0
CLUSTER_PROPERTIES = {
    # longer than any wait below: an ISR change must come from the leader's lag check, not from the
    # controller seeing a paused broker's session expire
    "zookeeper.session.timeout.ms": "40000",
    "replica.lag.time.max.ms": "5000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("clock")
    local = LocalCluster(base / "cluster", 3, properties=CLUSTER_PROPERTIES, zookeeper=zookeeper)
    for broker_id, broker in local.brokers.items():
        clock_skewed_broker(broker, base / f"clock-{broker_id}")
    with local:
        yield local


def test_clock_jumps_lose_nothing_and_move_no_isr(cluster: LocalCluster) -> None:
    topic = "jepsen-clock"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, PARTITIONS, timeout=60)
        histories = [view.watch_partition_states(topic, p) for p in range(PARTITIONS)]
        leaders = {p: view.wait_for_leader(topic, p).leader for p in range(PARTITIONS)}
        follower_of_0 = next(b for b in view.assignment(topic)[0] if b != leaders[0])
        campaign = Campaign(
            [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
        ).start()
        hold = 7.0  # longer than replica.lag.time.max.ms: a wall-clock ISR lag would show
        faults = [
            partial(jump_clock, cluster.broker(leaders[0]), HOUR, hold),
            partial(jump_clock, cluster.broker(follower_of_0), -HOUR, hold),
            partial(jump_clock, cluster.broker(leaders[1]), -DAY, hold),
            partial(jump_clock, cluster.broker(leaders[2]), DAY, hold),
        ]
        try:
            for fault in faults:
                campaign.inject(fault)
        except BaseException:
            campaign.stop()
            raise
        verdict = campaign.finish(bootstrap, topic, PARTITIONS)
        states = [list(history) for history in histories]
    print(f"clock jumps: {campaign.faults_done}; {verdict.summary()}")
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 100 * (len(faults) + 1)
    assert campaign.failures() == []
    for partition, seen in enumerate(states):
        assert seen, f"no state of partition {partition} seen"
        changes = {(s.leader, s.leader_epoch, tuple(sorted(s.isr))) for s in seen}
        assert len(changes) == 1, f"partition {partition} changed under clock jumps: {seen}"


def test_log_append_time_follows_the_leaders_wall_clock(cluster: LocalCluster) -> None:
    import confluent_kafka as ck

    topic = "clock-log-append-time"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, 1, 3, {"message.timestamp.type": "LogAppendTime"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 1, timeout=60)
        leader = cluster.broker(view.wait_for_leader(topic, 0).leader)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

    def produce(values: list[bytes]) -> None:
        for value in values:
            producer.produce(topic, value, partition=0)
        assert producer.flush(30) == 0

    produce([b"before"])
    set_clock_skew(leader, -HOUR)
    try:
        produce([b"back-1", b"back-2"])
    finally:
        set_clock_skew(leader, 0)
    produce([b"after"])
    now_ms = time.time() * 1000

    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "clock", "auto.offset.reset": "earliest"}
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    read: list[tuple[bytes, int, int]] = []
    deadline = time.monotonic() + 30
    while len(read) < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            kind, stamp = message.timestamp()
            assert kind == ck.TIMESTAMP_LOG_APPEND_TIME
            read.append((message.value(), message.offset(), stamp))
    consumer.close()
    assert [(value, offset) for value, offset, _ in read] == [
        (b"before", 0), (b"back-1", 1), (b"back-2", 2), (b"after", 3)
    ]  # fmt: skip
    stamps = {value: stamp for value, _, stamp in read}
    for value in (b"before", b"after"):
        assert abs(stamps[value] - now_ms) < 5 * 60 * 1000, (value, stamps)
    for value in (b"back-1", b"back-2"):  # an hour back, as the leader's clock said
        assert abs(stamps[value] - (now_ms - HOUR * 1000)) < 5 * 60 * 1000, (value, stamps)


def test_a_leader_whose_clock_jumped_back_still_drops_a_dead_follower(cluster: LocalCluster) -> None:
    """A follower stops fetching (SIGSTOP), then the leader's wall clock jumps an hour back: the
    follower still leaves the ISR after replica.lag.time.max.ms — timed on the wall clock, it would
    stay an hour, holding every acks=all write — and comes back once it fetches again."""
    topic = "clock-isr"
    create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr(topic, 1, timeout=60)
        leader = view.wait_for_leader(topic, 0).leader
        follower = next(b for b in view.assignment(topic)[0] if b != leader)
        cluster.broker(follower).pause()
        try:
            set_clock_skew(cluster.broker(leader), -HOUR)
            others = {b for b in view.assignment(topic)[0] if b != follower}
            view.wait_for_isr(topic, 0, others, timeout=25)  # within the session timeout
        finally:
            cluster.broker(follower).resume()
            set_clock_skew(cluster.broker(leader), 0)
        view.wait_for_isr(topic, 0, set(view.assignment(topic)[0]), timeout=60)
