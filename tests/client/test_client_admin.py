"""kctl.client against a real `kctl broker start` subprocess: the connection handshake, cluster
metadata, every AdminClient operation, partial failures, pipelining, and reconnecting after the
broker restarts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kctl.client import (
    AdminClient,
    AdminOperationError,
    BrokerConnection,
    BrokerResponseError,
    ClusterClient,
    ConfigSource,
    KafkaConnectionError,
    NewTopic,
    TopicPartition,
    raise_for_errors,
)
from kctl.client.connection import parse_address
from kctl.log.naming import partition_dir_name
from kctl.protocol import ApiKey
from kctl.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from kctl.protocol.messages.metadata import MetadataRequest
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess

T0 = 1_700_000_000_000


def produce(bootstrap: str, topic: str, partition: int, count: int, *, timestamp: int = T0) -> int:
    """Append `count` records (timestamps T0, T0+1000, ...) with Produce acks=1; the base offset."""
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(timestamp + i * 1000, b"k%d" % i, b"v%d" % i)
    body = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=builder.build())]
            )
        ],
    )
    host, port = parse_address(bootstrap)
    with BrokerConnection(host, port, timeout=10) as conn:
        response = conn.request(ApiKey.PRODUCE, body)
    [part] = response.responses[0].partition_responses
    assert part.error_code == 0, part
    return part.base_offset


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    client = AdminClient(broker.bootstrap, {"client.id": "test-admin", "request.timeout.ms": "10000"})
    yield client
    client.close()


def test_connection_handshake_against_the_broker(broker: BrokerProcess) -> None:
    host, port = parse_address(broker.bootstrap)
    with BrokerConnection(host, port, client_id="probe", timeout=10) as conn:
        assert conn.api_versions_version == 3
        assert conn.broker_versions[ApiKey.API_VERSIONS][1] >= 3
        assert conn.supports(ApiKey.METADATA) and conn.supports(ApiKey.CREATE_TOPICS)
        # pipelining: 20 requests in flight on one socket, answered in order
        sent = [conn.send(ApiKey.METADATA, MetadataRequest(topics=[])) for _ in range(20)]
        assert conn.in_flight == 20
        responses = [conn.receive(r) for r in reversed(sent)]
        assert {r.cluster_id for r in responses} == {responses[0].cluster_id}
        assert conn.in_flight == 0


def test_cluster_metadata(broker: BrokerProcess) -> None:
    with ClusterClient(broker.bootstrap) as cluster:
        metadata = cluster.refresh_metadata([])
        assert metadata.cluster_id
        assert len(metadata.brokers) == 1
        [node] = metadata.brokers.values()
        assert node.address == broker.bootstrap
        assert metadata.controller_id == node.node_id
        assert cluster.controller_id() == node.node_id
        conn = cluster.connection(node.node_id)
        assert conn.node_id == node.node_id
        assert cluster.any_connection() is conn  # the bootstrap connection was adopted
        assert cluster.connections() == {node.node_id: conn}
        missing = cluster.refresh_metadata(["no-such-topic"]).topic("no-such-topic")
        assert missing is not None and missing.error == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            cluster.leader_for(TopicPartition("no-such-topic", 0))
    with pytest.raises(KafkaConnectionError):
        cluster.any_connection()


def test_create_topics_with_partial_failures(admin: AdminClient) -> None:
    results = admin.create_topics(
        [
            NewTopic("orders", 3, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"}),
            NewTopic("defaults"),
            NewTopic("bad/name", 1, 1),
            NewTopic("twice", 1, 1),
            NewTopic("twice", 2, 1),
            NewTopic("zero", 0, 1),
            NewTopic("badconfig", 1, 1, {"no.such.config": "1"}),
        ]
    )
    by_name = {(r.name, i): r for i, r in enumerate(results)}
    assert [r.name for r in results] == [
        "orders",
        "defaults",
        "bad/name",
        "twice",
        "twice",
        "zero",
        "badconfig",
    ]
    orders = by_name["orders", 0]
    assert orders.ok and orders.error is None
    assert (orders.num_partitions, orders.replication_factor) == (3, 1)
    assert isinstance(orders.topic_id, uuid.UUID)
    assert orders.configs["retention.ms"] == "3600000"
    assert by_name["defaults", 1].ok and by_name["defaults", 1].num_partitions >= 1
    assert by_name["bad/name", 2].error == "INVALID_TOPIC_EXCEPTION"
    assert by_name["bad/name", 2].error_message
    assert by_name["twice", 3].error == by_name["twice", 4].error == "INVALID_REQUEST"
    assert by_name["zero", 5].error == "INVALID_PARTITIONS"
    assert by_name["badconfig", 6].error == "INVALID_CONFIG"
    with pytest.raises(AdminOperationError) as info:
        raise_for_errors(results)
    assert len(info.value.failures) == 5

    again = admin.create_topics([NewTopic("orders", 3, 1)])
    assert again[0].error == "TOPIC_ALREADY_EXISTS"
    raise_for_errors(again, ignore={"TOPIC_ALREADY_EXISTS"})

    [dry] = admin.create_topics([NewTopic("dry-run", 4, 1)], validate_only=True)
    assert dry.ok and dry.num_partitions == 4
    assert [t.name for t in admin.list_topics()] == ["defaults", "orders"]


def test_describe_and_list_topics(admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("a", 2, 1), NewTopic("b", 1, 1)]))
    a, missing, b = admin.describe_topics(["a", "missing", "b"])
    assert a.ok and a.name == "a" and not a.internal and isinstance(a.topic_id, uuid.UUID)
    assert [p.partition for p in a.partitions] == [0, 1]
    p0 = a.partitions[0]
    assert p0.leader >= 0 and p0.replicas == (p0.leader,) and p0.isr == (p0.leader,) and p0.offline == ()
    assert p0.leader_epoch >= 0
    assert a.replication_factor == 1
    assert missing.error == "UNKNOWN_TOPIC_OR_PARTITION" and missing.partitions == ()
    assert b.ok and len(b.partitions) == 1
    assert [(t.name, len(t.partitions)) for t in admin.list_topics()] == [("a", 2), ("b", 1)]
    assert admin.describe_topics([]) == []


def test_delete_topics(admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("gone", 1, 1), NewTopic("kept", 1, 1)]))
    gone, missing = admin.delete_topics(["gone", "missing"])
    assert gone.ok
    assert missing.error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert [t.name for t in admin.list_topics()] == ["kept"]
    assert admin.describe_topics(["gone"])[0].error == "UNKNOWN_TOPIC_OR_PARTITION"
    # the name can be used again at once
    [recreated] = admin.create_topics([NewTopic("gone", 2, 1)])
    assert recreated.ok, recreated


def test_configs(admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("c", 1, 1, {"retention.ms": "1000"})]))
    entries = {e.name: e for e in admin.describe_configs("c")}
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not entries["retention.ms"].is_default
    assert (
        entries["segment.bytes"].is_default and entries["segment.bytes"].source is ConfigSource.DEFAULT_CONFIG
    )
    assert any(s.source is ConfigSource.DYNAMIC_TOPIC_CONFIG for s in entries["retention.ms"].synonyms)

    result = admin.alter_configs("c", set={"segment.bytes": "1048576"}, delete=["retention.ms"])
    assert result.ok, result
    [configs] = admin.describe_topic_configs(["c"])
    assert {e.name: e.value for e in configs.non_default()} == {"segment.bytes": "1048576"}

    result = admin.alter_configs("c", append={"cleanup.policy": "compact"})
    assert result.ok, result
    assert {e.name: e.value for e in admin.describe_configs("c")}["cleanup.policy"] == "delete,compact"

    assert admin.alter_configs("c", set={"no.such.config": "1"}).error == "INVALID_CONFIG"
    assert admin.alter_configs("missing", set={"retention.ms": "1"}).error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert admin.alter_configs("c", set={"segment.bytes": "2097152"}, validate_only=True).ok
    assert {e.name: e.value for e in admin.describe_configs("c")}["segment.bytes"] == "1048576"

    with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        admin.describe_configs("missing")
    c, missing = admin.describe_topic_configs(["c", "missing"])
    assert c.ok and missing.error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert admin.describe_configs("c", keys=["retention.ms"])[0].name == "retention.ms"


def test_create_partitions(admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("grow", 1, 1)]))
    assert admin.create_partitions("grow", 4).ok
    assert len(admin.describe_topics(["grow"])[0].partitions) == 4
    assert admin.create_partitions("grow", 2).error == "INVALID_PARTITIONS"
    assert admin.create_partitions("grow", 8, validate_only=True).ok
    assert len(admin.describe_topics(["grow"])[0].partitions) == 4
    assert admin.create_partitions("missing", 2).error == "UNKNOWN_TOPIC_OR_PARTITION"
    # the new partitions have leaders: their offsets can be listed at once
    offsets = admin.list_offsets([TopicPartition("grow", p) for p in range(4)], "latest")
    assert {tp.partition: r.offset for tp, r in offsets.items()} == {0: 0, 1: 0, 2: 0, 3: 0}


def test_list_offsets_and_delete_records(broker: BrokerProcess, admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("log", 2, 1)]))
    assert produce(broker.bootstrap, "log", 0, 10) == 0
    p0, p1, p9 = TopicPartition("log", 0), TopicPartition("log", 1), TopicPartition("log", 9)
    latest = admin.list_offsets([p0, p1, p9], "latest")
    assert (latest[p0].offset, latest[p1].offset) == (10, 0)
    assert latest[p9].error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert admin.list_offsets([p0], "earliest")[p0].offset == 0
    at = admin.list_offsets([p0], T0 + 3500)[p0]
    assert (at.offset, at.timestamp) == (4, T0 + 4000)
    assert admin.list_offsets([p0], T0 + 60_000)[p0].offset == -1
    top = admin.list_offsets([p0], "max-timestamp")[p0]
    assert (top.offset, top.timestamp) == (9, T0 + 9000)
    mixed = admin.list_offsets({p0: "earliest", p1: "latest"})
    assert (mixed[p0].offset, mixed[p1].offset) == (0, 0)
    missing = TopicPartition("missing", 0)
    assert admin.list_offsets([missing])[missing].error == "UNKNOWN_TOPIC_OR_PARTITION"

    deleted = admin.delete_records({p0: 4, p9: 1})
    assert deleted[p0].ok and deleted[p0].low_watermark == 4
    assert deleted[p9].error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert admin.list_offsets([p0], "earliest")[p0].offset == 4
    assert admin.delete_records({p0: 11})[p0].error == "OFFSET_OUT_OF_RANGE"
    assert admin.delete_records({p0: -1})[p0].low_watermark == 10
    assert admin.list_offsets([p0], "earliest")[p0].offset == 10


def test_describe_cluster(broker: BrokerProcess, admin: AdminClient) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id and len(cluster.brokers) == 1
    assert cluster.brokers[0].address == broker.bootstrap
    assert cluster.controller_id == cluster.brokers[0].node_id


def test_describe_log_dirs(broker: BrokerProcess, admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("sized", 3, 1), NewTopic("other", 1, 1)]))
    produce(broker.bootstrap, "sized", 1, 10)
    produce(broker.bootstrap, "sized", 2, 3)
    node_id = admin.describe_cluster().brokers[0].node_id

    everything = admin.describe_log_dirs()
    assert list(everything) == [node_id]
    [log_dir] = everything[node_id]
    assert log_dir.ok and log_dir.path == str(broker.data_dir.resolve())
    assert log_dir.total_bytes >= log_dir.usable_bytes > 0
    on_disk = {
        TopicPartition(topic, p): sum(f.stat().st_size for f in (broker.data_dir / name).glob("*.log"))
        for topic, p in [("sized", 0), ("sized", 1), ("sized", 2), ("other", 0)]
        for name in [partition_dir_name(TopicPartition(topic, p))]
    }
    sizes = {
        r.topic_partition: r.size for r in log_dir.replicas if r.topic_partition.topic != "__consumer_offsets"
    }
    assert sizes == on_disk
    assert on_disk[TopicPartition("sized", 1)] > on_disk[TopicPartition("sized", 2)] > 0
    assert log_dir.size >= sum(on_disk.values())
    assert all(r.offset_lag == 0 and not r.is_future for r in log_dir.replicas)

    wanted = [TopicPartition("sized", 2), TopicPartition("sized", 7), TopicPartition("missing", 0)]
    [subset] = admin.describe_log_dirs([node_id], wanted)[node_id]
    assert [(r.topic_partition, r.size) for r in subset.replicas] == [
        (TopicPartition("sized", 2), on_disk[TopicPartition("sized", 2)])
    ]
    [nothing] = admin.describe_log_dirs([node_id], [TopicPartition("missing", 0)])[node_id]
    assert nothing.ok and nothing.replicas == ()


@pytest.mark.parametrize("version", range(5))
def test_describe_log_dirs_every_version(broker: BrokerProcess, admin: AdminClient, version: int) -> None:
    raise_for_errors(admin.create_topics([NewTopic("v", 1, 1)]))
    produce(broker.bootstrap, "v", 0, 4)
    size = sum(f.stat().st_size for f in (broker.data_dir / "v_0").glob("*.log"))
    host, port = parse_address(broker.bootstrap)
    with BrokerConnection(host, port, timeout=10) as conn:
        for topics in (None, [DescribableLogDirTopic(topic="v", partitions=[0])]):
            r = conn.request(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=topics), version)
            [result] = r.results
            assert (r.error_code, result.error_code, result.log_dir) == (0, 0, str(broker.data_dir.resolve()))
            [(partition, partition_size)] = [
                (p.partition_index, p.partition_size)
                for t in result.topics
                if t.name == "v"
                for p in t.partitions
            ]
            assert (partition, partition_size) == (0, size) and size > 0
            assert (result.total_bytes > 0) == (version >= 4)


def test_the_client_reconnects_after_the_broker_restarts(broker: BrokerProcess, admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("durable", 2, 1)]))
    produce(broker.bootstrap, "durable", 1, 3)
    old = admin.cluster.any_connection()
    broker.restart()
    # the old socket is dead; the next operation fails over to a new connection and retries
    [durable] = admin.describe_topics(["durable"])
    assert durable.ok and len(durable.partitions) == 2
    assert old.closed or admin.cluster.any_connection() is not old
    tp = TopicPartition("durable", 1)
    assert admin.list_offsets([tp])[tp].offset == 3
    broker.kill()
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError):
        admin.describe_topics(["durable"], timeout=1.5)
    assert time.monotonic() - started < 10
    broker.start()
    assert admin.describe_topics(["durable"])[0].ok


def test_a_broker_that_does_not_answer_is_given_up_after_the_request_timeout(broker: BrokerProcess) -> None:
    """Issue 25 §3: an admin operation retried a killed broker until default.api.timeout.ms (60 s),
    whatever request.timeout.ms said. The admin client gives it up after request.timeout.ms and
    names it; a client without that policy (a consumer's offset lookup) still retries until its
    deadline."""
    from kctl.client.consumer.offsets import list_offsets

    tp = TopicPartition("gone", 0)
    config = {"request.timeout.ms": "1500", "default.api.timeout.ms": "60000"}
    with AdminClient(broker.bootstrap, config) as admin, ClusterClient(broker.bootstrap, config) as plain:
        raise_for_errors(admin.create_topics([NewTopic("gone", 1, 1)]))
        admin.cluster.wait_for_topics(["gone"], timeout=30)
        assert admin.list_offsets([tp])[tp].ok and list_offsets(plain, [tp])[tp].ok
        assert (admin.cluster.give_up_after, plain.give_up_after) == (1.5, None)
        broker.kill()
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError) as failed:
            admin.list_offsets([tp])
        assert time.monotonic() - started < 10, "given up after request.timeout.ms, not 60 s"
        assert "has not answered" in str(failed.value) or "cannot reach any broker" in str(failed.value)
        assert list(admin.cluster.not_answering()) == [broker.broker_id]
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            list_offsets(plain, [tp], timeout=4)
        assert time.monotonic() - started >= 2.5, "without give_up_after: retried to (about) the deadline"
    broker.start()


def test_wait_for_topics(admin: AdminClient) -> None:
    raise_for_errors(admin.create_topics([NewTopic("fresh", 3, 1)]))
    ready = admin.cluster.wait_for_topics(["fresh"], timeout=10)
    assert all(p.leader >= 0 for p in ready["fresh"].partitions)
    started = time.monotonic()
    with pytest.raises(Exception, match="not ready"):
        admin.cluster.wait_for_topics(["never"], timeout=0.5)
    assert time.monotonic() - started < 5
