"""kctl.client.admin.log_dir_moves without a broker: planning the moves of a topic's replicas between
one broker's log dirs, starting them and waiting for them (no real time passes). The same against a
running broker: tests/test_log_dir_moves.py and tests/test_cli_broker_log_dirs.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from kctl.client import TopicPartition
from kctl.client.admin import LogDirDescription, ReplicaLogInfo
from kctl.client.admin.log_dir_moves import (
    IN_PLACE,
    MOVED,
    MOVING,
    PLANNED,
    LogDirMoveError,
    plan_log_dir_moves,
    start_log_dir_moves,
    wait_for_log_dir_moves,
)
from kctl.protocol import ErrorCode

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def dirs(a: Iterable[Any], b: Iterable[Any] = ()) -> list[LogDirDescription]:
    return [
        LogDirDescription(broker_id=1, path="/a", replicas=tuple(a)),
        LogDirDescription(broker_id=1, path="/b", replicas=tuple(b)),
    ]


class FakeAdmin:
    """Broker 1 with log dirs /a and /b; ``states`` are what DescribeLogDirs answers, one per call
    (the last one repeated)."""

    def __init__(self, *states: list[LogDirDescription], refuse: Mapping[TopicPartition, int] | None = None):
        self.states = list(states)
        self.refuse = dict(refuse or {})
        self.altered: list[tuple[int, dict[TopicPartition, str]]] = []
        self.described = 0

    def describe_cluster(self) -> Any:
        return SimpleNamespace(brokers=[SimpleNamespace(node_id=b) for b in (2, 1)])

    def describe_log_dirs(self, brokers: list[int]) -> dict[int, list[LogDirDescription]]:
        [broker] = brokers
        state = self.states[min(self.described, len(self.states) - 1)]
        self.described += 1
        return {broker: state}

    def alter_replica_log_dirs(
        self, broker: int, moves: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, int]:
        self.altered.append((broker, dict(moves)))
        return {tp: self.refuse.get(tp, 0) for tp in moves}


STARTING = dirs([ReplicaLogInfo(T0, 10), ReplicaLogInfo(T1, 10)], [ReplicaLogInfo(T2, 10)])


def test_the_plan_moves_what_is_not_there_yet() -> None:
    plan = plan_log_dir_moves(FakeAdmin(STARTING), 1, "t", "/b")  # type: ignore[arg-type]
    assert plan.wanted == [T0, T1, T2]
    assert plan.current == {T0: "/a", T1: "/a", T2: "/b"}
    assert plan.status == {T0: PLANNED, T1: PLANNED, T2: IN_PLACE}
    assert plan.moving == [T0, T1] and not plan.in_progress and plan.refused == []
    only = plan_log_dir_moves(FakeAdmin(STARTING), 1, "t", "/b", [1])  # type: ignore[arg-type]
    assert only.wanted == [T1]


@pytest.mark.parametrize(
    ("broker", "topic", "to", "partitions", "message"),
    [
        (9, "t", "/b", None, "no broker 9 in the cluster (its brokers: 1, 2)"),
        (1, "t", "/c", None, "/c is not a log dir of broker 1 (/a, /b)"),
        (1, "u", "/b", None, "broker 1 hosts no replica of u"),
        (1, "t", "/b", [0, 7], "broker 1 hosts no replica of t-7"),
    ],
)
def test_nothing_to_plan_is_an_error(
    broker: int, topic: str, to: str, partitions: list[int] | None, message: str
) -> None:
    with pytest.raises(LogDirMoveError) as raised:
        plan_log_dir_moves(FakeAdmin(STARTING), broker, topic, to, partitions)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_starting_and_waiting_until_the_future_replicas_are_gone() -> None:
    copying = dirs([ReplicaLogInfo(T0, 10), ReplicaLogInfo(T1, 10)], [ReplicaLogInfo(T0, 3, is_future=True)])
    done = dirs([], [ReplicaLogInfo(T0, 10), ReplicaLogInfo(T1, 10), ReplicaLogInfo(T2, 10)])
    admin = FakeAdmin(STARTING, copying, done, refuse={T1: ErrorCode.KAFKA_STORAGE_ERROR})
    plan = plan_log_dir_moves(admin, 1, "t", "/b")  # type: ignore[arg-type]
    start_log_dir_moves(admin, plan)  # type: ignore[arg-type]
    assert admin.altered == [(1, {T0: "/b", T1: "/b"})]
    assert plan.status == {T0: MOVING, T1: "KAFKA_STORAGE_ERROR", T2: IN_PLACE}
    assert plan.refused == [T1] and plan.in_progress
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    wait_for_log_dir_moves(admin, plan, 5, clock=lambda: now[0], sleep=sleep)  # type: ignore[arg-type]
    assert plan.status[T0] == MOVED and not plan.in_progress
    assert slept == [0.2, 0.2]  # a look while copying, one when done (each followed by a pause)


def test_the_wait_runs_out() -> None:
    admin = FakeAdmin(STARTING)  # the move never finishes
    plan = plan_log_dir_moves(admin, 1, "t", "/b", [0])  # type: ignore[arg-type]
    start_log_dir_moves(admin, plan)  # type: ignore[arg-type]
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    wait_for_log_dir_moves(admin, plan, 1, clock=lambda: now[0], sleep=sleep)  # type: ignore[arg-type]
    assert plan.in_progress and plan.status[T0] == MOVING
    assert admin.described == 1 + 6  # the plan, then looks at 0, 0.2, ..., 1.0


def test_no_wait_and_nothing_to_move_ask_nothing() -> None:
    admin = FakeAdmin(STARTING)
    plan = plan_log_dir_moves(admin, 1, "t", "/b", [2])  # type: ignore[arg-type]
    start_log_dir_moves(admin, plan)  # type: ignore[arg-type]
    wait_for_log_dir_moves(admin, plan, 0)  # type: ignore[arg-type]
    assert admin.altered == [] and admin.described == 1
