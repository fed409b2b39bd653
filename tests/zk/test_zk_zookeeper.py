"""The ZooKeeper registry against a real ZooKeeper server: Kafka's znode formats byte for byte,
metadata written by Kafka's own tools, and what several brokers (several registries, each with its
own session) see of each other: ephemeral registrations, BrokerIdInUseError, the controller
election, change notifications, session expiry and connection loss."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import Callback

from kctl.testing import Notifications, ZooKeeperServer, start_zookeeper
from kctl.testing.zk_sessions import expire_session as expire_after_twin
from kctl.zk import zookeeper_topics
from kctl.zk.model import (
    BrokerIdInUseError,
    BrokerRegistration,
    PartitionState,
    RegistryUnavailableError,
    TopicRecord,
    decode_uuid,
    encode_uuid,
)
from kctl.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
)
from kctl.zk.zookeeper import ZooKeeperRegistry, split_connect


class Brokers:
    """Registries on one chroot, each its own ZooKeeper session (as separate brokers are), plus a
    raw kazoo client on the same chroot for reading and writing znodes as Kafka's tools do."""

    def __init__(self, server: ZooKeeperServer) -> None:
        self.connect = server.connect_string()
        self.opened: list[ZooKeeperRegistry] = []
        self._raw: KazooClient | None = None

    def open(self, **options: Any) -> ZooKeeperRegistry:
        registry = ZooKeeperRegistry(self.connect, connection_timeout_ms=10_000, **options)
        registry.start()
        self.opened.append(registry)
        return registry

    @property
    def raw(self) -> KazooClient:
        if self._raw is None:
            self._raw = KazooClient(hosts=self.connect)
            self._raw.start(timeout=10)
        return self._raw

    def json(self, path: str) -> dict[str, Any]:
        data, _ = self.raw.get(path)
        return json.loads(data)

    def close(self) -> None:
        for registry in self.opened:
            registry.close()
        if self._raw is not None:
            self._raw.stop()
            self._raw.close()


@pytest.fixture
def brokers(zookeeper: ZooKeeperServer) -> Iterator[Brokers]:
    result = Brokers(zookeeper)
    yield result
    result.close()


# -- Kafka's znode formats ------------------------------------------------------------------------
def test_znodes_are_written_in_kafkas_format(brokers: Brokers) -> None:
    registry = brokers.open()
    cluster_id = registry.cluster_id()
    registry.register_broker(
        BrokerRegistration(
            3, "10.0.0.3", 9092, rack="rack-a", listeners=("PLAINTEXT://10.0.0.3:9092", "SSL://10.0.0.3:9093")
        )
    )
    assert registry.try_become_controller(3)
    topic = registry.create_topic("orders", {0: (3, 1), 1: (1, 3)}, {"cleanup.policy": "compact"})
    registry.set_partition_state("orders", 1, PartitionState(1, 5, (1, 3), controller_epoch=1))
    registry.set_topic_configs("orders", {"retention.ms": "60000"})

    assert brokers.json("/cluster/id") == {"version": "1", "id": cluster_id}

    broker = brokers.json("/brokers/ids/3")
    timestamp = broker.pop("timestamp")
    assert isinstance(timestamp, str) and timestamp.isdigit()
    assert broker == {
        "version": 5,
        "host": "10.0.0.3",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.3:9092", "SSL://10.0.0.3:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "jmx_port": -1,
        "rack": "rack-a",
        "features": {},
    }
    assert brokers.raw.exists("/brokers/ids/3").ephemeralOwner == registry.kazoo_client.client_id[0]

    controller = brokers.json("/controller")
    assert controller.pop("timestamp").isdigit()
    assert controller == {"version": 2, "brokerid": 3, "kraftControllerEpoch": -1}
    assert brokers.raw.exists("/controller").ephemeralOwner != 0
    assert brokers.raw.get("/controller_epoch")[0] == b"1"

    assert brokers.json("/brokers/topics/orders") == {
        "version": 3,
        "topic_id": encode_uuid(topic.topic_id),
        "partitions": {"0": [3, 1], "1": [1, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert len(encode_uuid(topic.topic_id)) == 22
    assert brokers.json("/brokers/topics/orders/partitions/1/state") == {
        "version": 1,
        "leader": 1,
        "leader_epoch": 5,
        "isr": [1, 3],
        "controller_epoch": 1,
    }
    assert not brokers.raw.exists("/brokers/topics/orders/partitions/0")
    assert brokers.json("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "60000"}}
    changes = brokers.raw.get_children("/config/changes")
    assert len(changes) == 1 and changes[0].startswith("config_change_") and len(changes[0]) == 24
    assert brokers.json(f"/config/changes/{changes[0]}") == {"version": 2, "entity_path": "topics/orders"}
    for path in (
        "/brokers/ids",
        "/brokers/topics",
        "/config/topics",
        "/config/changes",
        "/admin/delete_topics",
    ):
        assert brokers.raw.exists(path), path


def test_topic_id_encoding_matches_kafkas_uuid() -> None:
    # Kafka's Uuid.toString: the 16 big-endian bytes (most then least significant long) in URL-safe
    # base64 without padding. Uuid(0x0123456789abcdef, 0xfedcba9876543210) prints as below.
    value = uuid.UUID("0123456789abcdef-fedcba9876543210".replace("-", ""))
    assert encode_uuid(value) == "ASNFZ4mrze_-3LqYdlQyEA"
    assert decode_uuid("ASNFZ4mrze_-3LqYdlQyEA") == value
    with pytest.raises(ValueError):
        decode_uuid("AAAA")


def test_reads_a_topic_written_by_kafka(brokers: Brokers) -> None:
    registry = brokers.open()
    kafka_id = "yCV7tEbXSG6KDqpNdDZ7ZA"
    brokers.raw.create(
        "/brokers/topics/from-kafka",
        b'{"version":3,"topic_id":"yCV7tEbXSG6KDqpNdDZ7ZA","partitions":{"1":[2,1],"0":[1,2]},'
        b'"adding_replicas":{},"removing_replicas":{}}',
    )
    brokers.raw.create("/config/topics/from-kafka", b'{"version":1,"config":{"min.insync.replicas":"2"}}')
    brokers.raw.create(
        "/brokers/topics/from-kafka/partitions/0/state",
        b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2]}',
        makepath=True,
    )
    topic = registry.get_topic("from-kafka")
    assert topic == TopicRecord(
        "from-kafka", decode_uuid(kafka_id), {0: (1, 2), 1: (2, 1)}, {"min.insync.replicas": "2"}
    )
    assert registry.partition_states("from-kafka") == {
        0: PartitionState(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=7, partition_epoch=0)
    }
    assert list(registry.topics()) == ["from-kafka"]

    # A znode kctl cannot read is skipped (with a warning), not fatal to the whole listing.
    brokers.raw.create("/brokers/topics/broken", b"not json")
    brokers.raw.create("/brokers/topics/from-kafka/partitions/1/state", b'{"version":1}', makepath=True)
    assert list(registry.topics()) == ["from-kafka"]
    assert list(registry.partition_states("from-kafka")) == [0]


def test_a_topic_without_topic_id_gets_one(brokers: Brokers) -> None:
    # Kafka before 2.8 (and kafka-topics.sh --zookeeper of that age) wrote version 1, no topic id,
    # and no config znode when there are no overrides.
    registry = brokers.open()
    brokers.raw.create("/brokers/topics/old", b'{"version":1,"partitions":{"0":[1]}}')
    topic = registry.get_topic("old")
    assert topic is not None and topic.assignment == {0: (1,)} and topic.configs == {}
    written = brokers.json("/brokers/topics/old")
    assert written["version"] == 3
    assert decode_uuid(written["topic_id"]) == topic.topic_id
    assert registry.topics()["old"].topic_id == topic.topic_id  # stable from now on


def test_reads_brokers_registered_by_kafka(brokers: Brokers) -> None:
    registry = brokers.open()
    # Version 4, no PLAINTEXT listener: Kafka writes host null and port -1.
    brokers.raw.create(
        "/brokers/ids/7",
        b'{"listener_security_protocol_map":{"CLIENT":"SASL_SSL"},"endpoints":["CLIENT://kafka7:9094"],'
        b'"rack":"r7","jmx_port":9999,"host":null,"timestamp":"1700000000000","port":-1,"version":4}',
        ephemeral=True,
    )
    brokers.raw.create(
        "/brokers/ids/8",
        b'{"jmx_port":-1,"timestamp":"1","host":"kafka8","version":1,"port":9092}',
        ephemeral=True,
    )
    brokers.raw.create("/brokers/ids/9", b"not json", ephemeral=True)  # ignored, with a warning
    assert registry.live_brokers() == [
        BrokerRegistration(7, "kafka7", 9094, rack="r7", listeners=("CLIENT://kafka7:9094",)),
        BrokerRegistration(8, "kafka8", 9092),
    ]


def test_reads_a_version_1_controller(brokers: Brokers) -> None:
    registry = brokers.open()
    brokers.raw.create(
        "/controller", b'{"version":1,"brokerid":4,"timestamp":"1700000000000"}', ephemeral=True
    )
    assert registry.controller_id() == 4
    assert not registry.try_become_controller(1)


def test_delete_removes_every_znode_of_the_topic(brokers: Brokers) -> None:
    registry = brokers.open()
    registry.create_topic("gone", {0: (1,), 1: (1,)}, {"retention.ms": "1"})
    registry.set_partition_state("gone", 0, PartitionState(1, 0, (1,)))
    brokers.raw.create("/admin/delete_topics/gone")  # marked by a Kafka tool meanwhile
    registry.delete_topic("gone")
    for path in ("/brokers/topics/gone", "/config/topics/gone", "/admin/delete_topics/gone"):
        assert brokers.raw.exists(path) is None, path


def _count_multi_ops(registry: ZooKeeperRegistry, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The operation count of each multi-op the registry commits from now on (a list that grows)."""
    client = registry._topics._zk_client()
    commits: list[int] = []
    real_transaction = client.transaction

    def counted() -> Any:
        transaction = real_transaction()
        real_commit = transaction.commit

        def commit() -> Any:
            commits.append(len(transaction.operations))
            return real_commit()

        transaction.commit = commit  # type: ignore[method-assign]
        return transaction

    monkeypatch.setattr(client, "transaction", counted)
    return commits


def test_topics_deleted_together_go_in_one_multi_op(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DeleteTopics of several topics deletes their znodes in one ZooKeeper multi-op (every broker
    then sees them go at once and refreshes its metadata once); a topic with an unexpected znode
    under a partition is deleted on its own, recursively; an unknown one is reported."""
    registry = brokers.open()
    for name in ("d1", "d2", "odd"):
        registry.create_topic(name, {0: (1,), 1: (1,)}, {"retention.ms": "1"})
        registry.set_partition_state(name, 0, PartitionState(1, 0, (1,)))
    brokers.raw.create("/brokers/topics/odd/partitions/0/extra", b"")
    brokers.raw.create("/admin/delete_topics/d2")
    commits = _count_multi_ops(registry, monkeypatch)
    outcomes = registry.delete_topics(["d1", "missing", "d2", "odd"])
    assert [type(o).__name__ if o is not None else None for o in outcomes] == [
        None,
        "UnknownTopicError",
        None,
        None,
    ]
    assert commits[0] == 2 * 4  # d1 and d2 together: a state, its partition, /partitions, the topic
    for name in ("d1", "d2", "odd"):
        for path in (f"/brokers/topics/{name}", f"/config/topics/{name}", f"/admin/delete_topics/{name}"):
            assert brokers.raw.exists(path) is None, path
    assert set(registry.topics()) == set()


def test_many_topics_deleted_together_go_in_multi_ops_of_bounded_size(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One multi-op must stay below ZooKeeper's request limit (jute.maxbuffer, 1 MB: a DeleteTopics
    of thousands of partitions would be refused and the connection dropped): the deletions go in
    multi-ops of at most MAX_MULTI_OPS znodes, each topic whole within one."""
    monkeypatch.setattr(zookeeper_topics, "MAX_MULTI_OPS", 10)
    registry = brokers.open()
    names = [f"many{i}" for i in range(5)]
    for name in names:  # 4 znodes each: a state, its partition, /partitions, the topic
        registry.create_topic(name, {0: (1,), 1: (1,)}, {})
        registry.set_partition_state(name, 0, PartitionState(1, 0, (1,)))
    commits = _count_multi_ops(registry, monkeypatch)
    assert registry.delete_topics(names) == [None] * 5
    assert commits == [8, 8, 4]
    assert set(registry.topics()) == set()

    registry.create_topic("huge", {p: (1,) for p in range(6)}, {})
    for p in range(6):
        registry.set_partition_state("huge", p, PartitionState(1, 0, (1,)))
    commits.clear()  # a topic of more znodes than that goes znode by znode, never in one multi-op
    assert registry.delete_topics(["huge"]) == [None]
    assert commits == []
    assert brokers.raw.exists("/brokers/topics/huge") is None


def test_expired_config_change_notifications_are_purged(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = brokers.open()
    registry.create_topic("t", {0: (1,)}, {})
    for value in ("1", "2", "3"):
        registry.set_topic_configs("t", {"retention.ms": value})
    assert len(brokers.raw.get_children("/config/changes")) == 3
    monkeypatch.setattr(ConfigEntityChangeNotificationSequenceZNode, "EXPIRATION_MS", -60_000)
    registry.set_topic_configs("t", {"retention.ms": "4"})
    assert brokers.raw.get_children("/config/changes") == ["config_change_0000000003"]


def test_chroot_is_created(zookeeper: ZooKeeperServer) -> None:
    connect = zookeeper.connect_string(f"deep-{uuid.uuid4().hex[:8]}/a/b")
    assert split_connect(connect)[1].endswith("/a/b")
    with ZooKeeperRegistry(connect) as registry:
        registry.create_topic("t", {0: (1,)}, {})
    hosts, chroot = split_connect(connect)
    raw = KazooClient(hosts=hosts)
    raw.start(timeout=10)
    try:
        assert raw.exists(f"{chroot}/brokers/topics/t")
        assert raw.exists("/brokers") is None  # nothing outside the chroot
    finally:
        raw.stop()
        raw.close()


def test_split_connect() -> None:
    assert split_connect("a:1,b:2") == ("a:1,b:2", "")
    assert split_connect("a:1,b:2/kafka/prod/") == ("a:1,b:2", "/kafka/prod")
    assert split_connect("a:1/") == ("a:1", "")
    with pytest.raises(ValueError):
        split_connect("/kafka")


# -- several brokers ------------------------------------------------------------------------------
def test_a_closed_session_takes_its_registration_with_it(brokers: Brokers) -> None:
    one, two = brokers.open(), brokers.open()
    seen = Notifications()
    two.add_listener(seen)
    one.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    two.register_broker(BrokerRegistration(2, "127.0.0.1", 9093))
    assert seen.wait_for(lambda: [b.broker_id for b in two.live_brokers()] == [1, 2])

    seen.clear()
    one.close()
    assert seen.wait_for_reason("brokers"), "the other broker was not told"
    assert [b.broker_id for b in two.live_brokers()] == [2]


def test_a_broker_id_held_by_another_session_is_in_use(brokers: Brokers) -> None:
    one, two = brokers.open(), brokers.open()
    one.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    with pytest.raises(BrokerIdInUseError, match="Broker id 1 is already registered"):
        two.register_broker(BrokerRegistration(1, "127.0.0.1", 19092))
    two.unregister_broker(1)  # not two's registration: nothing happens
    assert [b.port for b in one.live_brokers()] == [9092]

    one.close()
    two.register_broker(BrokerRegistration(1, "127.0.0.1", 19092))
    assert [b.port for b in two.live_brokers()] == [19092]


def test_waiting_for_a_stale_registration_ends_when_its_session_goes(
    brokers: Brokers, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = brokers.open(), brokers.open()
    two.wait_for_stale_registration(1, timeout_s=0.1)  # nothing registered: at once
    one.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    one.wait_for_stale_registration(1, timeout_s=0.1)  # its own: at once
    owner = brokers.raw.exists("/brokers/ids/1").ephemeralOwner
    outcome: list[object] = []
    caplog.set_level("INFO", logger="kctl.zk.zookeeper")
    waiter = threading.Thread(target=lambda: outcome.append(two.wait_for_stale_registration(1, timeout_s=30)))
    waiter.start()
    deadline = time.monotonic() + 10
    while "waiting up to" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert waiter.is_alive(), outcome
    one.close()  # the old session ends: its ephemeral registration goes
    waiter.join(10)
    assert not waiter.is_alive() and outcome == [None]
    waits = [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()]
    assert len(waits) == 1 and f"0x{owner:x}" in waits[0] and "30 s" in waits[0], waits
    two.register_broker(BrokerRegistration(1, "127.0.0.1", 19092))
    assert [b.port for b in two.live_brokers()] == [19092]


def test_a_registration_that_stays_is_refused_after_the_wait_and_kept(brokers: Brokers) -> None:
    one, two = brokers.open(), brokers.open()
    one.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    started = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match=r"Broker id 1 is already registered .* still after waiting"):
        two.wait_for_stale_registration(1, timeout_s=0.5)
    assert 0.5 <= time.monotonic() - started < 5
    assert [b.port for b in two.live_brokers()] == [9092]  # another live session's node: never deleted


def test_controller_election_between_brokers(brokers: Brokers) -> None:
    one, two = brokers.open(), brokers.open()
    seen = Notifications()
    two.add_listener(seen)
    assert one.try_become_controller(1)
    assert not two.try_become_controller(2)
    assert two.controller_id() == 1
    assert two.controller_epoch() == 1

    seen.clear()
    one.close()
    assert seen.wait_for_reason("controller"), "the other broker was not told the controller left"
    assert two.controller_id() is None
    assert two.try_become_controller(2)
    assert two.controller_epoch() == 2
    assert brokers.json("/controller")["brokerid"] == 2


def test_a_controller_elected_and_gone_before_the_watch_rereads_is_still_announced(brokers: Brokers) -> None:
    """A controller that wins and is gone again before the other broker's watch has re-read
    /controller (its kazoo callback thread busy, as under load) must still be announced: otherwise
    no broker runs for controller and the cluster stays without one."""
    one, two = brokers.open(), brokers.open()
    seen = Notifications()
    two.add_listener(seen)
    busy, release = threading.Event(), threading.Event()

    def hold_the_callback_thread() -> None:
        busy.set()
        release.wait(10)

    two.kazoo_client.handler.dispatch_callback(Callback("watch", hold_the_callback_thread, ()))
    assert busy.wait(10)
    assert one.try_become_controller(1)
    one.close()  # its ephemeral /controller goes with the session
    assert brokers.raw.exists("/controller") is None
    release.set()
    assert seen.wait_for_reason("controller"), "the controller that came and went was never announced"
    assert two.try_become_controller(2)


def test_a_controller_gone_while_the_watch_is_set_again_is_announced(brokers: Brokers) -> None:
    """The watch's re-read after "created" is a request of its own: ZooKeeper may answer it after
    another session deleted /controller (the sessions are not ordered with each other), so it finds
    no znode and no "deleted" event ever comes. That deletion must still be announced, or no broker
    runs for controller (seen in CI: the creation was announced, the deletion never)."""
    one, two = brokers.open(), brokers.open()
    seen = Notifications()
    two.add_listener(seen)
    client = two.kazoo_client
    real_exists_async = client.exists_async
    deleted = threading.Event()

    def exists_answered_after_the_deletion(path: str, watch: Any = None) -> Any:
        if path != "/controller":
            return real_exists_async(path, watch=watch)
        answer = client.handler.async_result()

        def forward(done: Any) -> None:
            if done.successful():
                answer.set(done.value)
            else:
                answer.set_exception(done.exception)

        def later() -> None:
            deleted.wait(10)
            real_exists_async(path, watch=watch).rawlink(forward)

        threading.Thread(target=later, daemon=True).start()
        return answer

    client.exists_async = exists_answered_after_the_deletion  # type: ignore[method-assign]
    assert one.try_become_controller(1)
    assert seen.wait_for_reason("controller"), "the new controller was not announced"
    seen.clear()
    one.close()
    assert brokers.raw.exists("/controller") is None
    deleted.set()
    assert seen.wait_for_reason("controller"), "the controller's departure was never announced"
    client.exists_async = real_exists_async  # type: ignore[method-assign]
    assert two.try_become_controller(2)


def test_one_winner_when_brokers_race_for_controller(brokers: Brokers) -> None:
    registries = [brokers.open() for _ in range(5)]
    barrier = threading.Barrier(len(registries))
    results: dict[int, bool] = {}

    def run(broker_id: int, registry: ZooKeeperRegistry) -> None:
        barrier.wait()
        results[broker_id] = registry.try_become_controller(broker_id)

    threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(registries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    winners = [broker_id for broker_id, won in results.items() if won]
    assert len(results) == 5 and len(winners) == 1
    assert registries[0].controller_id() == winners[0]
    assert registries[0].controller_epoch() == 1


def test_other_brokers_hear_of_topic_config_and_partition_changes(brokers: Brokers) -> None:
    admin, other = brokers.open(), brokers.open()
    seen = Notifications()
    other.add_listener(seen)

    admin.create_topic("t", {0: (1,)}, {})
    assert seen.wait_for(lambda: "topics" in seen.reasons and other.get_topic("t") is not None)

    seen.clear()
    admin.add_partitions("t", {1: (1,)})
    assert seen.wait_for_reason("topics"), "partitions added, no notification"
    assert other.get_topic("t").partitions == 2  # type: ignore[union-attr]

    seen.clear()
    admin.set_partition_state("t", 1, PartitionState(1, 0, (1,)))
    assert seen.wait_for_reason("partitions"), "new partition state, no notification"
    seen.clear()
    admin.set_partition_state("t", 1, PartitionState(1, 1, (1,)))
    assert seen.wait_for_reason("partitions"), "changed partition state, no notification"
    assert other.partition_states("t")[1].leader_epoch == 1

    seen.clear()
    admin.set_topic_configs("t", {"cleanup.policy": "compact"})
    assert seen.wait_for_reason("configs"), "configs changed, no notification"
    assert other.get_topic("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]

    seen.clear()
    admin.delete_topic("t")
    assert seen.wait_for(lambda: "topics" in seen.reasons and other.topics() == {})


def test_config_changes_written_by_kafka_tools_are_heard(brokers: Brokers) -> None:
    registry = brokers.open()
    registry.create_topic("t", {0: (1,)}, {})
    seen = Notifications()
    registry.add_listener(seen)
    # What kafka-configs.sh --zookeeper does: overwrite the entity, then add a notification.
    brokers.raw.set("/config/topics/t", b'{"version":1,"config":{"retention.ms":"5"}}')
    brokers.raw.create(
        "/config/changes/config_change_", b'{"version":2,"entity_path":"topics/t"}', sequence=True
    )
    assert seen.wait_for_reason("configs")
    assert registry.get_topic("t").configs == {"retention.ms": "5"}  # type: ignore[union-attr]


# -- sessions and connections ---------------------------------------------------------------------
def _session_id(registry: ZooKeeperRegistry) -> int | None:
    """The registry's ZooKeeper session id; None while kazoo has none (an expired one dropped)."""
    client_id = registry.kazoo_client.client_id
    return None if client_id is None else int(client_id[0])


def expire_session(zookeeper: ZooKeeperServer, registry: ZooKeeperRegistry) -> None:
    """Make ZooKeeper expire the registry's session (kctl.testing.zk_sessions)."""
    session_id, password = registry.kazoo_client.client_id
    expire_after_twin(
        zookeeper.hosts,
        (session_id, password),
        lambda: registry.session_state() == "expired" or _session_id(registry) != session_id,
    )


def test_the_broker_registers_again_after_session_expiry(
    zookeeper: ZooKeeperServer,
    brokers: Brokers,
) -> None:
    broker, observer = brokers.open(session_timeout_ms=4000), brokers.open()
    broker_seen, observer_seen = Notifications(), Notifications()
    broker.add_listener(broker_seen)
    observer.add_listener(observer_seen)
    broker.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    assert broker.try_become_controller(1)
    old_session = broker.kazoo_client.client_id[0]

    expire_session(zookeeper, broker)

    def registered_again() -> bool:
        stat = brokers.raw.exists("/brokers/ids/1")
        return stat is not None and stat.ephemeralOwner not in (0, old_session)

    assert observer_seen.wait_for(lambda: "brokers" in observer_seen.reasons and registered_again(), 20)
    assert broker_seen.wait_for_reason("controller", 20), "the broker was not told it lost the controller"
    assert observer.controller_id() is None  # controllership went with the old session
    assert broker.try_become_controller(1)
    assert broker.controller_epoch() == 2
    assert [b.broker_id for b in observer.live_brokers()] == [1]


def test_connection_loss_makes_the_registry_unavailable_until_it_is_back(tmp_path: Path) -> None:
    server = start_zookeeper(tmp_path / "zk")
    connect = server.connect_string()
    broker = ZooKeeperRegistry(connect, session_timeout_ms=20_000, connection_timeout_ms=5000)
    admin = ZooKeeperRegistry(connect, session_timeout_ms=20_000, connection_timeout_ms=5000)
    try:
        broker.start()
        admin.start()
        broker.create_topic("t", {0: (1,)}, {})
        broker.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
        session = broker.kazoo_client.client_id[0]
        seen, admin_seen = Notifications(), Notifications()
        broker.add_listener(seen)
        admin.add_listener(admin_seen)

        server.stop()
        with pytest.raises(RegistryUnavailableError, match="ZooKeeper at"):
            for _ in range(1000):  # until the client notices the server is gone
                broker.topics()

        server.start()  # same port and data: the sessions are still alive
        assert seen.wait_for_reason("partitions", 60), "no notification after reconnecting"
        assert admin_seen.wait_for_reason("partitions", 60)
        assert broker.kazoo_client.client_id[0] == session
        assert [b.broker_id for b in admin.live_brokers()] == [1]

        # The watches were set again: changes made elsewhere are heard as before.
        seen.clear()
        admin.set_partition_state("t", 0, PartitionState(1, 0, (1,)))
        assert seen.wait_for_reason("partitions"), "partition state watch lost with the connection"
        seen.clear()
        admin.add_partitions("t", {1: (1,)})
        assert seen.wait_for_reason("topics"), "topic watch lost with the connection"
    finally:
        broker.close()
        admin.close()
        server.stop()


def test_no_server_means_unavailable_at_start(tmp_path: Path) -> None:
    from kctl.testing import free_port

    registry = ZooKeeperRegistry(f"127.0.0.1:{free_port()}", connection_timeout_ms=300)
    with pytest.raises(RegistryUnavailableError, match=r"could not connect to ZooKeeper .* within 300 ms"):
        registry.start()
    registry.close()


def test_a_state_there_before_its_watch_is_set_is_announced(brokers: Brokers) -> None:
    """The controller writes a new topic's states right after the topic: another broker hears of the
    topic, reads its states (maybe before they exist: the refresh its topic event causes), and then
    sets their watches — maybe after they were written, when no event will ever come, and the broker
    answered the partition leaderless until the next change (issue 28). A state found there when its
    watch is set is announced ("partitions"). Here the topic and its states are written in one
    transaction, so every state is there before its watch."""
    other = brokers.open()
    seen = Notifications()
    other.add_listener(seen)
    raw = brokers.raw
    for round_ in range(3):
        topic = f"atomic-{round_}"
        seen.clear()
        transaction = raw.transaction()
        transaction.create(TopicZNode.path(topic), TopicZNode.encode(uuid.uuid4(), {0: (1,)}))
        transaction.create(TopicPartitionsZNode.path(topic))
        transaction.create(TopicPartitionZNode.path(topic, 0))
        transaction.create(
            TopicPartitionStateZNode.path(topic, 0),
            TopicPartitionStateZNode.encode(PartitionState(1, 0, (1,))),
        )
        assert all(not isinstance(r, Exception) for r in transaction.commit())
        assert seen.wait_for_reason("partitions", timeout=5), f"{topic}: its state was never announced"
        assert other.partition_states(topic)[0].leader == 1


def test_a_log_dir_failure_is_announced_as_kafka_does_and_heard_by_the_controller(brokers: Brokers) -> None:
    """KIP-112 in ZooKeeper: the broker's offline replicas (ephemeral, kctl's own) and Kafka's log
    dir event notification, which wakes the controller's broker; the controller deletes it once read."""
    failing, controller = brokers.open(), brokers.open()
    seen = Notifications()
    controller.add_listener(seen)
    failing.report_offline_replicas(2, [("t", 1), ("t", 0)])
    assert seen.wait_for_reason("admin"), "a log dir event, no notification"
    [event] = brokers.raw.get_children("/log_dir_event_notification")
    assert event.startswith("log_dir_event_") and len(event) == len("log_dir_event_") + 10
    assert brokers.json(f"/log_dir_event_notification/{event}") == {"version": 1, "broker": 2, "event": 1}
    assert brokers.json("/kctl/offline_replicas/2") == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}],
    }
    assert brokers.raw.exists("/kctl/offline_replicas/2").ephemeralOwner == failing.kazoo_client.client_id[0]
    assert controller.offline_replicas() == {2: {("t", 0), ("t", 1)}}
    controller.finish_log_dir_events()
    assert brokers.raw.get_children("/log_dir_event_notification") == []
    failing.close()  # a restarted broker opens its dirs again: its offline replicas go with its session
    assert controller.offline_replicas() == {}
