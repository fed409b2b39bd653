"""Committed offsets and group administration against a real `kctl broker start`, with real clients:
offsets committed through confluent-kafka and kafka-python (by group members and by standalone
consumers) read back through both clients' committed() and surviving a clean restart and a kill -9 of
the broker (the coordinator reloads __consumer_offsets); a member that stays up across a broker
restart; OffsetFetch while the coordinator reloads; `kcat -G` resuming after its own commits;
ListGroups / DescribeGroups / DeleteGroups and alter/list group offsets through confluent-kafka's
AdminClient, with consumers resuming exactly at the altered offsets; kafka-python's admin client
(OffsetDelete, removing a static member); static membership (group.instance.id) with both clients."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from group_clients import (
    BROKER_PROPERTIES,
    TIMEOUT,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    ck_committed,
    end_offsets,
    produce,
    stop_all,
    verbose,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.structs import OffsetAndMetadata
from raw_kafka import RawConnection, create_topic, kcat, running_broker, unique

import kctl.protocol as kp
from kctl.localcluster.broker import START_TIMEOUT, BrokerProcess
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kctl.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from kctl.testing import wait_for

pytestmark = pytest.mark.timeout(120)

INVALID = ck.OFFSET_INVALID  # -1001: confluent-kafka's "no committed offset"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "groups-offsets") as process:
        yield process


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for the tests that restart it."""
    process = BrokerProcess(tmp_path / "data", BROKER_PROPERTIES).start()
    yield process
    process.stop()


def new_topic(bootstrap: str, partitions: int) -> str:
    topic = unique("offsets")
    assert create_topic(bootstrap, topic, partitions) == 0
    return topic


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


# ------------------------------------------------------------------------------- commits by clients


def ck_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> None:
    """OffsetCommit through confluent-kafka from a consumer that is not a group member."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.commit(
            offsets=[ck.TopicPartition(topic, p, o, meta) for p, (o, meta) in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()
    assert result is not None and all(tp.error is None for tp in result), result


def kp_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> None:
    """OffsetCommit through kafka-python from a consumer with manually assigned partitions."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in offsets])
        consumer.commit(
            {KpTopicPartition(topic, p): OffsetAndMetadata(o, m, -1) for p, (o, m) in offsets.items()}
        )
    finally:
        consumer.close(autocommit=False)


def kp_committed_metadata(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, tuple[int, str]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        found = {p: consumer.committed(KpTopicPartition(topic, p), metadata=True) for p in range(partitions)}
    finally:
        consumer.close(autocommit=False)
    return {
        p: (v.offset, unterminated(v.metadata)) if v is not None else (INVALID, "") for p, v in found.items()
    }


def unterminated(metadata: str) -> str:
    """confluent-kafka-python 2.16 writes commit metadata with its C string terminator: "ck-a" goes on the
    wire (and into __consumer_offsets) as "ck-a\\0"; compare without it."""
    return metadata[:-1] if metadata.endswith("\0") else metadata


def consume_as_member(member_class: type, bootstrap: str, group: str, topic: str, partitions: int) -> Ledger:
    """One group member consumes everything there is and leaves cleanly (committing as it goes)."""
    ledger = Ledger(topic, partitions)
    ends = end_offsets(bootstrap, topic, partitions)
    member = member_class(f"{member_class.client}-member", ledger, bootstrap, group).start()
    try:
        ledger.wait_consumed({(p, o) for p, end in ends.items() for o in range(end)})
    finally:
        stop_all([member])
    assert not ledger.errors, ledger.errors
    return ledger


# ------------------------------------------------------------------------------------------- restart


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill-9"])
def test_committed_offsets_survive_a_broker_restart(own_broker: BrokerProcess, clean: bool) -> None:
    broker = own_broker
    bootstrap = broker.bootstrap
    partitions = 4
    topic = new_topic(bootstrap, partitions)
    produce(bootstrap, topic, partitions, 40, "r")  # 10 records per partition
    ends = end_offsets(bootstrap, topic, partitions)
    assert ends == dict.fromkeys(range(partitions), 10)

    groups = {name: unique(name) for name in ("ck-member", "kp-member", "ck-standalone", "kp-standalone")}
    consume_as_member(ConfluentMember, bootstrap, groups["ck-member"], topic, partitions)
    consume_as_member(KafkaPythonMember, bootstrap, groups["kp-member"], topic, partitions)
    ck_commit(bootstrap, groups["ck-standalone"], topic, {0: (1, "ck-a"), 1: (2, ""), 3: (7, "ck-b")})
    kp_commit(bootstrap, groups["kp-standalone"], topic, {0: (3, "kp-a"), 2: (5, "kp-b"), 3: (10, "")})
    expected = {
        groups["ck-member"]: {p: (10, "") for p in range(partitions)},
        groups["kp-member"]: {p: (10, "") for p in range(partitions)},
        groups["ck-standalone"]: {0: (1, "ck-a"), 1: (2, ""), 2: (INVALID, ""), 3: (7, "ck-b")},
        groups["kp-standalone"]: {0: (3, "kp-a"), 1: (INVALID, ""), 2: (5, "kp-b"), 3: (10, "")},
    }

    def check(when: str) -> None:
        for group, want in expected.items():
            # offsets through both clients; metadata only through kafka-python: confluent-kafka-python
            # 2.16 reads it as a C string past the end of librdkafka's unterminated copy (the broker's
            # OffsetFetch answer carries it intact, checked with a raw request at v1/5/7/8/9)
            through_ck = ck_committed(bootstrap, group, topic, partitions)
            through_kp = kp_committed_metadata(bootstrap, group, topic, partitions)
            assert through_ck == {p: o for p, (o, _m) in want.items()}, (when, group, through_ck)
            assert through_kp == want, (when, group, through_kp, broker.log_tail())

    check("before the restart")
    broker.restart(clean=clean)
    assert broker.bootstrap == bootstrap
    check(f"after a {'clean' if clean else 'kill -9'} restart")
    listed = wait_for(
        lambda: (found := group_listing(admin(bootstrap))) and set(groups.values()) <= set(found) and found,
        "ListGroups to show the reloaded groups",
        TIMEOUT,
    )
    assert {listed[g].state for g in groups.values()} == {ck.ConsumerGroupState.EMPTY}

    # the reloaded coordinator takes new commits, and they survive the next restart too
    kp_commit(bootstrap, groups["ck-standalone"], topic, {2: (4, "after-restart")})
    ck_commit(bootstrap, groups["kp-standalone"], topic, {0: (9, "")})
    expected[groups["ck-standalone"]][2] = (4, "after-restart")
    expected[groups["kp-standalone"]][0] = (9, "")
    broker.restart(clean=clean)
    check("after the second restart")
    assert broker.running, broker.log_tail()


@pytest.mark.parametrize("kind", ["ck", "kp"])
def test_a_member_keeps_consuming_exactly_once_across_a_broker_kill(
    own_broker: BrokerProcess, kind: str
) -> None:
    """A member stays subscribed while the broker is killed and restarted: the coordinator reloads the
    group (its members, generation and assignment are in __consumer_offsets) and its offsets, so the
    member carries on with its partitions and its heartbeats are accepted (no revocation, no rejoin);
    it consumes the new records and nothing is consumed twice."""
    broker = own_broker
    bootstrap = broker.bootstrap
    partitions = 3
    topic, group = new_topic(bootstrap, partitions), unique(f"across-restart-{kind}")
    produced = produce(bootstrap, topic, partitions, 30, "before")
    ledger = Ledger(topic, partitions)
    member_class = {"ck": ConfluentMember, "kp": KafkaPythonMember}[kind]
    config = {"ck": {"session.timeout.ms": 30000}, "kp": {"session_timeout_ms": 30000}}[kind]
    member = member_class(f"{kind}-survivor", ledger, bootstrap, group, config).start()
    try:
        ledger.wait_consumed(produced)
        ends = end_offsets(bootstrap, topic, partitions)
        wait_for(lambda: ck_committed(bootstrap, group, topic, partitions) == ends, "commits", TIMEOUT)
        owned, revocations = ledger.snapshot(), ledger.revocations[member.name]
        broker.restart(clean=False)
        ledger.note("broker killed and restarted")
        produced |= produce(bootstrap, topic, partitions, 30, "after")
        ledger.wait_consumed(produced, timeout=40)
        assert (ledger.snapshot(), ledger.revocations[member.name]) == (owned, revocations), (
            f"the member lost its partitions over the restart: the coordinator did not restore the "
            f"group\n{ledger.report()}\n{broker.log_tail()}"
        )
    finally:
        stop_all([member])
    verbose(ledger)
    counts = ledger.consumed()
    assert set(counts) == set(produced)
    twice = sorted(k for k, c in counts.items() if c > 1)
    assert not twice, f"consumed twice after the restart: {twice}\n{ledger.report()}\n{broker.log_tail()}"
    assert ck_committed(bootstrap, group, topic, partitions) == end_offsets(bootstrap, topic, partitions)
    # errors the client reported while the broker was down are expected; none may remain unexplained
    # after it came back, which the exactly-once check above covers


def raw_commit(
    conn: RawConnection, group: str, topic: str, offsets: dict[int, int], metadata: str = ""
) -> None:
    """OffsetCommit v8 as a standalone client (generation -1, no member id)."""
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=metadata
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    response = conn.request(kp.ApiKey.OFFSET_COMMIT, 8, body)
    codes = {part.error_code for t in response.topics for part in t.partitions}
    assert codes == {ErrorCode.NONE}, response


def raw_fetch(conn: RawConnection, group: str) -> tuple[int, dict[int, int]]:
    """OffsetFetch v8 of all of a group's offsets: (group error code, partition -> offset)."""
    body = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=None)])
    [answer] = conn.request(kp.ApiKey.OFFSET_FETCH, 8, body).groups
    return answer.error_code, {
        p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions
    }


def test_offset_fetch_during_the_reload_after_a_kill_answers_load_in_progress_never_nothing(
    own_broker: BrokerProcess,
) -> None:
    """After kill -9 the coordinator rebuilds its state from __consumer_offsets (here ~9 MB: it reads
    it in several chunks, answering requests in between); until it has, OffsetFetch must answer
    COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR), never an empty or stale set of offsets, which a
    client would take for "no committed offset"."""
    broker, partitions, rounds = own_broker, 100, 30
    topic, group = new_topic(broker.bootstrap, partitions), unique("reload")
    with RawConnection(broker.bootstrap) as conn:
        wait_for(
            lambda: (
                conn.request(kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group)).error_code == 0
            ),
            "the coordinator",
            TIMEOUT,
        )
        for round_ in range(1, rounds + 1):
            raw_commit(conn, group, topic, dict.fromkeys(range(partitions), round_), "m" * 3000)
        expected = dict.fromkeys(range(partitions), rounds)
        assert raw_fetch(conn, group) == (ErrorCode.NONE, expected)

    def probe() -> list[tuple[int, dict[int, int]]]:
        """Connect as soon as the restarted broker listens, then OffsetFetch until it has the offsets."""
        deadline = time.monotonic() + START_TIMEOUT + TIMEOUT
        while True:
            assert time.monotonic() < deadline, "the broker never accepted a connection"
            try:
                conn = RawConnection(broker.bootstrap)
                break
            except ConnectionRefusedError:
                continue  # not listening yet: try again (bounded by the deadline)
        answers: list[tuple[int, dict[int, int]]] = []
        with conn:
            while not answers or answers[-1][0] != ErrorCode.NONE:
                assert time.monotonic() < deadline, f"no answer with the offsets: {answers[-3:]}"
                answers.append(raw_fetch(conn, group))
        return answers

    broker.kill()
    with ThreadPoolExecutor(1) as pool:
        probing = pool.submit(probe)
        broker.start()
        answers = probing.result(timeout=START_TIMEOUT + TIMEOUT)
    transient = {code for code, _ in answers[:-1]}
    assert transient <= {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}, answers[:5]
    assert answers[-1] == (ErrorCode.NONE, expected), answers[-1]
    assert broker.running, broker.log_tail()


# ------------------------------------------------------------------------------------------- kcat -G


def kcat_group(bootstrap: str, group: str, topic: str) -> list[tuple[int, int, str]]:
    """`kcat -G group topic -e`: consume as a member of ``group`` until every partition is at its end;
    kcat commits (auto-commit, and on close) before it exits."""
    result = kcat(
        bootstrap,
        "-G",
        group,
        topic,
        "-X",
        "auto.offset.reset=earliest",
        "-e",
        "-q",
        "-J",
        timeout=60,
    )
    rows = [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]
    return sorted((r["partition"], r["offset"], r["payload"]) for r in rows)


def test_kcat_group_consumer_resumes_after_its_committed_offsets(broker: BrokerProcess) -> None:
    bootstrap, partitions = broker.bootstrap, 3
    topic, group = new_topic(bootstrap, partitions), unique("kcat-group")
    first = produce(bootstrap, topic, partitions, 30, "first")
    got = kcat_group(bootstrap, group, topic)
    assert got == sorted((p, o, v.decode()) for (p, o), v in first.items())
    assert ck_committed(bootstrap, group, topic, partitions) == end_offsets(bootstrap, topic, partitions)

    second = produce(bootstrap, topic, partitions, 15, "second")
    got = kcat_group(bootstrap, group, topic)
    assert got == sorted((p, o, v.decode()) for (p, o), v in second.items()), "did not resume"

    assert kcat_group(bootstrap, group, topic) == []  # nothing new: nothing consumed
    assert ck_committed(bootstrap, group, topic, partitions) == end_offsets(bootstrap, topic, partitions)


# ------------------------------------------------------------------------------------------- admin


def group_listing(client: AdminClient, **kwargs: Any) -> dict[str, Any]:
    result = client.list_consumer_groups(request_timeout=10, **kwargs).result()
    assert not result.errors, result.errors
    return {g.group_id: g for g in result.valid}


def describe(client: AdminClient, group: str) -> Any:
    return client.describe_consumer_groups([group], request_timeout=10)[group].result()


def test_admin_lists_describes_and_deletes_groups(broker: BrokerProcess) -> None:
    bootstrap, partitions = broker.bootstrap, 4
    topic, group = new_topic(bootstrap, partitions), unique("admin-group")
    client = admin(bootstrap)
    ledger = Ledger(topic, partitions)
    members = [ConfluentMember(f"admin-{i}", ledger, bootstrap, group).start() for i in range(2)]
    try:
        ledger.wait_settled([m.name for m in members])
        produced = produce(bootstrap, topic, partitions, 20, "a")
        ledger.wait_consumed(produced)

        description = wait_for(
            lambda: (d := describe(client, group)).state == ck.ConsumerGroupState.STABLE and d,
            "a Stable group",
            TIMEOUT,
        )
        assert not description.is_simple_consumer_group
        assert description.partition_assignor == "range"
        assert description.coordinator.id == 0 and description.coordinator.port == broker.port
        by_client = {m.client_id: m for m in description.members}
        assert set(by_client) == {"admin-0", "admin-1"}
        owned = ledger.snapshot()
        for member in members:
            described = by_client[member.name]
            assert described.member_id == member.member_id
            assert described.host  # the client's address as the broker saw it
            assert {tp.topic for tp in described.assignment.topic_partitions} == {topic}
            assert {tp.partition for tp in described.assignment.topic_partitions} == owned[member.name]

        listed = group_listing(client)
        assert group in listed, listed
        assert listed[group].state == ck.ConsumerGroupState.STABLE
        assert not listed[group].is_simple_consumer_group
        assert group in group_listing(client, states={ck.ConsumerGroupState.STABLE})
        assert group not in group_listing(client, states={ck.ConsumerGroupState.EMPTY})

        with pytest.raises(ck.KafkaException) as refused:
            client.delete_consumer_groups([group], request_timeout=10)[group].result()
        assert refused.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP, refused.value
    finally:
        stop_all(members)
    assert not ledger.errors, ledger.errors

    description = wait_for(
        lambda: (d := describe(client, group)).state == ck.ConsumerGroupState.EMPTY and d,
        "an Empty group after both members left",
        TIMEOUT,
    )
    assert description.members == []
    assert group_listing(client)[group].state == ck.ConsumerGroupState.EMPTY
    assert group in group_listing(client, states={ck.ConsumerGroupState.EMPTY})
    assert ck_committed(bootstrap, group, topic, partitions) == end_offsets(bootstrap, topic, partitions)

    client.delete_consumer_groups([group], request_timeout=10)[group].result()
    assert group not in group_listing(client)
    assert ck_committed(bootstrap, group, topic, partitions) == dict.fromkeys(range(partitions), INVALID)
    try:
        gone = describe(client, group)
    except ck.KafkaException as error:
        assert error.args[0].code() == ck.KafkaError.GROUP_ID_NOT_FOUND, error
    else:
        assert gone.state == ck.ConsumerGroupState.DEAD and gone.members == [], gone.state
    with pytest.raises(ck.KafkaException) as again:
        client.delete_consumer_groups([group], request_timeout=10)[group].result()
    assert again.value.args[0].code() == ck.KafkaError.GROUP_ID_NOT_FOUND, again.value


def alter_offsets(client: AdminClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    request = ck.ConsumerGroupTopicPartitions(
        group, [ck.TopicPartition(topic, p, o) for p, o in offsets.items()]
    )
    result = client.alter_consumer_group_offsets([request], request_timeout=10)[group].result()
    assert all(tp.error is None for tp in result.topic_partitions), result.topic_partitions
    assert {tp.partition: tp.offset for tp in result.topic_partitions} == offsets


def list_offsets(client: AdminClient, group: str, topic: str | None, partitions: int = 0) -> dict[int, int]:
    wanted = None if topic is None else [ck.TopicPartition(topic, p) for p in range(partitions)]
    request = ck.ConsumerGroupTopicPartitions(group, wanted)
    result = client.list_consumer_group_offsets([request], request_timeout=10)[group].result()
    assert all(tp.error is None for tp in result.topic_partitions), result.topic_partitions
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_altered_group_offsets_are_listed_and_consumers_resume_exactly_there(broker: BrokerProcess) -> None:
    """What `kctl group rewind` builds on: AlterConsumerGroupOffsets, ListConsumerGroupOffsets, and a
    member (confluent-kafka, then kafka-python) starting exactly at the altered offsets."""
    bootstrap, partitions = broker.bootstrap, 3
    topic, group = new_topic(bootstrap, partitions), unique("rewind")
    client = admin(bootstrap)
    produced = produce(bootstrap, topic, partitions, 60, "r")  # 20 per partition
    values = dict(produced)

    for member_class, offsets in (
        (ConfluentMember, {0: 5, 1: 0, 2: 17}),
        (KafkaPythonMember, {0: 19, 1: 12, 2: 2}),
    ):
        alter_offsets(client, group, topic, offsets)
        assert list_offsets(client, group, topic, partitions) == offsets
        assert list_offsets(client, group, None) == offsets  # all of the group's offsets
        assert ck_committed(bootstrap, group, topic, partitions) == offsets

        ledger = Ledger(topic, partitions)
        expected = {(p, o) for p, start in offsets.items() for o in range(start, 20)}
        member = member_class(f"rewind-{member_class.client}", ledger, bootstrap, group).start()
        try:
            ledger.wait_consumed(expected)
            if member_class is ConfluentMember:
                # an admin commit to a group with an active member is refused (UNKNOWN_MEMBER_ID)
                request = ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, 0, 1)])
                refused = client.alter_consumer_group_offsets([request], request_timeout=10)[group].result()
                [tp] = refused.topic_partitions
                assert tp.error is not None and tp.error.code() == ck.KafkaError.UNKNOWN_MEMBER_ID, tp
        finally:
            stop_all([member])
        assert not ledger.errors, ledger.errors
        counts = ledger.consumed()
        assert set(counts) == expected, sorted(set(counts) ^ expected)[:10]
        assert max(counts.values()) == 1
        assert all(ledger.values()[k] == values[k] for k in expected)
        assert list_offsets(client, group, topic, partitions) == dict.fromkeys(range(partitions), 20)


def test_kafka_python_admin_describes_deletes_offsets_and_removes_a_static_member(
    broker: BrokerProcess,
) -> None:
    """kafka-python's KafkaAdminClient against a group of two static confluent-kafka members:
    ListGroups / DescribeGroups (members with decoded assignments), OffsetDelete (refused with
    GROUP_SUBSCRIBED_TO_TOPIC for the topic the members read, done for another topic), and removing a
    static member that went away by its group.instance.id (LeaveGroup v3+ from an admin): its
    partitions move at once instead of after its 30 s session timeout."""
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove
    from kafka.errors import GroupSubscribedToTopicError, NoError, UnknownMemberIdError

    bootstrap, partitions = broker.bootstrap, 4
    topic, other, group = new_topic(bootstrap, partitions), new_topic(bootstrap, 2), unique("kp-admin")
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    ledger = Ledger(topic, partitions)
    members: list[ConfluentMember] = []
    try:
        alter_offsets(admin(bootstrap), group, other, {0: 1, 1: 2})  # while the group is empty
        config = {"session.timeout.ms": 30000}
        for name in ("kp-admin-0", "kp-admin-1"):
            members.append(
                ConfluentMember(name, ledger, bootstrap, group, {**config, "group.instance.id": name}).start()
            )
        ledger.wait_settled([m.name for m in members])

        listed = wait_for(
            lambda: next(
                (g for g in client.list_groups() if g["group_id"] == group and g["group_state"] == "Stable"),
                None,
            ),
            "ListGroups to show the Stable group",
            TIMEOUT,
        )
        assert listed["protocol_type"] == "consumer", listed
        described = client.describe_groups([group])[group]
        assert described["error"] is None and described["group_state"] == "Stable", described
        assert described["protocol_type"] == "consumer" and described["protocol_data"] == "range"
        owned = ledger.snapshot()
        by_instance = {m["group_instance_id"]: m for m in described["members"]}
        assert set(by_instance) == {"kp-admin-0", "kp-admin-1"}, described
        for name, member in by_instance.items():
            assert member["client_id"] == name and member["member_metadata"]["topics"] == [topic]
            [assigned] = member["member_assignment"]["assigned_partitions"]
            assert assigned["topic"] == topic and set(assigned["partitions"]) == owned[name], (member, owned)

        refused = client.delete_group_offsets(group, [KpTopicPartition(topic, 0)])
        assert refused == {KpTopicPartition(topic, 0): GroupSubscribedToTopicError}, refused
        deleted = client.delete_group_offsets(group, [KpTopicPartition(other, 0)])
        assert deleted == {KpTopicPartition(other, 0): NoError}, deleted
        assert list_offsets(admin(bootstrap), group, other, 2) == {0: INVALID, 1: 2}

        gone = members.pop()  # a static member closes without leaving the group
        gone.stop()
        removed_at = time.monotonic()
        removal = client.remove_group_members(group, [MemberToRemove(group_instance_id=gone.name)])
        assert list(removal.values()) == [NoError], removal
        moved = ledger.wait_settled([members[0].name])
        assert moved - removed_at < 10, "the removed member's partitions waited for its session timeout"
        again = client.remove_group_members(group, [MemberToRemove(group_instance_id=gone.name)])
        assert list(again.values()) == [UnknownMemberIdError], again
    finally:
        stop_all(members)
        client.close()
    assert not ledger.errors, ledger.errors
    assert not ledger.violations, ledger.violations


# ------------------------------------------------------------------------------------------- static


@pytest.mark.parametrize("kind", ["ck", "kp"])
def test_static_members_get_their_partitions_back_without_a_rebalance(
    broker: BrokerProcess, kind: str
) -> None:
    """Members with group.instance.id: one restarting within the session timeout (a follower, then
    the leader) gets exactly its partitions back and nobody else is revoked; one that stays away
    loses its partitions once the session times out."""
    bootstrap, partitions, session_ms = broker.bootstrap, 6, 5000
    topic, group = new_topic(bootstrap, partitions), unique(f"static-{kind}")
    ledger = Ledger(topic, partitions)

    def static(name: str) -> ConfluentMember | KafkaPythonMember:
        if kind == "ck":
            config = {
                "group.instance.id": name,
                "session.timeout.ms": session_ms,
                "heartbeat.interval.ms": 500,
            }
            return ConfluentMember(name, ledger, bootstrap, group, config).start()
        config = {"group_instance_id": name, "session_timeout_ms": session_ms, "heartbeat_interval_ms": 500}
        return KafkaPythonMember(name, ledger, bootstrap, group, config).start()

    names = [f"static-{kind}-{i}" for i in range(3)]
    members = {names[0]: static(names[0])}
    ledger.wait_settled(names[:1])  # the first member becomes the leader
    members |= {n: static(n) for n in names[1:]}
    produced: dict[tuple[int, int], bytes] = {}
    try:
        ledger.wait_settled(names)
        produced |= produce(bootstrap, topic, partitions, 30, "one")
        ledger.wait_consumed(produced)

        for name in (names[2], names[0]):  # a follower, then the leader
            before = ledger.snapshot()
            revocations = dict(ledger.revocations)
            members[name].stop()  # a static member does not leave the group on close
            restarted = time.monotonic()
            members[name] = static(name)
            back = ledger.wait(
                lambda n=name, b=before: ledger.owned.get(n) == b[n],
                TIMEOUT,
                f"{name} to get its partitions back",
            )
            assert back - restarted < session_ms / 1000, "it waited for the session timeout"
            others = [n for n in names if n != name]
            assert {n: ledger.revocations[n] for n in others} == {n: revocations.get(n, 0) for n in others}, (
                f"restarting static member {name} revoked the others\n{ledger.report()}"
            )
            assert ledger.snapshot() == before
            produced |= produce(bootstrap, topic, partitions, 30, f"after-{name}")
            ledger.wait_consumed(produced)

        # a static member that does not come back loses its partitions after the session timeout
        gone = names[1]
        members[gone].stop()
        stopped = time.monotonic()
        moved = ledger.wait_settled([names[0], names[2]], timeout=session_ms / 1000 + 15)
        assert moved - stopped >= (session_ms - 500) / 1000 - 0.25, (
            f"a static member's partitions moved {moved - stopped:.2f}s after it closed, before its "
            f"session timed out\n{ledger.report()}"
        )
        produced |= produce(bootstrap, topic, partitions, 30, "two-left")
        ledger.wait_consumed(produced)
    finally:
        stop_all(members.values())
    verbose(ledger)
    assert not ledger.errors, f"{ledger.errors}\n{ledger.report()}"
    assert not ledger.violations, f"{ledger.violations}\n{ledger.report()}"
    counts = ledger.consumed()
    assert set(counts) == set(produced)
    assert max(counts.values()) == 1, sorted(k for k, c in counts.items() if c > 1)
