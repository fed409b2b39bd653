"""The partition assignors (kctl.client.group.assignors): Kafka's documented examples (the seed 001_...),
balance, determinism and stickiness, and the two rounds of a cooperative rebalance."""

from __future__ import annotations

import random

import pytest

from kctl.client.consumer_protocol import StickyUserData, Subscription
from kctl.client.group.assignors import (
    CooperativeStickyAssignor,
    GroupMember,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    get_assignor,
    parse_assignors,
    rebalance_protocol,
)
from kctl.common.topic_partition import TopicPartition


def tp(text: str) -> TopicPartition:
    """'t0p1' -> TopicPartition('t0', 1)."""
    topic, _, partition = text.rpartition("p")
    return TopicPartition(topic, int(partition))


def tps(*texts: str) -> list[TopicPartition]:
    return sorted(tp(t) for t in texts)


def subs(topics_by_member: dict[str, list[str]]) -> dict[str, Subscription]:
    return {m: Subscription(tuple(ts)) for m, ts in topics_by_member.items()}


def sticky_members(
    topics_by_member: dict[str, list[str]], previous: dict[str, list[TopicPartition]], generation: int = 1
) -> list[GroupMember]:
    """Members as eager sticky members report themselves: the previous assignment in user data."""
    return [
        GroupMember(
            m,
            Subscription(
                tuple(ts),
                StickyUserData(tuple(previous.get(m, [])), generation).encode() if m in previous else None,
            ),
        )
        for m, ts in topics_by_member.items()
    ]


def cooperative_members(
    topics_by_member: dict[str, list[str]], owned: dict[str, list[TopicPartition]], generation: int = 1
) -> list[GroupMember]:
    return [
        GroupMember(m, Subscription(tuple(ts), None, tuple(owned.get(m, [])), generation))
        for m, ts in topics_by_member.items()
    ]


def check_complete(assignment: dict[str, list[TopicPartition]], counts: dict[str, int], members) -> None:
    """Every partition of a subscribed topic goes to exactly one member subscribed to its topic."""
    topics_of = {m: set(s.topics) for m, s in members.items()}
    seen: list[TopicPartition] = [p for parts in assignment.values() for p in parts]
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    subscribed = {t for ts in topics_of.values() for t in ts}
    expected = {TopicPartition(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert set(seen) == expected
    for member, parts in assignment.items():
        assert all(p.topic in topics_of[member] for p in parts)


def moved(before: dict[str, list[TopicPartition]], after: dict[str, list[TopicPartition]]) -> int:
    owner = {p: m for m, parts in before.items() for p in parts}
    return sum(1 for m, parts in after.items() for p in parts if p in owner and owner[p] != m)


# -- Kafka's documented examples ------------------------------------------------------------------
def test_range_example_two_topics_four_partitions_three_consumers() -> None:
    counts = {"T0": 4, "T1": 4}
    result = RangeAssignor().assign(
        counts, subs({"C0": ["T0", "T1"], "C1": ["T0", "T1"], "C2": ["T0", "T1"]})
    )
    assert result == {
        "C0": tps("T0p0", "T0p1", "T1p0", "T1p1"),
        "C1": tps("T0p2", "T1p2"),
        "C2": tps("T0p3", "T1p3"),
    }


def test_roundrobin_example_same_subscriptions() -> None:
    counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    everything = ["t0", "t1", "t2", "t3"]
    result = RoundRobinAssignor().assign(counts, subs({"C0": everything, "C1": everything, "C2": everything}))
    assert result == {
        "C0": tps("t0p0", "t1p1", "t3p0"),
        "C1": tps("t0p1", "t2p0", "t3p1"),
        "C2": tps("t1p0", "t2p1"),
    }


def test_roundrobin_example_different_subscriptions_is_unbalanced() -> None:
    counts = {"t0": 1, "t1": 2, "t2": 3}
    members = subs({"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert RoundRobinAssignor().assign(counts, members) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1", "t2p0", "t2p1", "t2p2"),
    }


def test_sticky_example_one_initial_equals_roundrobin_then_a_member_leaves() -> None:
    counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    everything = ["t0", "t1", "t2", "t3"]
    first = StickyAssignor().assign(counts, subs({"C0": everything, "C1": everything, "C2": everything}))
    assert first == {
        "C0": tps("t0p0", "t1p1", "t3p0"),
        "C1": tps("t0p1", "t2p0", "t3p1"),
        "C2": tps("t1p0", "t2p1"),
    }
    # C1 leaves: C0 and C2 keep everything they had and share C1's three partitions, 4 and 4
    second = StickyAssignor().assign(counts, sticky_members({"C0": everything, "C2": everything}, first))
    assert set(first["C0"]) <= set(second["C0"])
    assert set(first["C2"]) <= set(second["C2"])
    assert sorted(len(p) for p in second.values()) == [4, 4]
    check_complete(second, counts, subs({"C0": everything, "C2": everything}))


def test_sticky_example_two_different_subscriptions() -> None:
    counts = {"t0": 1, "t1": 2, "t2": 3}
    topics = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = StickyAssignor().assign(counts, subs(topics))
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    # C0 leaves: only t0p0 moves (to C1, the less loaded of the two who can take it)
    del topics["C0"]
    second = StickyAssignor().assign(counts, sticky_members(topics, first))
    assert second == {"C1": tps("t0p0", "t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}


# -- properties -----------------------------------------------------------------------------------
ALL = [RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()]


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
@pytest.mark.parametrize("seed", range(20))
def test_complete_and_deterministic(assignor, seed: int) -> None:
    rng = random.Random(seed)
    counts = {f"topic{i}": rng.randint(1, 8) for i in range(rng.randint(1, 5))}
    names = [*counts, "missing-topic"]
    topics = {
        f"member-{i:02d}": rng.sample(names, rng.randint(1, len(names))) for i in range(rng.randint(1, 7))
    }
    members = subs(topics)
    result = assignor.assign(counts, members)
    check_complete(result, counts, members)
    shuffled = dict(rng.sample(list(members.items()), len(members)))
    assert assignor.assign(counts, shuffled) == result


@pytest.mark.parametrize("assignor", [RoundRobinAssignor(), StickyAssignor()], ids=lambda a: a.name)
@pytest.mark.parametrize(("partitions", "members"), [(6, 3), (7, 3), (2, 5), (100, 7), (1, 1)])
def test_balanced_with_the_same_subscriptions(assignor, partitions: int, members: int) -> None:
    result = assignor.assign({"t": partitions}, subs({f"m{i}": ["t"] for i in range(members)}))
    sizes = [len(p) for p in result.values()]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == partitions


def test_range_is_per_topic_and_drifts_across_topics() -> None:
    counts = {f"t{i}": 4 for i in range(3)}
    result = RangeAssignor().assign(counts, subs({m: list(counts) for m in ("a", "b", "c")}))
    assert [len(result[m]) for m in ("a", "b", "c")] == [6, 3, 3]


def test_static_members_sort_first_by_instance_id() -> None:
    members = [
        GroupMember("aaa-dynamic", Subscription(("t",))),
        GroupMember("zzz-1", Subscription(("t",)), group_instance_id="instance-b"),
        GroupMember("yyy-2", Subscription(("t",)), group_instance_id="instance-a"),
    ]
    result = RangeAssignor().assign({"t": 3}, members)
    assert result == {"yyy-2": tps("tp0"), "zzz-1": tps("tp1"), "aaa-dynamic": tps("tp2")}


@pytest.mark.parametrize("seed", range(15))
def test_sticky_moves_only_what_must_move_when_members_come_and_go(seed: int) -> None:
    rng = random.Random(seed)
    counts = {"a": rng.randint(3, 20), "b": rng.randint(1, 10)}
    total = sum(counts.values())
    names = [f"m{i}" for i in range(rng.randint(2, 6))]
    topics = {m: ["a", "b"] for m in names}
    before = StickyAssignor().assign(counts, subs(topics))
    # a member joins: only what the newcomer takes moves, and the group stays balanced
    topics["new"] = ["a", "b"]
    after = StickyAssignor().assign(counts, sticky_members(topics, before))
    check_complete(after, counts, subs(topics))
    sizes = [len(p) for p in after.values()]
    assert max(sizes) - min(sizes) <= 1
    assert moved(before, after) == len(after["new"])
    assert len(after["new"]) in (total // len(topics), total // len(topics) + 1)
    # a member leaves: only its partitions move
    leaver = rng.choice(names)
    del topics[leaver]
    remaining = {m: p for m, p in after.items() if m != leaver}
    final = StickyAssignor().assign(counts, sticky_members(topics, remaining, generation=2))
    check_complete(final, counts, subs(topics))
    assert moved(remaining, final) == 0
    for member, parts in remaining.items():
        assert set(parts) <= set(final[member])
    sizes = [len(p) for p in final.values()]
    assert max(sizes) - min(sizes) <= 1


def test_sticky_general_case_is_balanced_where_subscriptions_allow() -> None:
    counts = {"t0": 3, "t1": 3, "t2": 3}
    topics = {"c0": ["t0", "t1", "t2"], "c1": ["t0", "t1", "t2"], "c2": ["t2"]}
    result = StickyAssignor().assign(counts, subs(topics))
    check_complete(result, counts, subs(topics))
    assert sorted(len(p) for p in result.values()) == [3, 3, 3]
    assert all(p.topic == "t2" for p in result["c2"])


def test_sticky_trusts_the_highest_generation_and_drops_conflicting_claims() -> None:
    counts = {"t": 4}
    members = [
        GroupMember("a", Subscription(("t",), StickyUserData(tuple(tps("tp0", "tp1")), 3).encode())),
        GroupMember("b", Subscription(("t",), StickyUserData(tuple(tps("tp0", "tp2")), 5).encode())),
        GroupMember("c", Subscription(("t",), StickyUserData(tuple(tps("tp3")), 5).encode())),
    ]
    owners = StickyAssignor().previous_owners(counts, sorted(members, key=lambda m: m.sort_key))
    assert owners == {tp("tp0"): "b", tp("tp1"): "a", tp("tp2"): "b", tp("tp3"): "c"}
    same = [
        GroupMember("a", Subscription(("t",), StickyUserData(tuple(tps("tp0")), 4).encode())),
        GroupMember("b", Subscription(("t",), StickyUserData(tuple(tps("tp0")), 4).encode())),
    ]
    assert StickyAssignor().previous_owners(counts, same) == {}


def test_sticky_reads_kafka_python_user_data() -> None:
    from kafka.coordinator.assignors.sticky import sticky_assignor as kp
    from kafka.structs import TopicPartition as KpTopicPartition

    subscription = kp.StickyPartitionAssignor._metadata(
        ["t"], [KpTopicPartition("t", 0), KpTopicPartition("t", 2)], 7
    )
    decoded = Subscription.decode(subscription.encode())
    data = StickyAssignor().member_data(decoded)
    assert (sorted(data.owned), data.generation) == (tps("tp0", "tp2"), 7)


# -- cooperative ----------------------------------------------------------------------------------
def test_cooperative_sticky_hands_partitions_over_in_two_rebalances() -> None:
    assignor = CooperativeStickyAssignor()
    counts = {"t": 6}
    topics = {"m1": ["t"], "m2": ["t"]}
    first = assignor.assign(counts, cooperative_members(topics, {}))
    assert sorted(len(p) for p in first.values()) == [3, 3]
    # m3 joins: the first rebalance gives it nothing that someone else still owns
    topics["m3"] = ["t"]
    second = assignor.assign(counts, cooperative_members(topics, first, generation=1))
    assert second["m3"] == []
    for member in ("m1", "m2"):
        assert set(second[member]) <= set(first[member])
    revoked = {m: set(first[m]) - set(second[m]) for m in ("m1", "m2")}
    assert sum(len(r) for r in revoked.values()) == 2
    # the owners gave those up and rejoined: the second rebalance places them on m3
    third = assignor.assign(counts, cooperative_members(topics, second, generation=2))
    assert set(third["m3"]) == set().union(*revoked.values())
    assert sorted(len(p) for p in third.values()) == [2, 2, 2]
    assert moved(second, third) == 0


def test_cooperative_ignores_stale_claims() -> None:
    assignor = CooperativeStickyAssignor()
    members = [
        GroupMember("old", Subscription(("t",), None, tuple(tps("tp0", "tp1")), 3)),
        GroupMember("new", Subscription(("t",), None, tuple(tps("tp0", "tp1")), 4)),
    ]
    result = assignor.assign({"t": 2}, members)
    # "new" owns both validly; a balanced split moves one to "old", withheld for this round
    assert result == {"new": tps("tp0"), "old": []}


# -- names and protocols --------------------------------------------------------------------------
def test_names_and_rebalance_protocols() -> None:
    assert [a.name for a in parse_assignors("range, roundrobin,sticky,cooperative-sticky")] == [
        "range",
        "roundrobin",
        "sticky",
        "cooperative-sticky",
    ]
    assert (
        get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name
        == "cooperative-sticky"
    )
    assert rebalance_protocol(parse_assignors("cooperative-sticky")) is RebalanceProtocol.COOPERATIVE
    assert rebalance_protocol(parse_assignors("range,cooperative-sticky")) is RebalanceProtocol.EAGER
    with pytest.raises(ValueError, match="unknown partition assignor"):
        get_assignor("fair")
