"""kctl.client.admin.reassign_plan: Kafka's plan and topics-to-move formats, Kafka's rack-unaware
placement for --generate, the moves a plan makes and --verify's states (no broker needed)."""

from __future__ import annotations

import json
import random

import pytest

from kctl.client import TopicPartition
from kctl.client.admin.reassign_plan import (
    COMPLETE,
    IN_PROGRESS,
    NOT_APPLIED,
    PlanError,
    absent_brokers,
    assign_replicas,
    format_plan,
    generate,
    moves,
    parse_plan,
    parse_topics_to_move,
    verify,
)

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def test_placement_is_kafkas_rack_unaware_assignment() -> None:
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    expected = {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, replica_shift=0) == expected


def test_placement_spreads_leaders_and_never_repeats_a_broker() -> None:
    placed = assign_replicas([1, 2, 3], 6, 3, rng=random.Random(7))
    assert all(len(set(r)) == 3 for r in placed.values())
    leaders = [r[0] for r in placed.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    with pytest.raises(PlanError, match="larger than the 2 brokers"):
        assign_replicas([1, 2], 1, 3)


def test_generate_keeps_each_topics_replication_factor_on_the_given_brokers() -> None:
    current = {"a": {0: (1, 2), 1: (2, 3)}, "b": {0: (1,), 1: (2,), 2: (3,)}}
    proposed = generate(current, [4, 5, 6], rng=random.Random(1))
    assert set(proposed) == {TopicPartition("a", 0), TopicPartition("a", 1)} | {
        TopicPartition("b", p) for p in range(3)
    }
    assert all(set(r) <= {4, 5, 6} for r in proposed.values())
    assert [len(proposed[TopicPartition("a", p)]) for p in range(2)] == [2, 2]
    assert [len(proposed[TopicPartition("b", p)]) for p in range(3)] == [1, 1, 1]
    assert generate(current, [4, 5, 6], rng=random.Random(1)) == proposed  # a seed reproduces it
    with pytest.raises(PlanError, match="topic 'a'"):
        generate(current, [9])


def test_plan_json_is_kafkas_format_and_reads_back() -> None:
    plan = {T1: (2, 3), T0: (3,)}
    document = format_plan(plan)
    assert document == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [3], "log_dirs": ["any"]},
            {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        ],
    }
    assert parse_plan(json.dumps(document)) == plan
    # kafka-reassign-partitions.sh files may leave out log_dirs
    assert parse_plan('{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[1]}]}') == {T2: (1,)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "not JSON"),
        ('{"version":1,"partitions":[]}', "at least one partition"),
        ('{"partitions":[{"topic":"t","partition":0}]}', "bad partition entry"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "empty or repeat"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}', '"any"'),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
            "more than once",
        ),
    ],
)
def test_bad_plans_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan(text)


def test_topics_to_move_file() -> None:
    text = '{"version":1,"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}'
    assert parse_topics_to_move(text) == ["a", "b"]
    with pytest.raises(PlanError):
        parse_topics_to_move('{"version":1,"topics":[]}')
    with pytest.raises(PlanError):
        parse_topics_to_move('{"topics":["a"]}')


def test_moves_say_what_each_partition_copies() -> None:
    current = {T0: (1, 2), T1: (2, 3), T2: (3, 1)}
    planned = moves(current, {T0: (2, 3), T1: (2, 3), T2: (4, 5)}, {T0: 100, T2: 7})
    assert [(m.adding, m.removing, m.changes, m.bytes_to_copy) for m in planned] == [
        ((3,), (1,), True, 100),
        ((), (), False, None),  # no size known: None, not 0
        ((4, 5), (3, 1), True, 14),
    ]
    with pytest.raises(PlanError, match="no such partition: t-9"):
        moves(current, {TopicPartition("t", 9): (1,)})


def test_brokers_a_plan_names_that_are_not_in_the_cluster() -> None:
    current = {T0: (1, 2), T1: (2, 9), T2: (3, 1)}
    # T1 keeps a broker that left (no change: not sent), T0 and T2 move to absent brokers
    planned = moves(current, {T0: (2, 7), T1: (2, 9), T2: (7, 8, 1)})
    assert absent_brokers(planned, [1, 2, 3]) == {7: [T0, T2], 8: [T2]}
    assert absent_brokers(planned, [1, 2, 3, 7, 8]) == {}


def test_verify_states() -> None:
    plan = {T0: (2, 3), T1: (3,), T2: (1,)}
    current = {T0: (2, 3), T1: (1, 3), T2: (2,)}
    assert verify(plan, current, [T1]) == {T0: COMPLETE, T1: IN_PROGRESS, T2: NOT_APPLIED}
