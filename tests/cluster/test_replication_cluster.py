"""Replication end to end: three broker processes on one ZooKeeper, a topic with replication factor 3
and min.insync.replicas 2; acks=all through confluent-kafka, byte-identical replica logs, consumers
bounded by the high watermark, ISR shrink and expand around a killed follower, NOT_ENOUGH_REPLICAS,
follower truncation after a leader change (KIP-101), and the high watermark across a restart.

Leader changes are simulated by writing the partition state as the controller does (leader, bumped
leader epoch, ISR, conditional on the partition epoch)."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from raw_kafka import RawConnection, unique

from kctl.common.topic_partition import TopicPartition
from kctl.log.naming import partition_dir_name
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.protocol.registry import ApiKey
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import LocalCluster, wait_for
from kctl.zk.model import PartitionState
from kctl.zk.zookeeper import ZooKeeperRegistry

pytestmark = pytest.mark.e2e

LAG_MS = 1500
CLUSTER_PROPS = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "replica.high.watermark.checkpoint.interval.ms": "200",
    "zookeeper.session.timeout.ms": "6000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
}


@pytest.fixture
def cluster(local_cluster_factory) -> LocalCluster:  # type: ignore[no-untyped-def]
    return local_cluster_factory(3, CLUSTER_PROPS)


@pytest.fixture
def registry(cluster: LocalCluster):  # type: ignore[no-untyped-def]
    with ZooKeeperRegistry(cluster.zookeeper_connect) as reg:
        yield reg


def describe_isrs(states: dict[int, PartitionState], replicas: list[int]) -> str:
    """How many partitions have each ISR (and which lack a state), for a timeout's message."""
    counts: dict[str, int] = {}
    for state in states.values():
        key = f"leader {state.leader} isr {sorted(state.isr)}"
        counts[key] = counts.get(key, 0) + 1
    lacking = [p for p, state in states.items() if sorted(state.isr) != replicas]
    return f"{len(states)} states: {counts}; not yet {replicas}: {lacking[:20]}"


def create_topic(cluster: LocalCluster, name: str, *, min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=3, config={"min.insync.replicas": str(min_isr)})]
    )
    futures[name].result(timeout=20)


def state_of(registry: ZooKeeperRegistry, topic: str) -> PartitionState:
    return registry.partition_states(topic)[0]


def produce_all(cluster: LocalCluster, topic: str, count: int, prefix: str = "m") -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 20000,
        }
    )
    errors: list[object] = []
    for i in range(count):
        producer.produce(
            topic,
            value=f"{prefix}-{i}".encode(),
            partition=0,
            on_delivery=lambda e, _m: e and errors.append(e),
        )
    assert producer.flush(30) == 0
    assert errors == []


def partition_dir(cluster: LocalCluster, broker_id: int, topic: str) -> Path:
    return cluster.broker(broker_id).data_dir / partition_dir_name(TopicPartition(topic, 0))


def segment_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> bytes:
    directory = partition_dir(cluster, broker_id, topic)
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def wait_logs_identical(
    cluster: LocalCluster, topic: str, brokers: tuple[int, ...], timeout: float = 20
) -> bytes:
    def same() -> bytes | None:
        contents = {segment_bytes(cluster, b, topic) for b in brokers}
        return contents.pop() if len(contents) == 1 else None

    return wait_for(same, f"identical logs of {topic} on {brokers}", timeout)


def bootstrap_of(cluster: LocalCluster, broker_id: int) -> str:
    return cluster.broker(broker_id).bootstrap


def raw_produce(bootstrap: str, topic: str, acks: int, timeout_ms: int = 5000) -> int:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"k", b"raw")
    return raw_produce_batch(bootstrap, topic, builder.build(), acks, timeout_ms)[0]


def idempotent_batch(producer_id: int, base_sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence)
    for i in range(count):
        builder.append(int(time.time() * 1000), None, b"seq-%d" % (base_sequence + i))
    return builder.build()


def raw_produce_batch(
    bootstrap: str, topic: str, records: bytes, acks: int = -1, timeout_ms: int = 5000
) -> tuple[int, int]:
    """(error code, base offset) of one Produce v9 of ``records`` to partition 0."""
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )
    with RawConnection(bootstrap, timeout=timeout_ms / 1000 + 10) as connection:
        response = connection.request(ApiKey.PRODUCE, 9, request, timeout=timeout_ms / 1000 + 10)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def latest_offset(bootstrap: str, topic: str, replica_id: int = -1) -> tuple[int, int]:
    request = ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=0,
        topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])
        ],
    )
    with RawConnection(bootstrap) as connection:
        response = connection.request(ApiKey.LIST_OFFSETS, 5, request)
    answer = response.topics[0].partitions[0]
    return answer.error_code, answer.offset


def consume_count(cluster: LocalCluster, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])  # no group coordinator involved
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_acks_all_replicates_identical_logs_and_consumers_stop_at_the_high_watermark(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    topic = unique("rep")
    create_topic(cluster, topic)
    state = state_of(registry, topic)
    assert sorted(state.isr) == [1, 2, 3]
    produce_all(cluster, topic, 300)
    content = wait_logs_identical(cluster, topic, (1, 2, 3))
    assert content
    leader = bootstrap_of(cluster, state.leader)
    assert latest_offset(leader, topic) == (0, 300)
    assert sorted(consume_count(cluster, topic, 300)) == sorted(f"m-{i}".encode() for i in range(300))

    # With both followers paused, an acks=1 append is in the leader's log but above the high
    # watermark: consumers do not see it (ListOffsets latest stays), a follower's view does.
    followers = [b for b in (1, 2, 3) if b != state.leader]
    for follower in followers:
        cluster.broker(follower).pause()
    try:
        assert raw_produce(leader, topic, acks=1) == ErrorCode.NONE
        assert latest_offset(leader, topic) == (0, 300)
        assert latest_offset(leader, topic, replica_id=followers[0]) == (0, 301)
    finally:
        for follower in followers:
            cluster.broker(follower).resume()
    wait_for(lambda: latest_offset(leader, topic) == (0, 301), "the high watermark to pass the append", 20)
    wait_logs_identical(cluster, topic, (1, 2, 3))


def test_killed_follower_leaves_the_isr_min_insync_holds_and_it_rejoins(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    topic = unique("isr")
    create_topic(cluster, topic)
    produce_all(cluster, topic, 50, "a")
    state = state_of(registry, topic)
    leader = bootstrap_of(cluster, state.leader)
    first, second = [b for b in (1, 2, 3) if b != state.leader]

    cluster.kill(first)
    wait_for(lambda: first not in state_of(registry, topic).isr, f"broker {first} to leave the ISR", 20)
    produce_all(cluster, topic, 50, "b")  # ISR of 2 = min.insync.replicas: acks=all still works

    cluster.kill(second)
    wait_for(
        lambda: state_of(registry, topic).isr == (state.leader,),
        f"broker {second} to leave the ISR",
        20,
    )
    assert raw_produce(leader, topic, acks=-1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert raw_produce(leader, topic, acks=1) == ErrorCode.NONE

    for broker_id in (first, second):  # its ZooKeeper session must expire before it registers again
        wait_for(lambda b=broker_id: b not in {r.broker_id for r in registry.live_brokers()}, "expiry", 30)
        cluster.restart(broker_id)
    wait_for(
        lambda: sorted(state_of(registry, topic).isr) == [1, 2, 3],
        "the followers to rejoin the ISR",
        30,
    )
    assert raw_produce(leader, topic, acks=-1) == ErrorCode.NONE
    wait_logs_identical(cluster, topic, (1, 2, 3))
    assert latest_offset(leader, topic) == (0, 102)


def test_leader_change_truncates_the_old_leaders_unreplicated_tail(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    """KIP-101: the leader appends to itself only (followers paused), then loses leadership; as a
    follower of the new epoch it truncates what the new leader never had, and the logs converge."""
    topic = unique("kip101")
    create_topic(cluster, topic)
    produce_all(cluster, topic, 20, "a")
    wait_logs_identical(cluster, topic, (1, 2, 3))
    state = state_of(registry, topic)
    old_leader = state.leader
    new_leader, other = [b for b in (1, 2, 3) if b != old_leader]
    for follower in (new_leader, other):
        cluster.broker(follower).pause()
    # a follower's fetch parked on the leader is answered within replica.fetch.wait.max.ms (200 ms);
    # appends after that cannot reach the paused followers
    time.sleep(0.6)
    try:
        for _ in range(3):
            assert raw_produce(bootstrap_of(cluster, old_leader), topic, acks=1) == ErrorCode.NONE
        registry.set_partition_state(
            topic,
            0,
            PartitionState(new_leader, state.leader_epoch + 1, (new_leader, other), state.controller_epoch),
            expected_partition_epoch=state_of(registry, topic).partition_epoch,
        )
        # the followers resume only once the old leader has stepped down: resumed earlier, they
        # may fetch the unreplicated appends from it before they learn of the new epoch (a race
        # Kafka has as well), and nothing would be left to truncate
        wait_for(
            lambda: latest_offset(bootstrap_of(cluster, old_leader), topic)[0]
            == ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {old_leader} to step down",
            20,
        )
    finally:
        for follower in (new_leader, other):
            cluster.broker(follower).resume()
    wait_for(
        lambda: latest_offset(bootstrap_of(cluster, new_leader), topic)[0] == ErrorCode.NONE,
        f"broker {new_leader} to lead",
        20,
    )
    produce_all(cluster, topic, 10, "b")
    content = wait_logs_identical(cluster, topic, (1, 2, 3))
    assert latest_offset(bootstrap_of(cluster, new_leader), topic) == (0, 30)
    assert b"raw" not in content  # the old leader's unreplicated appends are gone everywhere
    values = consume_count(cluster, topic, 30)
    assert len(values) == 30 and b"raw" not in values
    epoch_file = partition_dir(cluster, old_leader, topic) / "leader-epoch-checkpoint"
    lines = epoch_file.read_text().split()
    assert lines[-2:] == [str(state.leader_epoch + 1), "20"]


def test_high_watermark_survives_a_restart(cluster: LocalCluster, registry: ZooKeeperRegistry) -> None:
    topic = unique("hw")
    create_topic(cluster, topic)
    produce_all(cluster, topic, 40)
    state = state_of(registry, topic)
    follower = next(b for b in (1, 2, 3) if b != state.leader)
    wait_logs_identical(cluster, topic, (1, 2, 3))
    data_dir: Path = cluster.broker(follower).data_dir

    def checkpointed() -> bool:
        text = (data_dir / "replication-offset-checkpoint").read_text()
        return f"{topic} 0 40" in text

    wait_for(checkpointed, "the follower's high watermark checkpoint", 20)
    cluster.stop_broker(state.leader)
    cluster.restart(state.leader)
    assert (
        f"{topic} 0 40"
        in (cluster.broker(state.leader).data_dir / "replication-offset-checkpoint").read_text()
    )
    # Controlled shutdown moved leadership to a follower; whichever broker leads now serves all 40.
    wait_for(lambda: state_of(registry, topic).leader in (1, 2, 3), "a leader", 20)
    leader = state_of(registry, topic).leader
    wait_for(lambda: latest_offset(bootstrap_of(cluster, leader), topic) == (0, 40), "the leader's end", 20)


def test_group_offsets_are_replicated_and_follow_the_offsets_partitions_leader(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    topic, group = unique("grp"), unique("g")
    create_topic(cluster, topic)
    produce_all(cluster, topic, 20)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 20
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and committed[0].offset == 20
    finally:
        consumer.close()
    offsets_state = state_of(registry, "__consumer_offsets")
    assert sorted(offsets_state.isr) == [1, 2, 3]
    wait_logs_identical(cluster, "__consumer_offsets", (1, 2, 3))

    # the offsets partition gets a new leader: it loads the group and answers for it
    new_leader = next(b for b in (1, 2, 3) if b != offsets_state.leader)
    registry.set_partition_state(
        "__consumer_offsets",
        0,
        PartitionState(new_leader, offsets_state.leader_epoch + 1, (1, 2, 3), offsets_state.controller_epoch),
        expected_partition_epoch=offsets_state.partition_epoch,
    )
    # Brokers learn the new state from their ZooKeeper watches: until they have, FindCoordinator can
    # still name the old leader, which answers NOT_COORDINATOR. librdkafka's committed() reports that
    # rather than looking the coordinator up again, so ask again (a new client) as an application would.
    deadline = time.monotonic() + 30
    while True:
        reader = Consumer({"bootstrap.servers": bootstrap_of(cluster, new_leader), "group.id": group})
        try:
            answer = reader.committed([KafkaTopicPartition(topic, 0)], timeout=30)
            break
        except KafkaException as error:
            retriable = error.args[0].code() in (
                KafkaError.NOT_COORDINATOR,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                KafkaError.COORDINATOR_NOT_AVAILABLE,
            )
            if not retriable or time.monotonic() > deadline:
                raise
        finally:
            reader.close()
    assert answer[0].offset == 20


def test_an_idempotent_producer_continues_on_the_new_leader(
    cluster: LocalCluster, registry: ZooKeeperRegistry
) -> None:
    """The followers' logs carry the idempotent producers' state: after a leader change the new
    leader accepts the producer's next sequence numbers (no OUT_OF_ORDER_SEQUENCE_NUMBER, no
    duplicates)."""
    topic = unique("idem")
    create_topic(cluster, topic)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[object] = []

    def send(prefix: str) -> None:
        for i in range(25):
            producer.produce(
                topic,
                value=f"{prefix}-{i}".encode(),
                partition=0,
                on_delivery=lambda e, _m: e and errors.append(e),
            )
        assert producer.flush(30) == 0

    send("a")
    state = state_of(registry, topic)
    old_leader = bootstrap_of(cluster, state.leader)
    assert raw_produce_batch(old_leader, topic, idempotent_batch(987654, 0, 3)) == (0, 25)
    assert raw_produce_batch(old_leader, topic, idempotent_batch(987654, 3, 2)) == (0, 28)
    wait_logs_identical(cluster, topic, (1, 2, 3))
    new_leader = next(b for b in (1, 2, 3) if b != state.leader)
    registry.set_partition_state(
        topic,
        0,
        PartitionState(new_leader, state.leader_epoch + 1, (1, 2, 3), state.controller_epoch),
        expected_partition_epoch=state.partition_epoch,
    )
    wait_for(
        lambda: latest_offset(bootstrap_of(cluster, new_leader), topic)[0] == ErrorCode.NONE,
        f"broker {new_leader} to lead",
        20,
    )
    leader = bootstrap_of(cluster, new_leader)
    # the new leader knows producer 987654 from its follower log: a retried batch is a duplicate
    # (answered with its original offset, not written again), a gap is out of order
    assert raw_produce_batch(leader, topic, idempotent_batch(987654, 3, 2)) == (0, 28)
    gap = raw_produce_batch(leader, topic, idempotent_batch(987654, 9, 1))
    assert gap[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw_produce_batch(leader, topic, idempotent_batch(987654, 5, 1)) == (0, 30)
    send("b")
    assert errors == []
    wait_logs_identical(cluster, topic, (1, 2, 3))
    values = [v for v in consume_count(cluster, topic, 56) if not v.startswith(b"seq-")]
    expected = [f"a-{i}".encode() for i in range(25)] + [f"b-{i}".encode() for i in range(25)]
    assert sorted(values) == sorted(expected)
    assert latest_offset(leader, topic) == (0, 56)


def test_a_follower_keeps_answering_while_it_creates_a_wide_topics_logs(cluster: LocalCluster) -> None:
    """The controller takes a CreateTopics of 600 partitions replicated on it and one other broker,
    which learns of them from ZooKeeper: the controller's 600 partition-state writes coalesce there
    into a few metadata refreshes (one per write made it unresponsive for over 10 s), and it creates
    its 600 logs a slice
    at a time, answering Metadata while its log directory holds some but not all of them (before, its
    event loop created them all in one go). Then every replica joins the ISR."""
    from kctl.protocol.codec import decode_response, encode_request
    from kctl.protocol.messages.create_topics import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
    )
    from kctl.protocol.messages.metadata import MetadataRequest

    topic, count = unique("wide"), 600
    probe_body = MetadataRequest(
        topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )

    def controller_seeing_all_brokers() -> int | None:
        """The controller's id once it knows every broker (the assignment names them: a broker it has
        not seen yet would make the create fail)."""
        for broker_id in (1, 2, 3):
            with RawConnection(cluster.broker(broker_id).bootstrap) as conn:
                answer = conn.request(ApiKey.METADATA, 9, probe_body)
            if answer.controller_id in (1, 2, 3) and answer.controller_id == broker_id:
                return broker_id if len(answer.brokers) == 3 else None
        return None

    controller = wait_for(controller_seeing_all_brokers, "a controller that sees the 3 brokers", 30)
    follower = next(b for b in (1, 2, 3) if b != controller)  # learns of the topic from ZooKeeper
    replicas = sorted((controller, follower))
    follower_dir = cluster.broker(follower).data_dir
    prefix = partition_dir_name(TopicPartition(topic, 0))[: -len("0")]
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=topic,
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    CreatableReplicaAssignment(partition_index=p, broker_ids=replicas) for p in range(count)
                ],
                configs=[],
            )
        ],
        timeout_ms=60_000,
        validate_only=False,
    )
    seen: list[int] = []
    result = None
    with (
        RawConnection(cluster.broker(controller).bootstrap, timeout=60) as creator,
        RawConnection(cluster.broker(follower).bootstrap, timeout=10) as prober,
    ):
        header = creator.header(ApiKey.CREATE_TOPICS, 5)
        creator.send(encode_request(header, request))  # answered below; probing starts at once
        deadline = time.monotonic() + 90
        while not seen or seen[-1] < count:
            assert time.monotonic() < deadline, f"broker {follower} has {seen[-1:]} of {count} logs"
            prober.request(ApiKey.METADATA, 9, probe_body)  # answered, or the test fails here
            seen.append(sum(1 for name in os.listdir(follower_dir) if name.startswith(prefix)))
            if result is None and select.select([creator.sock], [], [], 0)[0]:  # a refusal ends it here
                [result] = decode_response(header, creator.recv_frame(60))[1].topics
                assert result.error_code == ErrorCode.NONE, result
        if result is None:
            [result] = decode_response(header, creator.recv_frame(60))[1].topics
            assert result.error_code == ErrorCode.NONE, result
    partial = [n for n in seen if 0 < n < count]
    assert partial, f"no answer came while broker {follower} created its logs (counts: {sorted(set(seen))})"
    with ZooKeeperRegistry(cluster.zookeeper_connect) as registry:
        wait_for(
            lambda: (
                (states := registry.partition_states(topic)).keys() == set(range(count))
                and all(sorted(state.isr) == replicas for state in states.values())
            ),
            f"broker {follower} to join the ISR of the wide topic's partitions",
            60,
            describe=lambda: describe_isrs(registry.partition_states(topic), replicas),
        )
