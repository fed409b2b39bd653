"""kctl.client.admin.reassign_throttle without a broker: which configs a throttled reassignment sets
and clears, on which topics and brokers, and what is reported as refused. The same against real
brokers: tests/test_reassign_throttle.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

from kctl.client import TopicPartition
from kctl.client.admin.reassign_throttle import clear_reassignment_throttle, set_reassignment_throttle
from kctl.client.admin.reassignments import THROTTLED_REPLICAS_CONFIGS
from kctl.client.admin.results import Result
from kctl.client.errors import KafkaError
from kctl.protocol import ErrorCode

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class FakeAdmin:
    def __init__(self, refuse_topic: str | None = None, refuse_broker: int | None = None) -> None:
        self.refuse_topic, self.refuse_broker = refuse_topic, refuse_broker
        self.calls: list[tuple[Any, ...]] = []

    def alter_configs(
        self, topic: str, set: Mapping[str, str] | None = None, delete: Iterable[str] = ()
    ) -> Result:
        self.calls.append(("topic", topic, dict(set or {}), tuple(delete)))
        if topic == self.refuse_topic:
            return Result(topic, ErrorCode.INVALID_CONFIG, "no")
        return Result(topic)

    def set_replication_throttle(self, brokers: Iterable[int], rate: int | None) -> list[Result]:
        ids = sorted(set(brokers))
        self.calls.append(("brokers", ids, rate))
        return [Result(str(b), ErrorCode.INVALID_REQUEST if b == self.refuse_broker else 0) for b in ids]

    def describe_cluster(self) -> Any:
        return SimpleNamespace(brokers=[SimpleNamespace(node_id=b) for b in (1, 2, 3, 4)])


def test_set_throttles_the_moving_partitions_topics_then_every_broker_involved() -> None:
    admin = FakeAdmin()
    moves = [(A0, (1, 2), (2, 3)), (B0, (1,), (4,))]
    outcome = set_reassignment_throttle(admin, moves, 5000)  # type: ignore[arg-type]
    assert outcome.brokers == [1, 2, 3, 4]
    assert outcome.topic_failures == [] and outcome.broker_failures == []
    leader, follower = THROTTLED_REPLICAS_CONFIGS
    assert admin.calls == [
        ("topic", "a", {leader: "0:1,0:2", follower: "0:3"}, ()),
        ("topic", "b", {leader: "0:1", follower: "0:4"}, ()),
        ("brokers", [1, 2, 3, 4], 5000),
    ]


def test_set_reports_the_topics_and_brokers_that_refused() -> None:
    admin = FakeAdmin(refuse_topic="a", refuse_broker=2)
    outcome = set_reassignment_throttle(admin, [(A0, (1,), (2,))], 100)  # type: ignore[arg-type]
    [(topic, result)] = outcome.topic_failures
    assert topic == "a" and result.error == "INVALID_CONFIG"
    assert [r.name for r in outcome.broker_failures] == ["2"]


def test_clear_removes_the_topics_configs_and_the_rate_on_the_plans_and_live_brokers() -> None:
    admin = FakeAdmin()
    clear_reassignment_throttle(admin, {A0: (5, 1), A1: (1,), B0: (2,)})  # type: ignore[arg-type]
    assert admin.calls == [
        ("topic", "a", {}, THROTTLED_REPLICAS_CONFIGS),
        ("topic", "b", {}, THROTTLED_REPLICAS_CONFIGS),
        ("brokers", [1, 2, 3, 4, 5], None),
    ]


def test_clear_is_best_effort() -> None:
    class Failing(FakeAdmin):
        def alter_configs(self, topic: str, set: Any = None, delete: Iterable[str] = ()) -> Result:
            raise KafkaError("controller gone")

    clear_reassignment_throttle(Failing(), {A0: (1,)})  # type: ignore[arg-type]  # no exception
