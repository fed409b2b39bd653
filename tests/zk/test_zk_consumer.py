"""The ZooKeeper-coordinated group consumer (kctl.client.zkgroup) against a real ZooKeeper server and a
real broker registered in it: seed 003's registry layout, the range rebalancing, ownership that never
overlaps, white-list topic filters, offsets in ZooKeeper / Kafka / both, and the four-step migration
with dual commit and its roll-back. Consumers run in threads of the test process here (each used
from one thread); tests/zk/test_zk_consumer_kill.py kills consumer processes."""

from __future__ import annotations

import itertools
import json
import uuid
from typing import TYPE_CHECKING

import pytest
import zk_support
from zk_support import Runner, ZkCluster

from kctl.client import AdminClient, TopicPartition
from kctl.client.config import ClientConfigError
from kctl.client.group import GroupAdmin
from kctl.client.zkgroup import ZkGroupAdmin, ZkGroupConfig, assign_range, plan_assignment
from kctl.testing import wait_for
from kctl.testing.zk_sessions import expire_session
from kctl.zk.consumer_znodes import ConsumerIdZNode, ConsumerRegistration
from kctl.zk.zookeeper_session import split_connect

if TYPE_CHECKING:  # only annotations: the unit tests here stay unmarked (no e2e/zk)
    pass

zk_cluster = zk_support.zk_cluster  # the fixtures, shared
runners = zk_support.runners


def owners(cluster: ZkCluster, group: str) -> dict[tuple[str, int], str]:
    with cluster.registry() as zk:
        return zk.owners(group)


def balanced(cluster: ZkCluster, group: str, members: list[Runner], partitions: int) -> bool:
    """Every partition owned, each member owning its share, and each member reading what it owns."""
    owned = owners(cluster, group)
    if len(owned) != partitions or set(owned.values()) != {m.consumer_id for m in members}:
        return False
    return all(
        {tp for tp in owned if owned[tp] == m.consumer_id}
        == {(tp.topic, tp.partition) for tp in m.consumer.owned}
        for m in members
    )


def offsets_read(runners: list[Runner]) -> list[tuple[TopicPartition, int]]:
    return sorted((tp, offset) for r in runners for _, _, tp, offset in r.records)


# -- the algorithm ---------------------------------------------------------------------------------
def test_range_assignment_gives_contiguous_shares_first_threads_one_more() -> None:
    assert assign_range(range(7), ["c-0", "b-0", "a-0"]) == {"a-0": [0, 1, 2], "b-0": [3, 4], "c-0": [5, 6]}
    assert assign_range([0, 1], ["a-0", "b-0", "c-0"]) == {"a-0": [0], "b-0": [1], "c-0": []}
    consumers = {
        "a": ConsumerRegistration({"t": 1}),
        "b": ConsumerRegistration({"t": 1, "u": 1}),
        "c": ConsumerRegistration({"o.*": 1}, "white_list"),
    }
    topics = {"t": [0, 1, 2, 3], "u": [0, 1], "other": [0, 1, 2]}
    assert plan_assignment("a", consumers, topics) == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert plan_assignment("b", consumers, topics) == {TopicPartition("t", p) for p in (2, 3)} | {
        TopicPartition("u", 0),
        TopicPartition("u", 1),
    }
    assert plan_assignment("c", consumers, topics) == {TopicPartition("other", p) for p in range(3)}


def test_registration_znode_is_seed_003s_format() -> None:
    data = ConsumerIdZNode.encode(ConsumerRegistration({"orders": 1}, "static", 1234))
    assert json.loads(data) == {
        "version": 1,
        "subscription": {"orders": 1},
        "pattern": "static",
        "timestamp": "1234",
    }
    assert ConsumerIdZNode.decode("g", "c", data) == ConsumerRegistration({"orders": 1}, "static", 1234)


def test_topic_filters_and_offset_stores() -> None:
    white = ConsumerRegistration({"orders-.*": 2}, "white_list")
    black = ConsumerRegistration({"orders-.*": 1}, "black_list")
    assert (white.streams("orders-eu"), white.streams("xorders-eu"), white.streams("__consumer_offsets")) == (
        2,
        0,
        0,
    )
    assert (black.streams("orders-eu"), black.streams("payments"), black.streams("__consumer_offsets")) == (
        0,
        1,
        0,
    )
    assert ZkGroupConfig.from_properties({}).stores == ("zookeeper",)
    assert ZkGroupConfig.from_properties({"offsets.storage": "kafka"}).stores == ("kafka",)
    assert ZkGroupConfig.from_properties({"dual.commit.enabled": "true"}).stores == ("zookeeper", "kafka")
    with pytest.raises(ClientConfigError):
        ZkGroupConfig.from_properties({"offsets.storage": "etcd"})


# -- the group -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_three_consumers_share_six_partitions_exactly_once_with_clean_shutdowns(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 6)
    zk_cluster.produce(topic, 6, 300)
    runners += [Runner(zk_cluster, group, [topic]) for _ in range(3)]
    wait_for(
        lambda: balanced(zk_cluster, group, runners, 6),
        "three consumers owning two partitions each",
        30,
    )
    owned = owners(zk_cluster, group)
    assert sorted(list(owned.values()).count(r.consumer_id) for r in runners) == [2, 2, 2]
    with zk_cluster.registry() as zk:  # the layout of seed 003
        kz = zk.kazoo_client
        ids = kz.get_children(f"/consumers/{group}/ids")
        assert sorted(ids) == sorted(r.consumer_id for r in runners)
        data, stat = kz.get(f"/consumers/{group}/ids/{ids[0]}")
        assert stat.ephemeralOwner and json.loads(data)["subscription"] == {topic: 1}
        data, stat = kz.get(f"/consumers/{group}/owners/{topic}/0")
        assert stat.ephemeralOwner and data.decode() in ids
    wait_for(lambda: len(offsets_read(runners)) >= 300, "the first 300 records", 30)

    leaving = runners.pop(0)
    leaving.stop()  # clean: it commits, releases, unregisters
    wait_for(
        lambda: balanced(zk_cluster, group, runners, 6),
        "two consumers owning three partitions each",
        30,
    )
    zk_cluster.produce(topic, 6, 300, start=300)
    wait_for(lambda: len(offsets_read([leaving, *runners])) >= 600, "all 600 records", 30)
    for r in runners:
        r.stop()
    read = offsets_read([leaving, *runners])
    assert read == sorted({(TopicPartition(topic, p), o) for p in range(6) for o in range(100)}), (
        "exactly once"
    )
    with zk_cluster.registry() as zk:
        assert zk.consumers(group) == {} and zk.owners(group) == {}
        assert zk.committed_offsets(group) == {(topic, p): 100 for p in range(6)}


@pytest.mark.slow
def test_racing_consumers_never_own_or_read_a_partition_at_the_same_time(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"race-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 4)
    runners += [Runner(zk_cluster, group, [topic]) for _ in range(2)]
    everyone = list(runners)
    for round_ in range(3):  # a third consumer joins and leaves: two rebalances per round
        zk_cluster.produce(topic, 4, 40, start=round_ * 40)
        extra = Runner(zk_cluster, group, [topic])
        everyone.append(extra)
        wait_for(lambda extra=extra: extra.consumer.owned, "the joining consumer's partitions", 30)
        extra.stop()
    for r in runners:
        r.stop()
    intervals: dict[TopicPartition, list[tuple[float, float, str]]] = {}
    for r in everyone:
        claimed: dict[TopicPartition, float] = {}
        for at, event, tp in r.consumer.history:
            if event == "claimed":
                claimed[tp] = at
            else:
                intervals.setdefault(tp, []).append((claimed.pop(tp), at, r.consumer_id))
        assert not claimed, "a closed consumer released everything"
    for tp, spans in intervals.items():
        spans.sort()
        for (_, end, who), (start, _, other) in itertools.pairwise(spans):
            assert end <= start, f"{tp} owned by {who} and {other} at once"
    assert sum(len(s) for s in intervals.values()) >= 4 + 3 * 2
    for r in everyone:  # each record was read while its reader owned the partition
        for at, who, tp, offset in r.records:
            assert any(s <= at <= e and w == who for s, e, w in intervals[tp]), (tp, offset, who)
    assert offsets_read(everyone) == sorted(
        {(TopicPartition(topic, p), o) for p in range(4) for o in range(30)}
    )


@pytest.mark.slow
def test_white_list_consumer_picks_up_a_topic_created_later(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    prefix, group = f"wl{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(f"{prefix}-a", 2)
    zk_cluster.create_topic(f"other{prefix}", 1)
    runners.append(Runner(zk_cluster, group, pattern=f"{prefix}-.*"))
    wait_for(lambda: len(runners[0].consumer.owned) == 2, "the first matching topic", 30)
    zk_cluster.create_topic(f"{prefix}-b", 3)
    zk_cluster.produce(f"{prefix}-b", 3, 9)
    wait_for(lambda: len(runners[0].records) >= 9, "the records of the topic created later", 30)
    assert {tp.topic for tp in runners[0].consumer.owned} == {f"{prefix}-a", f"{prefix}-b"}
    with zk_cluster.registry() as zk:
        [registration] = zk.consumers(group).values()
        assert registration.pattern == "white_list" and registration.subscription == {f"{prefix}-.*": 1}


# -- offsets: the seed's migration ----------------------------------------------------------------
def stores(
    cluster: ZkCluster, group: str, topic: str, partitions: int
) -> tuple[dict[int, int], dict[int, int]]:
    """(ZooKeeper's, Kafka's) committed offsets of the group, by partition."""
    with cluster.registry() as zk:
        in_zk = {p: o for (t, p), o in zk.committed_offsets(group).items() if t == topic}
    with AdminClient(cluster.bootstrap) as admin:
        committed = GroupAdmin(admin).committed_offsets(group)
    in_kafka = {tp.partition: v.offset for tp, v in committed.items() if v is not None and tp.topic == topic}
    return in_zk, in_kafka


@pytest.mark.slow
def test_seed_migration_zookeeper_to_kafka_and_back_neither_skips_nor_rereads(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"mig-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 4)
    steps = [
        {"offsets.storage": "zookeeper"},  # where the group starts
        {"offsets.storage": "kafka", "dual.commit.enabled": "true"},  # step 1-2
        {"offsets.storage": "kafka", "dual.commit.enabled": "false"},  # step 3-4
        {"offsets.storage": "zookeeper", "dual.commit.enabled": "true"},  # roll-back
        {"offsets.storage": "zookeeper", "dual.commit.enabled": "false"},
    ]
    everyone: list[Runner] = []
    produced = 0
    current = [Runner(zk_cluster, group, [topic], **steps[0]) for _ in range(2)]
    everyone += current
    for config in steps[1:]:
        zk_cluster.produce(topic, 4, 40, start=produced)
        produced += 40
        wait_for(lambda n=produced: len(offsets_read(everyone)) >= n, f"{produced} records", 30)
        for i in range(len(current)):  # a rolling bounce: one consumer at a time, the other keeps reading
            current[i].stop()
            current[i] = Runner(zk_cluster, group, [topic], **config)
            everyone.append(current[i])
            wait_for(lambda: balanced(zk_cluster, group, current, 4), "a settled group", 30)
        if config.get("dual.commit.enabled") == "true":  # the new consumers commit to both stores
            want = {p: produced // 4 for p in range(4)}
            wait_for(
                lambda want=want: stores(zk_cluster, group, topic, 4) == (want, want),
                f"{want} in both stores",
                10,
            )
    zk_cluster.produce(topic, 4, 40, start=produced)
    produced += 40
    wait_for(lambda: len(offsets_read(everyone)) >= produced, f"{produced} records", 30)
    for r in current:
        r.stop()
    assert offsets_read(everyone) == sorted(
        {(TopicPartition(topic, p), o) for p in range(4) for o in range(produced // 4)}
    ), "every record exactly once across the migration and the roll-back"
    in_zk, in_kafka = stores(zk_cluster, group, topic, 4)
    assert in_zk == {p: produced // 4 for p in range(4)}
    assert in_kafka == {p: produced // 4 - 10 for p in range(4)}, "kafka left behind once dual commit ended"


def test_zk_group_admin_describes_members_owners_and_offsets(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"adm-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 2)
    zk_cluster.produce(topic, 2, 10)
    runners.append(Runner(zk_cluster, group, [topic]))
    wait_for(lambda: len(runners[0].records) >= 10, "10 records", 30)
    with AdminClient(zk_cluster.bootstrap) as admin, zk_cluster.registry() as zk:
        groups = ZkGroupAdmin(admin, zk)
        wait_for(lambda: all(p.committed == 5 for p in groups.offsets_with_lag(group)), "commits", 10)
        [description] = groups.describe_groups([group])
        assert description.state == "Stable" and description.protocol_type == "zookeeper"
        [member] = description.members
        assert member.member_id == runners[0].consumer_id
        assert set(member.assignment) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert [(p.log_end, p.lag) for p in groups.offsets_with_lag(group)] == [(5, 0), (5, 0)]
        assert [g.group_id for g in groups.list_groups()] == [group]


@pytest.mark.slow
def test_session_expiry_drops_the_partitions_then_registers_and_rebalances_again(
    zk_cluster: ZkCluster, runners: list[Runner]
) -> None:
    topic, group = f"exp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 2)
    zk_cluster.produce(topic, 2, 10)
    runners.append(Runner(zk_cluster, group, [topic]))
    consumer = runners[0].consumer
    wait_for(lambda: len(runners[0].records) >= 10, "the first 10 records", 30)
    old_session = consumer.registry.session_id
    # a second client on the same session, closed: ZooKeeper expires the session (a classic trick)
    expire_session(
        split_connect(zk_cluster.connect)[0],
        consumer.registry.kazoo_client.client_id,
        lambda: any(event == "lost" for _, event, _ in consumer.history),
    )

    def state() -> str:
        events = [(e, str(tp)) for _, e, tp in consumer.history[-6:]]
        return f"; last events {events}, runner error {runners[0].error!r}, alive {runners[0].is_alive()}"

    wait_for(
        lambda: any(event == "lost" for _, event, _ in consumer.history),
        "the partitions to be dropped",
        30,
        describe=state,
    )
    wait_for(
        lambda: [e for _, e, _ in consumer.history].count("claimed") == 4 and len(consumer.owned) == 2,
        "the partitions claimed again in a new session",
        30,
    )
    assert consumer.registry.session_id != old_session
    with zk_cluster.registry() as zk:
        _, stat = zk.kazoo_client.get(f"/consumers/{group}/ids/{consumer.consumer_id}")
        assert stat.ephemeralOwner == consumer.registry.session_id, "registered again, in the new session"
        _, stat = zk.kazoo_client.get(f"/consumers/{group}/owners/{topic}/0")
        assert stat.ephemeralOwner == consumer.registry.session_id
    zk_cluster.produce(topic, 2, 10, start=10)
    wait_for(
        lambda: {o for *_, o in runners[0].records} >= set(range(10)),
        "the records after the expiry",
        30,
    )
    assert max(o for *_, o in runners[0].records) == 9
