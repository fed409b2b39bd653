"""Edge cases of the classic group protocol over a real `kctl broker start`: requests framed with
kctl.protocol over a raw socket (JoinGroup v5's MEMBER_ID_REQUIRED round trip, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL for a foreign protocol type or
an assignor nobody shares, a full two-member rebalance with commits during it, the rebalance timeout,
a member waiting in JoinGroup beyond its session, static-member fencing and a static leader's
rejoin), and the same INCONSISTENT_GROUP_PROTOCOL as the real clients (confluent-kafka, kafka-python)
report it."""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

import confluent_kafka as ck
import pytest
from group_clients import BROKER_PROPERTIES
from kafka import KafkaConsumer
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import InconsistentGroupProtocolError
from raw_kafka import RawConnection, assert_broker_healthy, create_topic, running_broker, unique

import kctl.protocol as kp
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.heartbeat import HeartbeatRequest
from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kctl.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kctl.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kctl.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from kctl.testing import BrokerProcess, wait_for

pytestmark = pytest.mark.timeout(120)

MIN_SESSION_MS = int(BROKER_PROPERTIES["group.min.session.timeout.ms"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "groups-protocol") as process:
        yield process


# ------------------------------------------------------------------------------------------- encoding


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def subscription(*topics: str) -> bytes:
    """Consumer protocol subscription v0: version, topics, user data (empty)."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">i", 0)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """Consumer protocol assignment v0: version, [(topic, [partition])], user data (empty)."""
    body = struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", len(partitions))
    return body + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", 0)


class Member:
    """One group member speaking the protocol over its own raw connection."""

    def __init__(self, broker: BrokerProcess, group: str, *, instance_id: str | None = None) -> None:
        self.conn = RawConnection(broker.bootstrap, client_id="raw-member")
        self.group = group
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1
        self.find_coordinator()

    def find_coordinator(self) -> None:
        """FindCoordinator (which creates __consumer_offsets on first use) until this broker answers for
        the group, then until it has loaded the group's partition (a heartbeat of nobody gets
        UNKNOWN_MEMBER_ID instead of COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR)."""

        def found() -> bool:
            response = self.conn.request(
                kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=self.group)
            )
            return response.error_code == ErrorCode.NONE and response.port == self.conn.sock.getpeername()[1]

        wait_for(found, f"the coordinator of {self.group}", 10)
        wait_for(
            lambda: (
                self.heartbeat(generation=-1, member_id="probe", static=False) == ErrorCode.UNKNOWN_MEMBER_ID
            ),
            "the coordinator to load the group's partition",
            10,
        )

    def close(self) -> None:
        self.conn.close()

    def join(
        self,
        *,
        version: int = 5,
        member_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: tuple[str, ...] = ("range",),
        topic: str = "t",
        session_ms: int = 10000,
        rebalance_ms: int = 10000,
    ) -> Any:
        body = JoinGroupRequest(
            group_id=self.group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id,
            protocol_type=protocol_type,
            protocols=[
                JoinGroupRequestProtocol(name=name, metadata=subscription(topic)) for name in protocols
            ],
        )
        response = self.conn.request(kp.ApiKey.JOIN_GROUP, version, body)
        if response.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            self.member_id = response.member_id
        if response.error_code == ErrorCode.NONE:
            self.generation = response.generation_id
        return response

    def join_with_member_id(self, **kwargs: Any) -> Any:
        """JoinGroup v5 the way modern clients do it: the first attempt is answered MEMBER_ID_REQUIRED."""
        first = self.join(member_id="", **kwargs)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        return self.join(**kwargs)

    def sync(
        self,
        assignments: dict[str, bytes] | None = None,
        *,
        generation: int | None = None,
        version: int = 5,
        protocol_name: str | None = "range",
    ) -> Any:
        body = SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=protocol_name,
            assignments=[
                SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()
            ],
        )
        return self.conn.request(kp.ApiKey.SYNC_GROUP, version, body)

    def heartbeat(
        self, *, generation: int | None = None, member_id: str | None = None, static: bool = True
    ) -> int:
        body = HeartbeatRequest(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id if static else None,
        )
        return self.conn.request(kp.ApiKey.HEARTBEAT, 4, body).error_code

    def commit(
        self, topic: str, offset: int, *, generation: int | None = None, member_id: str | None = None
    ) -> int:
        body = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=offset, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        response = self.conn.request(kp.ApiKey.OFFSET_COMMIT, 8, body)
        [topic_response] = response.topics
        [partition] = topic_response.partitions
        return partition.error_code

    def leave(self) -> int:
        body = LeaveGroupRequest(
            group_id=self.group,
            members=[MemberIdentity(member_id=self.member_id, group_instance_id=self.instance_id)],
        )
        response = self.conn.request(kp.ApiKey.LEAVE_GROUP, 4, body)
        assert response.error_code == ErrorCode.NONE, response
        [member] = response.members
        return member.error_code


@pytest.fixture
def members(broker: BrokerProcess) -> Iterator[list[Member]]:
    """Members a test opens (append to the list); their connections are closed at teardown."""
    opened: list[Member] = []
    yield opened
    for member in opened:
        member.close()
    assert_broker_healthy(broker)


def new_member(broker: BrokerProcess, members: list[Member], group: str, **kwargs: Any) -> Member:
    member = Member(broker, group, **kwargs)
    members.append(member)
    return member


# ------------------------------------------------------------------------------------------- raw tests


def test_join_v5_requires_a_member_id_then_the_rejoin_succeeds(
    broker: BrokerProcess, members: list[Member]
) -> None:
    topic = unique("proto")
    assert create_topic(broker.bootstrap, topic, 1) == 0
    member = new_member(broker, members, unique("group"))

    first = member.join(member_id="", topic=topic)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED == 79, first
    assert first.member_id, "MEMBER_ID_REQUIRED must hand out the member id to rejoin with"
    assert first.generation_id == -1

    joined = member.join(topic=topic)
    assert joined.error_code == ErrorCode.NONE, joined
    assert joined.member_id == first.member_id
    assert joined.generation_id == 1
    assert joined.protocol_name == "range"
    assert joined.leader == joined.member_id
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [
        (joined.member_id, subscription(topic))
    ]

    mine = assignment(topic, [0])
    synced = member.sync({member.member_id: mine})
    assert synced.error_code == ErrorCode.NONE, synced
    assert bytes(synced.assignment) == mine
    assert synced.protocol_type == "consumer" and synced.protocol_name == "range"

    assert member.heartbeat() == ErrorCode.NONE
    assert member.heartbeat(generation=2) == ErrorCode.ILLEGAL_GENERATION
    assert member.heartbeat(generation=0) == ErrorCode.ILLEGAL_GENERATION
    assert member.heartbeat(member_id="nobody-" + first.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
    assert member.sync({}, generation=7).error_code == ErrorCode.ILLEGAL_GENERATION
    # a SyncGroup (v5) naming a protocol other than the group's
    assert member.sync({}, protocol_name="roundrobin").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    assert member.commit(topic, 1) == ErrorCode.NONE
    assert member.commit(topic, 1, generation=5) == ErrorCode.ILLEGAL_GENERATION
    assert member.commit(topic, 1, member_id="nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    assert member.heartbeat() == ErrorCode.NONE  # none of that disturbed the member

    # an unknown member id cannot join an existing group
    stranger = new_member(broker, members, member.group)
    assert stranger.join(member_id="made-up-id", topic=topic).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    assert member.leave() == ErrorCode.NONE
    assert member.heartbeat() == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_before_v4_gets_its_member_id_and_generation_at_once(
    broker: BrokerProcess, members: list[Member]
) -> None:
    member = new_member(broker, members, unique("group"))
    joined = member.join(version=3, member_id="")
    assert joined.error_code == ErrorCode.NONE, joined
    assert joined.member_id and joined.generation_id == 1 and joined.leader == joined.member_id
    assert member.sync({member.member_id: b""}, version=2).error_code == ErrorCode.NONE
    assert member.heartbeat() == ErrorCode.NONE


@pytest.mark.parametrize("session_ms", [MIN_SESSION_MS - 1, 1_800_001])
def test_a_session_timeout_outside_the_broker_range_is_refused(
    broker: BrokerProcess, members: list[Member], session_ms: int
) -> None:
    member = new_member(broker, members, unique("group"))
    response = member.join(member_id="", session_ms=session_ms)
    assert response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT, response


def test_foreign_protocols_are_refused_and_a_shared_one_rebalances_both_members(
    broker: BrokerProcess, members: list[Member]
) -> None:
    """A member of protocol type "connect", or offering only an assignor no member supports, gets
    INCONSISTENT_GROUP_PROTOCOL; one that shares "range" joins, which makes the first member rejoin
    (REBALANCE_IN_PROGRESS on its heartbeat) into generation 2, with the leader assigning both."""
    topic, group = unique("proto"), unique("group")
    assert create_topic(broker.bootstrap, topic, 2) == 0
    first = new_member(broker, members, group)
    assert first.join_with_member_id(topic=topic, protocols=("range",)).generation_id == 1
    assert first.sync({first.member_id: assignment(topic, [0, 1])}).error_code == ErrorCode.NONE

    connect = new_member(broker, members, group)
    refused = connect.join(member_id="", protocol_type="connect", protocols=("range",), topic=topic)
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, refused
    other = new_member(broker, members, group)
    refused = other.join(member_id="", protocols=("roundrobin", "sticky"), topic=topic)
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, refused
    assert first.heartbeat() == ErrorCode.NONE  # the refused members changed nothing

    second = new_member(broker, members, group)
    assert second.join(member_id="", protocols=("roundrobin", "range"), topic=topic).error_code == (
        ErrorCode.MEMBER_ID_REQUIRED
    )
    with ThreadPoolExecutor(2) as pool:
        second_join = pool.submit(second.join, protocols=("roundrobin", "range"), topic=topic)
        wait_for(lambda: first.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS", 10)
        # what a client does in its revoke callback: commit with the generation it still has
        assert first.commit(topic, 3) == ErrorCode.NONE
        rejoined = first.join(topic=topic, protocols=("range",))
        joined = second_join.result(timeout=15)
        assert rejoined.error_code == joined.error_code == ErrorCode.NONE, (rejoined, joined)
        assert rejoined.generation_id == joined.generation_id == 2
        assert rejoined.protocol_name == joined.protocol_name == "range"
        assert rejoined.leader == joined.leader == first.member_id  # the leader stays the leader
        assert sorted(m.member_id for m in rejoined.members) == sorted([first.member_id, second.member_id])
        assert joined.members == []  # only the leader gets the member list

        assert first.heartbeat(generation=1) == ErrorCode.ILLEGAL_GENERATION
        # between JoinGroup and the leader's SyncGroup (CompletingRebalance) commits must wait
        assert first.commit(topic, 4) == ErrorCode.REBALANCE_IN_PROGRESS
        follower_sync = pool.submit(second.sync)  # waits for the leader's assignment
        leader_sync = first.sync(
            {first.member_id: assignment(topic, [0]), second.member_id: assignment(topic, [1])}
        )
        assert leader_sync.error_code == ErrorCode.NONE and bytes(leader_sync.assignment) == assignment(
            topic, [0]
        )
        synced = follower_sync.result(timeout=15)
        assert synced.error_code == ErrorCode.NONE and bytes(synced.assignment) == assignment(topic, [1])
    assert first.heartbeat() == second.heartbeat() == ErrorCode.NONE
    assert second.commit(topic, 5) == ErrorCode.NONE
    assert first.commit(topic, 6, generation=1) == ErrorCode.ILLEGAL_GENERATION


def test_a_static_member_rejoining_with_its_instance_id_fences_the_old_incarnation(
    broker: BrokerProcess, members: list[Member]
) -> None:
    group = unique("group")
    old = new_member(broker, members, group, instance_id="instance-1")
    joined = old.join(member_id="")  # static members get no MEMBER_ID_REQUIRED round trip
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1, joined
    assert old.sync({old.member_id: b"mine"}).error_code == ErrorCode.NONE

    new = new_member(broker, members, group, instance_id="instance-1")
    replaced = new.join(member_id="")
    assert replaced.error_code == ErrorCode.NONE, replaced
    assert replaced.member_id != old.member_id
    assert replaced.generation_id == 1, "a known static member rejoining must not start a rebalance"
    synced = new.sync()
    assert synced.error_code == ErrorCode.NONE and bytes(synced.assignment) == b"mine"

    assert old.heartbeat() == ErrorCode.FENCED_INSTANCE_ID
    assert new.heartbeat() == ErrorCode.NONE


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(
    broker: BrokerProcess, members: list[Member]
) -> None:
    """The first member keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins: the rebalance
    completes without it once the rebalance timeout has passed, and it is no longer a member."""
    rebalance_ms = 1500
    group = unique("group")
    stale = new_member(broker, members, group)
    assert stale.join_with_member_id(rebalance_ms=rebalance_ms).generation_id == 1
    assert stale.sync({stale.member_id: b"a"}).error_code == ErrorCode.NONE
    fresh = new_member(broker, members, group)
    assert fresh.join(member_id="", rebalance_ms=rebalance_ms).error_code == ErrorCode.MEMBER_ID_REQUIRED
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        joining = pool.submit(fresh.join, rebalance_ms=rebalance_ms)
        codes: list[int] = []
        while not joining.done():
            assert time.monotonic() - started < 15, "the rebalance never completed"
            codes.append(stale.heartbeat())
            if codes[-1] == ErrorCode.UNKNOWN_MEMBER_ID:  # removed: the join completes now
                break
        joined = joining.result(timeout=15)
        elapsed = time.monotonic() - started
    while codes and codes[-1] == ErrorCode.UNKNOWN_MEMBER_ID:
        codes.pop()
    assert set(codes) <= {ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS}, codes
    assert ErrorCode.REBALANCE_IN_PROGRESS in codes
    assert joined.error_code == ErrorCode.NONE, joined
    assert elapsed >= rebalance_ms / 1000 - 0.2, (
        f"completed after {elapsed:.2f}s, before the rebalance timeout"
    )
    assert joined.generation_id == 2 and joined.leader == fresh.member_id
    assert [m.member_id for m in joined.members] == [fresh.member_id]
    assert stale.heartbeat() == ErrorCode.UNKNOWN_MEMBER_ID
    assert fresh.sync({fresh.member_id: b"b"}).error_code == ErrorCode.NONE
    assert fresh.heartbeat() == ErrorCode.NONE


def test_a_member_waiting_in_join_group_longer_than_its_session_is_not_expired(
    broker: BrokerProcess, members: list[Member]
) -> None:
    """A new member's JoinGroup waits for the old member to rejoin, longer than the new member's
    session timeout (it cannot heartbeat meanwhile): it must still be in the group when the
    rebalance completes, not expired while it waited."""
    session_ms, rebalance_ms = 1500, 10000
    group = unique("group")
    old = new_member(broker, members, group)
    assert old.join_with_member_id(session_ms=session_ms, rebalance_ms=rebalance_ms).generation_id == 1
    assert old.sync({old.member_id: b"a"}).error_code == ErrorCode.NONE
    new = new_member(broker, members, group)
    first = new.join(member_id="", session_ms=session_ms, rebalance_ms=rebalance_ms)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    with ThreadPoolExecutor(1) as pool:
        joining = pool.submit(new.join, session_ms=session_ms, rebalance_ms=rebalance_ms)
        started = time.monotonic()
        wait_for(lambda: old.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS, "a rebalance", 10)
        # the old member stays alive (heartbeats) but takes twice the new member's session to rejoin
        while time.monotonic() - started < 2 * session_ms / 1000:
            assert old.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
            with contextlib.suppress(FuturesTimeout):
                early = joining.result(timeout=0.25)
                pytest.fail(
                    f"the waiting member's JoinGroup returned before the rebalance completed: {early}"
                )
        rejoined = old.join(session_ms=session_ms, rebalance_ms=rebalance_ms)
        joined = joining.result(timeout=15)
    assert joined.error_code == ErrorCode.NONE, f"the member waiting in JoinGroup was dropped: {joined}"
    assert rejoined.error_code == ErrorCode.NONE and rejoined.generation_id == joined.generation_id == 2
    assert sorted(m.member_id for m in rejoined.members) == sorted([old.member_id, new.member_id])


@pytest.mark.parametrize("version", [5, 9])
def test_a_static_leader_rejoining_is_not_asked_to_assign_without_the_member_list(
    broker: BrokerProcess, members: list[Member], version: int
) -> None:
    """The leader of a Stable group restarts with the same group.instance.id: it gets its assignment
    back without a rebalance. A JoinGroup answer naming the receiver as leader must either list the
    members (so it can assign) or say skip_assignment (v9); Kafka answers v5-v8 with the previous
    leader id (the receiver is then a follower) and v9 with the members and skip_assignment=true."""
    group = unique("group")
    leader = new_member(broker, members, group, instance_id="lead")
    assert leader.join(member_id="").generation_id == 1
    assert leader.sync({leader.member_id: b"one"}).error_code == ErrorCode.NONE
    follower = new_member(broker, members, group, instance_id="follow")
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(follower.join, member_id="")
        wait_for(lambda: leader.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS, "a rebalance", 10)
        rejoined = leader.join()
        assert following.result(timeout=15).generation_id == rejoined.generation_id == 2
        assert rejoined.leader == leader.member_id
        synced = pool.submit(follower.sync)
        assert leader.sync({leader.member_id: b"lead's", follower.member_id: b"follower's"}).error_code == 0
        assert bytes(synced.result(timeout=15).assignment) == b"follower's"

    restarted = new_member(broker, members, group, instance_id="lead")
    answer = restarted.join(member_id="", version=version)
    assert answer.error_code == ErrorCode.NONE, answer
    assert answer.generation_id == 2, "a static member rejoining a Stable group must not start a rebalance"
    if answer.leader == answer.member_id and not answer.skip_assignment:
        assert sorted(m.member_id for m in answer.members) == sorted(
            [answer.member_id, follower.member_id]
        ), (
            f"JoinGroup v{version} tells the restarted static leader it is the leader, without "
            f"skip_assignment, but lists members {[m.member_id for m in answer.members]}: it would "
            f"compute an assignment for nobody\n{answer}"
        )
    synced = restarted.sync()
    assert synced.error_code == ErrorCode.NONE and bytes(synced.assignment) == b"lead's"
    assert follower.heartbeat() == ErrorCode.NONE
    assert leader.heartbeat() == ErrorCode.FENCED_INSTANCE_ID


# ------------------------------------------------------------------------------------------- clients


def test_clients_offering_no_shared_assignor_get_inconsistent_group_protocol(broker: BrokerProcess) -> None:
    topic, group = unique("proto"), unique("group")
    assert create_topic(broker.bootstrap, topic, 2) == 0
    base = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    assigned: list[Any] = []
    owner = ck.Consumer({**base, "partition.assignment.strategy": "range"})
    owner.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    intruder = ck.Consumer({**base, "partition.assignment.strategy": "cooperative-sticky"})
    try:
        deadline = time.monotonic() + 15
        while len(assigned) < 2:
            assert time.monotonic() < deadline, "the first member never got its partitions"
            owner.poll(0.05)

        intruder.subscribe([topic])
        error = None
        while error is None:
            assert time.monotonic() < deadline + 15, "confluent-kafka reported no error"
            message = intruder.poll(0.1)
            owner.poll(0)
            if message is not None and message.error() is not None:
                error = message.error()
        assert error.code() == ck.KafkaError.INCONSISTENT_GROUP_PROTOCOL, error

        kp_intruder = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
        )
        try:
            kp_intruder.subscribe([topic])
            with pytest.raises(InconsistentGroupProtocolError):
                poll_deadline = time.monotonic() + 15
                while time.monotonic() < poll_deadline:
                    kp_intruder.poll(timeout_ms=200)
                    owner.poll(0)
        finally:
            kp_intruder.close(autocommit=False)
        assert {tp.partition for tp in owner.assignment()} == {0, 1}, "the intruders disturbed the owner"
    finally:
        intruder.close()
        owner.close()
    assert_broker_healthy(broker)
