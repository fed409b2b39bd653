"""The collaborators of a group membership, each alone, against an in-memory coordinator: the
heartbeat (``Heartbeat``), commits and committed offsets (``OffsetCommitter``), the join round
(``GroupJoiner``) and what a rebalance does to the assignment (``Rebalancer``). No broker: the
``FakeCoordinator`` stands in for the ``CoordinatorChannel`` and answers with the real protocol
response classes."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.consumer_protocol import Assignment, Subscription
from kctl.client.errors import KafkaConnectionError
from kctl.client.group.assignors import RebalanceProtocol
from kctl.client.group.committer import OffsetCommitter
from kctl.client.group.coordinator import CoordinatorResponse, OffsetAndMetadata
from kctl.client.group.heartbeat import Heartbeat
from kctl.client.group.join import GroupJoiner
from kctl.client.group.member import Member
from kctl.client.group.rebalance import Rebalancer
from kctl.client.group.state import CommitFailedError, GroupMembershipError, JoinResult, MemberState
from kctl.client.group.subscription import TopicSubscription
from kctl.client.group_config import GroupConfig
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.heartbeat import HeartbeatResponse
from kctl.protocol.messages.join_group import JoinGroupResponse
from kctl.protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kctl.protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kctl.protocol.messages.sync_group import SyncGroupResponse

GROUP = "g"
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
Reply = Any  # a response body, an exception to raise, or a callable returning either


@dataclass
class Sent:
    purpose: str
    api_key: int
    version: int
    request: Any


class FakeCoordinator:
    """A ``CoordinatorChannel`` in memory: each request gets the next reply scripted for its API
    (``answer``) and is recorded in ``sent``."""

    VERSIONS: ClassVar[dict[int, int]] = {
        ApiKey.HEARTBEAT: 4,
        ApiKey.OFFSET_COMMIT: 8,
        ApiKey.OFFSET_FETCH: 7,
        ApiKey.JOIN_GROUP: 9,
        ApiKey.SYNC_GROUP: 5,
        ApiKey.LEAVE_GROUP: 5,
    }

    def __init__(self) -> None:
        self.replies: dict[int, list[Reply]] = defaultdict(list)
        self.sent: list[Sent] = []
        self.invalidated = 0
        self.closed_purposes: list[str] = []

    def answer(self, api_key: int, *replies: Reply) -> None:
        self.replies[api_key].extend(replies)

    def requests(self, api_key: int) -> list[Any]:
        return [s.request for s in self.sent if s.api_key == api_key]

    def request(
        self,
        purpose: str,
        api_key: int,
        build: Callable[[int], Any],
        *,
        deadline: Deadline,
        timeout: float | None = None,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> CoordinatorResponse:
        version = self.VERSIONS[api_key]
        self.sent.append(Sent(purpose, api_key, version, build(version)))
        assert self.replies[api_key], f"no reply scripted for API {api_key}"
        reply = self.replies[api_key].pop(0)
        if callable(reply):
            reply = reply()
        if isinstance(reply, BaseException):
            raise reply
        return CoordinatorResponse(version, reply)

    def invalidate(self) -> None:
        self.invalidated += 1

    def close_purpose(self, purpose: str) -> None:
        self.closed_purposes.append(purpose)

    def close(self) -> None:
        pass


@pytest.fixture
def cluster() -> Iterator[ClusterClient]:
    """A cluster client that never connects: the collaborators under test take deadlines and
    retries from it, their requests go to the ``FakeCoordinator``."""
    client = ClusterClient("127.0.0.1:1", retry_backoff_ms=1, retry_backoff_max_ms=5)
    yield client
    client.close()


@pytest.fixture
def coordinator() -> FakeCoordinator:
    return FakeCoordinator()


def config(**overrides: Any) -> GroupConfig:
    settings: dict[str, Any] = {"retry_backoff_ms": 1, "retry_backoff_max_ms": 5, **overrides}
    return GroupConfig.coerce(None, group_id=GROUP, **settings)


def stable_member(*, member_id: str = "m-1", generation: int = 3, subscribed: bool = True) -> Member:
    member = Member(GROUP)
    member.state = MemberState.STABLE
    member.member_id, member.generation_id = member_id, generation
    member.assignment = frozenset({T0, T1})
    member.subscribed = subscribed
    return member


# ----------------------------------------------------------------------------------------- Heartbeat


class Leaves:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, member_id: str, purpose: str, reason: str) -> None:
        self.calls.append((member_id, purpose, reason))


def heartbeat_for(member: Member, coordinator: FakeCoordinator, **overrides: Any) -> tuple[Heartbeat, Leaves]:
    leaves = Leaves()
    return Heartbeat(config(**overrides), coordinator, member, leaves), leaves  # type: ignore[arg-type]


def test_a_member_outside_a_generation_sends_no_heartbeat(coordinator: FakeCoordinator) -> None:
    heartbeat, _ = heartbeat_for(Member(GROUP), coordinator)
    assert heartbeat.beat() is None
    assert coordinator.sent == []


def test_a_heartbeat_carries_the_generation_and_an_ok_answer_changes_nothing(
    coordinator: FakeCoordinator,
) -> None:
    member = stable_member()
    member.group_instance_id = "static-1"
    heartbeat, _ = heartbeat_for(member, coordinator, group_instance_id="static-1")
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=0))
    assert heartbeat.beat() is None
    (request,) = coordinator.requests(ApiKey.HEARTBEAT)
    assert (request.group_id, request.member_id, request.generation_id) == (GROUP, "m-1", 3)
    assert request.group_instance_id == "static-1"
    assert coordinator.sent[0].purpose == "heartbeat"
    assert (member.state, member.rejoin_reason, member.lost_reason) == (MemberState.STABLE, None, None)


def test_rebalance_in_progress_asks_the_member_to_rejoin(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    heartbeat.beat()
    assert member.rebalance_in_progress
    assert member.rejoin_reason == "the group is rebalancing"
    assert (member.member_id, member.generation_id, member.lost_reason) == ("m-1", 3, None)


@pytest.mark.parametrize(
    ("code", "member_id_after"),
    [(ErrorCode.UNKNOWN_MEMBER_ID, ""), (ErrorCode.ILLEGAL_GENERATION, "m-1")],
)
def test_an_expelled_member_loses_its_generation(
    coordinator: FakeCoordinator, code: int, member_id_after: str
) -> None:
    member = stable_member()
    heartbeat, leaves = heartbeat_for(member, coordinator)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=code))
    heartbeat.beat()
    assert (member.member_id, member.generation_id) == (member_id_after, -1)
    assert member.lost_reason is not None and ErrorCode(code).name in member.lost_reason
    assert member.assignment == {T0, T1}, "the partitions are lost at the next poll, not by the heartbeat"
    assert leaves.calls == []


def test_a_coordinator_error_forgets_the_coordinator_and_heartbeats_again_soon(
    coordinator: FakeCoordinator,
) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator, retry_backoff_ms=7)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR))
    assert heartbeat.beat() == pytest.approx(0.007)
    assert coordinator.invalidated == 1
    assert (member.rejoin_reason, member.lost_reason, member.fatal) == (None, None, None)


def test_a_lost_connection_is_retried_soon_without_changing_the_member(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator, retry_backoff_ms=9)
    coordinator.answer(ApiKey.HEARTBEAT, KafkaConnectionError("connection reset"))
    assert heartbeat.beat() == pytest.approx(0.009)
    assert (member.rejoin_reason, member.lost_reason, member.fatal) == (None, None, None)


def test_an_answer_for_an_older_generation_is_ignored(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator)

    def a_join_completes_meanwhile() -> Any:
        with member.lock:
            member.generation_id = 4
        return HeartbeatResponse(error_code=ErrorCode.ILLEGAL_GENERATION)

    coordinator.answer(ApiKey.HEARTBEAT, a_join_completes_meanwhile)
    heartbeat.beat()
    assert (member.generation_id, member.lost_reason) == (4, None)


def test_during_a_join_heartbeats_only_keep_the_session_alive(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    member.state = MemberState.JOINING
    heartbeat, _ = heartbeat_for(member, coordinator)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    heartbeat.beat()
    assert len(coordinator.sent) == 1
    assert (member.rejoin_reason, member.lost_reason) == (None, None)


def test_a_fatal_answer_ends_the_membership(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    heartbeat.beat()
    assert isinstance(member.fatal, GroupMembershipError)
    assert "GROUP_AUTHORIZATION_FAILED" in str(member.fatal) and repr(GROUP) in str(member.fatal)


@pytest.mark.parametrize("static", [False, True])
def test_no_poll_for_max_poll_interval_leaves_the_group(coordinator: FakeCoordinator, static: bool) -> None:
    member = stable_member()
    instance = {"group_instance_id": "static-1"} if static else {}
    heartbeat, leaves = heartbeat_for(member, coordinator, max_poll_interval_ms=20, **instance)
    time.sleep(0.05)
    assert heartbeat.beat() is None
    assert coordinator.sent == [], "no heartbeat once the poll interval passed"
    assert member.lost_reason == "max.poll.interval.ms passed without a poll"
    assert member.generation_id == -1
    if static:  # a static member keeps its id and its place until the session times out
        assert (member.member_id, leaves.calls) == ("m-1", [])
    else:
        assert member.member_id == ""
        assert leaves.calls == [("m-1", "heartbeat", "consumer poll timeout has expired")]


def test_a_poll_restarts_the_max_poll_interval(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, leaves = heartbeat_for(member, coordinator, max_poll_interval_ms=30)
    coordinator.answer(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=0))
    time.sleep(0.06)
    heartbeat.polled()
    heartbeat.beat()
    assert (member.lost_reason, leaves.calls, len(coordinator.sent)) == (None, [], 1)


def test_the_thread_heartbeats_every_interval_until_stopped(coordinator: FakeCoordinator) -> None:
    member = stable_member()
    heartbeat, _ = heartbeat_for(member, coordinator, heartbeat_interval_ms=10)
    coordinator.answer(ApiKey.HEARTBEAT, *[HeartbeatResponse(error_code=0)] * 1000)
    heartbeat.start()
    deadline = time.monotonic() + 10
    while len(coordinator.sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    heartbeat.stop()
    heartbeat.join(timeout=5)
    sent = len(coordinator.sent)
    assert sent >= 3
    assert not any(t.name == f"kctl-group-heartbeat-{GROUP}" and t.is_alive() for t in threading.enumerate())
    time.sleep(0.05)
    assert len(coordinator.sent) == sent


# ----------------------------------------------------------------------------------------- OffsetCommitter


def commit_response(*codes: tuple[TopicPartition, int]) -> OffsetCommitResponse:
    by_topic: dict[str, list[OffsetCommitResponsePartition]] = defaultdict(list)
    for tp, code in codes:
        by_topic[tp.topic].append(
            OffsetCommitResponsePartition(partition_index=tp.partition, error_code=code)
        )
    return OffsetCommitResponse(
        topics=[OffsetCommitResponseTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    )


def committed_offsets(request: Any) -> dict[TopicPartition, int]:
    return {
        TopicPartition(t.name, p.partition_index): p.committed_offset
        for t in request.topics
        for p in t.partitions
    }


def committer_for(
    cluster: ClusterClient,
    coordinator: FakeCoordinator,
    member: Member,
    positions: dict[TopicPartition, int] | None = None,
    reported: list[BaseException] | None = None,
    **overrides: Any,
) -> OffsetCommitter:
    return OffsetCommitter(
        cluster,
        config(**overrides),
        coordinator,  # type: ignore[arg-type]
        member,
        (lambda: dict(positions)) if positions is not None else None,
        report=reported.append if reported is not None else None,
    )


def test_a_member_commits_with_its_generation(cluster: ClusterClient, coordinator: FakeCoordinator) -> None:
    member = stable_member()
    committer = committer_for(cluster, coordinator, member)
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T0, 0), (T1, 0)))
    result = committer.commit({T0: 10, T1: OffsetAndMetadata(20, "meta", 5)})
    assert result == {T0: OffsetAndMetadata(10), T1: OffsetAndMetadata(20, "meta", 5)}
    (request,) = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert (request.group_id, request.member_id, request.generation_id_or_member_epoch) == (GROUP, "m-1", 3)
    assert committed_offsets(request) == {T0: 10, T1: 20}
    assert coordinator.sent[0].purpose == "offsets"


def test_without_a_subscription_commits_go_as_generation_minus_one(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    committer = committer_for(cluster, coordinator, Member(GROUP))
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T0, 0)))
    committer.commit({T0: 7})
    (request,) = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert (request.member_id, request.generation_id_or_member_epoch) == ("", -1)


def test_a_subscribed_member_does_not_commit_during_a_rebalance(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    member.state = MemberState.JOINING
    committer = committer_for(cluster, coordinator, member)
    with pytest.raises(CommitFailedError, match="a rebalance is under way"):
        committer.commit({T0: 1})
    assert coordinator.sent == []


def test_a_commit_refused_for_the_generation_marks_the_member_lost(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    committer = committer_for(cluster, coordinator, member)
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T0, ErrorCode.ILLEGAL_GENERATION)))
    with pytest.raises(CommitFailedError, match="ILLEGAL_GENERATION") as failed:
        committer.commit({T0: 1})
    assert set(failed.value.errors) == {T0}
    assert member.lost_reason == "commit answered ILLEGAL_GENERATION"
    assert member.rejoin_reason == "a commit found the group rebalancing"


def test_retriable_partition_errors_are_retried_for_those_partitions_only(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    committer = committer_for(cluster, coordinator, member)
    coordinator.answer(
        ApiKey.OFFSET_COMMIT,
        commit_response((T0, 0), (T1, ErrorCode.NOT_COORDINATOR)),
        commit_response((T1, 0)),
    )
    assert committer.commit({T0: 1, T1: 2}, timeout=5) == {T1: OffsetAndMetadata(2)}
    first, second = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert committed_offsets(first) == {T0: 1, T1: 2}
    assert committed_offsets(second) == {T1: 2}
    assert coordinator.invalidated == 1


def test_asynchronous_commit_callbacks_run_in_the_thread_that_asks(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    reported: list[BaseException] = []
    committer = committer_for(cluster, coordinator, member, reported=reported)
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T0, 0)), commit_response((T1, 0)))
    calls: list[tuple[dict[TopicPartition, OffsetAndMetadata], BaseException | None, str]] = []

    def record(offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
        calls.append((offsets, error, threading.current_thread().name))

    def broken(offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
        raise ValueError("the application's callback failed")

    futures = [
        committer.commit({T0: 5}, asynchronous=True, callback=record),
        committer.commit({T1: 6}, asynchronous=True, callback=broken),
    ]
    for future in futures:
        future.result(timeout=5)  # type: ignore[union-attr]
    committer.wait_pending(timeout=5)
    assert calls == [], "callbacks wait for the caller"
    committer.run_callbacks()
    assert calls == [({T0: OffsetAndMetadata(5)}, None, threading.current_thread().name)]
    assert [str(e) for e in reported] == ["the application's callback failed"]
    committer.close()


def test_auto_commit_commits_the_positions_when_due_and_not_during_a_rebalance(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    positions = {T0: 3, T1: 4, TopicPartition("elsewhere", 0): 9}
    committer = committer_for(cluster, coordinator, member, positions, auto_commit_interval_ms=0)
    member.request_rejoin("test")
    committer.maybe_auto_commit()
    assert coordinator.sent == []
    member.rejoin_reason = None
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T0, 0), (T1, 0)))
    committer.maybe_auto_commit()
    committer.wait_pending(timeout=5)
    (request,) = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert committed_offsets(request) == {T0: 3, T1: 4}, "only the assigned partitions"
    committer.close()


def test_the_commit_before_revoking_covers_the_partitions_given_up(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = stable_member()
    committer = committer_for(cluster, coordinator, member, {T0: 3, T1: 4})
    coordinator.answer(ApiKey.OFFSET_COMMIT, commit_response((T1, 0)))
    committer.commit_before_revoke([T1])
    (request,) = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert committed_offsets(request) == {T1: 4}
    no_auto_commit = committer_for(cluster, coordinator, member, {T0: 3}, enable_auto_commit=False)
    no_auto_commit.commit_before_revoke()
    assert len(coordinator.sent) == 1


def test_committed_offsets_of_the_assignment(cluster: ClusterClient, coordinator: FakeCoordinator) -> None:
    member = stable_member()
    committer = committer_for(cluster, coordinator, member)
    coordinator.answer(
        ApiKey.OFFSET_FETCH,
        OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(
                    name="orders",
                    partitions=[
                        OffsetFetchResponsePartition(
                            partition_index=0, committed_offset=12, metadata="m", error_code=0
                        ),
                        OffsetFetchResponsePartition(
                            partition_index=1, committed_offset=-1, metadata="", error_code=0
                        ),
                    ],
                )
            ],
            error_code=0,
        ),
    )
    assert committer.committed() == {T0: OffsetAndMetadata(12, "m", -1), T1: None}
    (request,) = coordinator.requests(ApiKey.OFFSET_FETCH)
    assert request.group_id == GROUP
    assert [(t.name, t.partition_indexes) for t in request.topics] == [("orders", [0, 1])]


# ----------------------------------------------------------------------------------------- GroupJoiner


def test_a_follower_joins_with_the_member_id_the_coordinator_asks_for(
    cluster: ClusterClient, coordinator: FakeCoordinator
) -> None:
    member = Member(GROUP)
    joiner = GroupJoiner(cluster, config(), coordinator, member)  # type: ignore[arg-type]
    coordinator.answer(
        ApiKey.JOIN_GROUP,
        JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m-given", generation_id=-1),
        JoinGroupResponse(
            error_code=0, generation_id=5, protocol_name="range", leader="m-leader", member_id="m-given"
        ),
    )
    coordinator.answer(
        ApiKey.SYNC_GROUP, SyncGroupResponse(error_code=0, assignment=Assignment((T1,)).encode())
    )
    result = joiner.join(("orders",), frozenset(), frozenset(), -1, reason="test", cancel=threading.Event())
    assert result == JoinResult(5, "m-given", "range", "m-leader", frozenset({T1}), None)
    first, second = coordinator.requests(ApiKey.JOIN_GROUP)
    assert (first.member_id, second.member_id) == ("", "m-given")
    assert Subscription.decode(first.protocols[0].metadata).topics == ("orders",)
    (sync,) = coordinator.requests(ApiKey.SYNC_GROUP)
    assert (sync.member_id, sync.generation_id, sync.assignments) == ("m-given", 5, [])
    assert (member.member_id, member.generation_id, member.leader_id) == ("m-given", 5, "m-leader")
    assert member.state is MemberState.UNJOINED, "entering the generation is the caller's"


def test_a_fatal_join_error_ends_the_round(cluster: ClusterClient, coordinator: FakeCoordinator) -> None:
    joiner = GroupJoiner(cluster, config(), coordinator, Member(GROUP))  # type: ignore[arg-type]
    coordinator.answer(
        ApiKey.JOIN_GROUP, JoinGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    )
    joiner.start(("orders",), frozenset(), frozenset(), -1, reason=None)
    deadline = time.monotonic() + 10
    while joiner.in_progress and time.monotonic() < deadline:
        try:
            joiner.wait(0.05)
        except GroupMembershipError as error:
            assert "INCONSISTENT_GROUP_PROTOCOL" in str(error)
            break
    else:
        pytest.fail("the join did not fail")
    assert not joiner.in_progress


# ----------------------------------------------------------------------------------------- Rebalancer


class RecordingCommitter:
    """What a ``Rebalancer`` needs of the ``OffsetCommitter``: the commit before revoking."""

    def __init__(self) -> None:
        self.before_revoke: list[frozenset[TopicPartition] | None] = []

    def commit_before_revoke(self, partitions: Any = None) -> None:
        self.before_revoke.append(None if partitions is None else frozenset(partitions))


def rebalancer_for(
    cluster: ClusterClient, member: Member, protocol: RebalanceProtocol, topics: frozenset[str]
) -> tuple[Rebalancer, RecordingCommitter, list[tuple[str, frozenset[TopicPartition]]]]:
    committer = RecordingCommitter()
    subscription = TopicSubscription(cluster, config(), member)
    subscription.topics = topics
    calls: list[tuple[str, frozenset[TopicPartition]]] = []
    rebalancer = Rebalancer(
        member,
        committer,  # type: ignore[arg-type]
        subscription,
        protocol,
        on_assign=lambda p: calls.append(("assign", p)),
        on_revoke=lambda p: calls.append(("revoke", p)),
    )
    return rebalancer, committer, calls


def test_an_eager_member_gives_up_everything_before_joining(cluster: ClusterClient) -> None:
    member = stable_member()
    rebalancer, committer, calls = rebalancer_for(
        cluster, member, RebalanceProtocol.EAGER, frozenset({"orders"})
    )
    assert rebalancer.prepare_join()
    assert member.assignment == frozenset()
    assert member.previous == ({T0, T1}, 3)
    assert committer.before_revoke == [None]
    assert calls == [("revoke", {T0, T1})]


def test_a_cooperative_member_keeps_what_stays_and_rejoins_after_giving_some_up(
    cluster: ClusterClient,
) -> None:
    member = stable_member()
    rebalancer, committer, calls = rebalancer_for(
        cluster, member, RebalanceProtocol.COOPERATIVE, frozenset({"orders"})
    )
    assert not rebalancer.prepare_join(), "the subscription still covers every partition"
    assert member.assignment == {T0, T1}
    t2 = TopicPartition("orders", 2)
    result = JoinResult(4, "m-1", "cooperative-sticky", "m-0", frozenset({T0, t2}), None)
    assert rebalancer.complete_join(result)
    assert (member.state, member.generation_id, member.assignment) == (MemberState.STABLE, 4, {T0, t2})
    assert committer.before_revoke == [{T1}]
    assert calls == [("revoke", {T1}), ("assign", {t2})]
    assert member.rejoin_reason == "partitions were revoked in a cooperative rebalance"


def test_a_lost_membership_loses_the_partitions_without_a_commit(cluster: ClusterClient) -> None:
    member = stable_member()
    member.lost_reason = "heartbeat answered UNKNOWN_MEMBER_ID"
    rebalancer, committer, calls = rebalancer_for(
        cluster, member, RebalanceProtocol.EAGER, frozenset({"orders"})
    )
    assert rebalancer.lose_partitions()
    assert (member.state, member.assignment, member.lost_reason) == (MemberState.UNJOINED, frozenset(), None)
    assert member.rejoin_reason == "lost the membership: heartbeat answered UNKNOWN_MEMBER_ID"
    assert committer.before_revoke == []
    assert calls == [("revoke", {T0, T1})], "on_lost defaults to on_revoke"
