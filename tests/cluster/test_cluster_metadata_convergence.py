"""Metadata convergence on a 3-broker cluster (issue 28): once CreateTopics, CreatePartitions or
DeleteTopics has been answered, every broker serves the new view, and no broker ever answers an
older view than one it answered before.

Each admin request is sent to every broker in turn (the brokers that are not the controller answer
NOT_CONTROLLER, as Kafka's ZooKeeper-mode brokers do; the request is then sent to the controller);
right after the answer, every broker's Metadata is probed in a tight loop, round-robin over one raw
connection per broker. An old view is a topic missing (after a create), fewer partitions than were
asked for, a partition without a leader, or a deleted topic still there."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from raw_kafka import RawConnection, metadata, unique

import kctl.protocol as kp
from kctl.localcluster.cluster import LocalCluster
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from kctl.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kctl.protocol.messages.delete_topics import DeleteTopicsRequest
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.testing import wait_for

PROBE_S = 0.3  # how long every broker is probed after each admin answer
ROUNDS = 6
BACKGROUND_TOPICS = 20
TOPICS_PER_REQUEST = 4
METADATA_VERSION = 12
TIMEOUT_MS = 30_000
MANY_TOPICS = 100


@pytest.fixture(scope="module")
def cluster(module_cluster_factory) -> LocalCluster:
    started: LocalCluster = module_cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    return started


@pytest.fixture
def connections(cluster: LocalCluster) -> Iterator[dict[int, RawConnection]]:
    conns = {bid: RawConnection(b.bootstrap) for bid, b in cluster.brokers.items()}
    try:
        yield conns
    finally:
        for conn in conns.values():
            conn.close()


def views(conns: dict[int, RawConnection], topics: list[str]) -> dict[int, dict[str, tuple[int, int]]]:
    """Every broker's view of ``topics`` (the Metadata requests are all sent before any answer is
    read): per topic, its partition count and how many partitions have a leader; (0, 0) when the
    broker does not know the topic."""
    headers = {}
    for broker_id, conn in conns.items():
        headers[broker_id] = header = conn.header(kp.ApiKey.METADATA, METADATA_VERSION)
        body = MetadataRequest(
            topics=[MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        conn.send(kp.encode_request(header, body))
    seen: dict[int, dict[str, tuple[int, int]]] = {}
    for broker_id, conn in conns.items():
        response = kp.decode_response(headers[broker_id], conn.recv_frame())[1]
        seen[broker_id] = {}
        for answer in response.topics:
            if answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                seen[broker_id][answer.name] = (0, 0)
                continue
            assert answer.error_code == ErrorCode.NONE, answer
            led = sum(1 for p in answer.partitions if p.leader_id >= 0 and p.error_code == ErrorCode.NONE)
            seen[broker_id][answer.name] = (len(answer.partitions), led)
    return seen


def controller_of(conns: dict[int, RawConnection]) -> int:
    return int(metadata(next(iter(conns.values())), []).controller_id)


def through_each_broker(conns: dict[int, RawConnection], api_key: int, version: int, body: object) -> object:
    """Send the admin request to every broker in turn: the ones that are not the controller must
    answer NOT_CONTROLLER; the controller's answer is returned."""
    controller = controller_of(conns)
    for broker_id, conn in conns.items():
        if broker_id == controller:
            continue
        response = conn.request(api_key, version, body)
        codes = [r.error_code for r in getattr(response, "topics", None) or _results(response)]
        assert codes == [ErrorCode.NOT_CONTROLLER] * len(codes), (broker_id, response)
    return conns[controller].request(api_key, version, body, timeout=TIMEOUT_MS / 1000 + 5)


def _results(response: object) -> list:
    return list(getattr(response, "results", None) or getattr(response, "responses", None) or [])


def probe(
    conns: dict[int, RawConnection],
    expected: dict[str, tuple[int, int]],
    last: dict[tuple[int, str], tuple[int, int]],
) -> list[str]:
    """Probe every broker for ``PROBE_S`` seconds; the old views seen. ``last``: each broker's
    previous answer for a topic in this phase, which an answer must never go back from (views grow
    while a topic is created and grown, and shrink to (0, 0) when it is deleted)."""
    stale: list[str] = []
    deadline = time.monotonic() + PROBE_S
    while time.monotonic() < deadline:
        for broker_id, answers in views(conns, sorted(expected)).items():
            for topic, seen in answers.items():
                wanted = expected[topic]
                if seen != wanted:
                    stale.append(f"broker {broker_id} answered {seen} for {topic}, expected {wanted}")
                previous = last.get((broker_id, topic))
                growing = wanted != (0, 0)
                if previous is not None and (seen < previous if growing else seen > previous):
                    stale.append(f"broker {broker_id} went back from {previous} to {seen} for {topic}")
                last[(broker_id, topic)] = seen
    return stale


def test_every_broker_serves_the_new_metadata_once_the_admin_request_is_answered(
    cluster: LocalCluster, connections: dict[int, RawConnection]
) -> None:
    wait_for(lambda: controller_of(connections) in connections, "a controller")
    # a cluster with some metadata: each broker's refresh reads all of it (as librdkafka's 0045 does)
    background = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=unique("bystander"), num_partitions=4, replication_factor=2, assignments=[], configs=[]
            )
            for _ in range(BACKGROUND_TOPICS)
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    response = connections[controller_of(connections)].request(
        kp.ApiKey.CREATE_TOPICS, 5, background, timeout=60
    )
    assert {t.error_code for t in response.topics} == {0}, response
    stale: list[str] = []
    for _round in range(ROUNDS):
        topics = [unique("converge") for _ in range(TOPICS_PER_REQUEST)]
        last: dict[tuple[int, str], tuple[int, int]] = {}
        create = CreateTopicsRequest(
            topics=[
                CreatableTopic(name=t, num_partitions=3, replication_factor=2, assignments=[], configs=[])
                for t in topics
            ],
            timeout_ms=TIMEOUT_MS,
            validate_only=False,
        )
        response = through_each_broker(connections, kp.ApiKey.CREATE_TOPICS, 5, create)
        assert [t.error_code for t in response.topics] == [0] * len(topics), response
        stale += probe(connections, dict.fromkeys(topics, (3, 3)), last)

        grow = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=t, count=6, assignments=None) for t in topics],
            timeout_ms=TIMEOUT_MS,
            validate_only=False,
        )
        response = through_each_broker(connections, kp.ApiKey.CREATE_PARTITIONS, 2, grow)
        assert [r.error_code for r in response.results] == [0] * len(topics), response
        stale += probe(connections, dict.fromkeys(topics, (6, 6)), last)

        # every other topic is deleted: the rest stay, so the cluster's metadata grows round by round
        doomed = topics[::2]
        delete = DeleteTopicsRequest(topic_names=doomed, timeout_ms=TIMEOUT_MS)
        response = through_each_broker(connections, kp.ApiKey.DELETE_TOPICS, 4, delete)
        assert [r.error_code for r in response.responses] == [0] * len(doomed), response
        stale += probe(connections, dict.fromkeys(doomed, (0, 0)), {})
    assert not stale, f"{len(stale)} old view(s) after the admin answers:\n" + "\n".join(stale[:20])


def test_a_slow_broker_holds_the_answer_until_it_serves_the_new_topic(
    cluster: LocalCluster, connections: dict[int, RawConnection]
) -> None:
    """A broker that cannot follow at once (here: stopped with SIGSTOP, still registered) holds the
    CreateTopics answer back; once it runs again, the answer comes, and no broker, the slow one
    included, answers without the topic after it."""
    controller = wait_for(lambda: controller_of(connections), "a controller")
    slow = next(broker_id for broker_id in connections if broker_id != controller)
    topic = unique("slow")
    create = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=topic, num_partitions=3, replication_factor=3, assignments=[], configs=[])
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    admin = connections[controller]
    header = admin.header(kp.ApiKey.CREATE_TOPICS, 5)
    cluster.broker(slow).pause()
    try:
        admin.send(kp.encode_request(header, create))
        with pytest.raises(TimeoutError):  # no answer while broker `slow` cannot serve the topic
            admin.recv_frame(timeout=1.0)
    finally:
        cluster.broker(slow).resume()
    response = kp.decode_response(header, admin.recv_frame(timeout=TIMEOUT_MS / 1000))[1]
    assert [t.error_code for t in response.topics] == [0], response
    stale = probe(connections, {topic: (3, 3)}, {})
    assert not stale, f"{len(stale)} old view(s) after the answer:\n" + "\n".join(stale[:20])


def test_a_broker_that_does_not_follow_in_time_makes_the_answer_request_timed_out(
    cluster: LocalCluster, connections: dict[int, RawConnection]
) -> None:
    """Past the request's timeout_ms the topic is answered REQUEST_TIMED_OUT (Kafka's error when a
    new topic has no leader in time); the topic is created all the same, and every broker serves it
    once the slow one runs again. A timeout_ms of 0 answers at once (as Kafka does)."""
    controller = wait_for(lambda: controller_of(connections), "a controller")
    slow = next(broker_id for broker_id in connections if broker_id != controller)
    late, unwaited = unique("late"), unique("unwaited")

    def create(topic: str, timeout_ms: int) -> CreateTopicsRequest:
        return CreateTopicsRequest(
            topics=[
                CreatableTopic(name=topic, num_partitions=2, replication_factor=3, assignments=[], configs=[])
            ],
            timeout_ms=timeout_ms,
            validate_only=False,
        )

    cluster.broker(slow).pause()
    try:
        response = connections[controller].request(kp.ApiKey.CREATE_TOPICS, 5, create(late, 1000))
        [result] = response.topics
        assert result.error_code == ErrorCode.REQUEST_TIMED_OUT, result
        assert str(slow) in (result.error_message or ""), result
        response = connections[controller].request(kp.ApiKey.CREATE_TOPICS, 5, create(unwaited, 0))
        assert [t.error_code for t in response.topics] == [0], response
    finally:
        cluster.broker(slow).resume()
    for topic in (late, unwaited):
        wait_for(
            lambda topic=topic: all(v[topic] == (2, 2) for v in views(connections, [topic]).values()),
            f"every broker serving {topic}",
        )


def test_a_delete_of_many_topics_leaves_the_controller_answering_meanwhile(
    cluster: LocalCluster, connections: dict[int, RawConnection]
) -> None:
    """librdkafka's 0045 deletes 100 topics in one request: the controller deletes them off its event
    loop (one metadata refresh for them all), so a Metadata request sent while they are being
    deleted is answered at once, still naming them; the delete then answers every topic done."""
    wait_for(lambda: controller_of(connections) in connections, "a controller")
    controller_id = controller_of(connections)
    controller = connections[controller_id]
    doomed = [unique("many") for _ in range(MANY_TOPICS)]
    create = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=t, num_partitions=4, replication_factor=2, assignments=[], configs=[])
            for t in doomed
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    response = controller.request(kp.ApiKey.CREATE_TOPICS, 5, create, timeout=TIMEOUT_MS / 1000 + 5)
    assert {t.error_code for t in response.topics} == {0}, response

    header = controller.header(kp.ApiKey.DELETE_TOPICS, 4)
    controller.send(kp.encode_request(header, DeleteTopicsRequest(topic_names=doomed, timeout_ms=TIMEOUT_MS)))
    with RawConnection(cluster.brokers[controller_id].bootstrap) as other:
        during = views({0: other}, doomed)[0]
    answer = kp.decode_response(header, controller.recv_frame(timeout=TIMEOUT_MS / 1000 + 5))[1]
    assert [r.error_code for r in answer.responses] == [0] * len(doomed), answer
    still_there = [t for t, seen in during.items() if seen != (0, 0)]
    assert still_there, "the controller answered Metadata only once every topic was deleted"


def test_a_delete_is_answered_though_a_client_auto_creates_the_topic_again(
    cluster: LocalCluster, connections: dict[int, RawConnection]
) -> None:
    """librdkafka's 0033 and 0081 delete a topic that a producer keeps asking Metadata for with
    auto-creation: a broker creates it again right after the deletion, with a new topic id. The
    delete waits for the deleted topic (its id) to be gone from every broker, not for the name:
    it is answered NONE, not REQUEST_TIMED_OUT after the whole timeout."""
    wait_for(lambda: controller_of(connections) in connections, "a controller")
    controller_id = controller_of(connections)
    other_id = next(b for b in connections if b != controller_id)
    topic = unique("recreated")
    create = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=topic, num_partitions=2, replication_factor=2, assignments=[], configs=[])
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    response = connections[controller_id].request(
        kp.ApiKey.CREATE_TOPICS, 5, create, timeout=TIMEOUT_MS / 1000 + 5
    )
    assert [t.error_code for t in response.topics] == [0], response
    old_id = metadata(connections[other_id], [topic]).topics[0].topic_id

    controller = connections[controller_id]
    header = controller.header(kp.ApiKey.DELETE_TOPICS, 4)
    controller.send(kp.encode_request(header, DeleteTopicsRequest(topic_names=[topic], timeout_ms=15_000)))
    recreated = None
    with RawConnection(cluster.brokers[other_id].bootstrap) as producer_like:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # Metadata with auto-creation, as a producer sends it
            answer = metadata(producer_like, [topic], allow_auto_topic_creation=True).topics[0]
            if answer.error_code == ErrorCode.NONE and answer.topic_id != old_id:
                recreated = answer.topic_id
                break
    assert recreated is not None, "the topic was not created again"
    result = kp.decode_response(header, controller.recv_frame(timeout=30))[1]
    assert [(r.name, r.error_code) for r in result.responses] == [(topic, ErrorCode.NONE)], result
