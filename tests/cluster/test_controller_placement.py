"""Replica placement (kctl.broker.controller.placement) against Kafka's documented examples
(AdminUtils.assignReplicasToBrokers)."""

from __future__ import annotations

from collections import Counter

import pytest

from kctl.broker.controller.placement import (
    InvalidReplicationFactorError,
    assign_replicas,
    rack_alternated_brokers,
)


def test_rack_unaware_matches_kafkas_documented_table() -> None:
    # AdminUtils' example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    assignment = assign_replicas([0, 1, 2, 3, 4], range(10), 3, start_index=0, replica_shift=0)
    first = {b: sorted(p for p, r in assignment.items() if r[0] == b) for b in range(5)}
    second = {b: sorted(p for p, r in assignment.items() if r[1] == b) for b in range(5)}
    third = {b: sorted(p for p, r in assignment.items() if r[2] == b) for b in range(5)}
    assert first == {0: [0, 5], 1: [1, 6], 2: [2, 7], 3: [3, 8], 4: [4, 9]}
    assert second == {0: [4, 8], 1: [0, 9], 2: [1, 5], 3: [2, 6], 4: [3, 7]}
    assert third == {0: [3, 7], 1: [4, 8], 2: [0, 9], 3: [1, 5], 4: [2, 6]}


def test_rack_alternated_list_is_kafkas() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_puts_each_replica_on_a_different_rack() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    for start in range(6):
        for shift in range(6):
            assignment = assign_replicas(racks, range(12), 3, start_index=start, replica_shift=shift)
            for replicas in assignment.values():
                assert len(set(replicas)) == 3
                assert len({racks[b] for b in replicas}) == 3, (start, shift, replicas)
    # leaders follow the rack-alternated list from the start index
    assignment = assign_replicas(racks, range(6), 3, start_index=0, replica_shift=0)
    assert [assignment[p][0] for p in range(6)] == [0, 3, 1, 5, 4, 2]


def test_leaders_and_replicas_spread_evenly_with_random_start() -> None:
    assignment = assign_replicas([1, 2, 3], range(30), 2)
    assert Counter(r[0] for r in assignment.values()) == {1: 10, 2: 10, 3: 10}
    assert Counter(b for r in assignment.values() for b in r) == {1: 20, 2: 20, 3: 20}
    assert all(len(set(r)) == 2 for r in assignment.values())


def test_new_partitions_continue_the_numbering() -> None:
    assignment = assign_replicas([1, 2, 3], range(3, 6), 1, start_index=0, replica_shift=0)
    assert assignment == {3: (1,), 4: (2,), 5: (3,)}


def test_mixed_racks_fall_back_to_rack_unaware() -> None:
    assignment = assign_replicas({1: "a", 2: None, 3: "b"}, range(3), 3, start_index=0, replica_shift=0)
    assert assignment[0] == (1, 2, 3)


@pytest.mark.parametrize("factor", [0, 4])
def test_invalid_replication_factor(factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([1, 2, 3], range(1), factor)
