"""KIP-392's rack-aware replica selection (kctl.broker.replica_selector) and the broker config that
turns it on (replica.selector.class): which replica a leader names as a consumer's preferred read
replica, by the consumer's rack, the in-sync replicas' racks and how caught up they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.broker.config import BrokerConfig, BrokerConfigError
from kctl.broker.partition import Partition
from kctl.broker.replica_selector import (
    RACK_AWARE_SELECTOR,
    RackAwareReplicaSelector,
    ReplicaView,
    preferred_read_replica,
    replica_selector,
)
from kctl.common.topic_partition import TopicPartition
from kctl.log.log import Log
from kctl.records.builder import RecordBatchBuilder

SELECT = RackAwareReplicaSelector().select
LEADER = ReplicaView(1, "r1", 100, 0)


def test_no_client_rack_is_the_leader() -> None:
    assert SELECT("", LEADER, [ReplicaView(2, "", 100, 0)]) is LEADER


def test_no_replica_in_the_clients_rack_is_the_leader() -> None:
    assert SELECT("r9", LEADER, [ReplicaView(2, "r2", 100, 0), ReplicaView(3, None, 100, 0)]) is LEADER


def test_the_leader_in_the_clients_rack_wins_over_a_follower_there() -> None:
    follower = ReplicaView(2, "r1", 100, 0)
    assert SELECT("r1", LEADER, [follower]) is LEADER


def test_a_follower_in_the_clients_rack() -> None:
    follower = ReplicaView(2, "r2", 100, 0)
    assert SELECT("r2", LEADER, [follower, ReplicaView(3, "r3", 100, 0)]) is follower


def test_ties_go_to_the_most_caught_up_then_the_highest_id() -> None:
    behind = ReplicaView(2, "r2", 90, 0)
    ahead = ReplicaView(3, "r2", 100, 500)
    assert SELECT("r2", LEADER, [behind, ahead]) is ahead  # log end offset first
    recent = ReplicaView(4, "r2", 100, 10)
    assert SELECT("r2", LEADER, [ahead, recent]) is recent  # then the most recently caught up
    twin = ReplicaView(5, "r2", 100, 10)
    assert SELECT("r2", LEADER, [twin, recent]) is twin  # then the highest broker id


def test_the_config_takes_kafkas_class_name_and_an_alias() -> None:
    assert BrokerConfig({})["replica.selector.class"] is None
    assert replica_selector(None) is None
    for name in (RACK_AWARE_SELECTOR, "rack-aware"):
        value = BrokerConfig({"replica.selector.class": name})["replica.selector.class"]
        assert value == RACK_AWARE_SELECTOR
        assert isinstance(replica_selector(value), RackAwareReplicaSelector)
    with pytest.raises(BrokerConfigError, match=r"replica\.selector\.class"):
        BrokerConfig({"replica.selector.class": "com.example.NearestReplicaSelector"})


def _leader_partition(tmp_path: Path) -> Partition:
    tp = TopicPartition("t", 0)
    log = Log(tmp_path / "t-0", tp)
    builder = RecordBatchBuilder()
    for i in range(10):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    log.append(builder.build(), leader_epoch=0)
    partition = Partition(
        tp, log, leader_id=1, leader_epoch=0, replicas=(1, 2, 3, 4), isr=(1, 2, 3), replicated=True
    )
    partition.make_leader(0, (1, 2, 3), (1, 2, 3, 4), 0, 0, now_ms=1000)
    for replica in (2, 3, 4):
        partition.record_follower_fetch(replica, 10, 1000, log_start_offset=0)
    return partition


def test_the_leader_names_a_live_in_sync_follower_of_the_clients_rack(tmp_path: Path) -> None:
    partition = _leader_partition(tmp_path)
    racks = {1: "r1", 2: "r2", 3: "r3", 4: "r4"}
    try:
        selector = RackAwareReplicaSelector()
        assert preferred_read_replica(selector, partition, "r2", 5, racks, now_ms=1000) == 2
        assert preferred_read_replica(selector, partition, "r1", 5, racks, now_ms=1000) == -1  # the leader
        assert preferred_read_replica(selector, partition, "", 5, racks, now_ms=1000) == -1
        # broker 4 is in r4 and has the records, but is not in the ISR: the leader serves
        assert preferred_read_replica(selector, partition, "r4", 5, racks, now_ms=1000) == -1
        # broker 3 is not live (not registered): no endpoint, no rack
        assert preferred_read_replica(selector, partition, "r3", 5, {1: "r1", 2: "r2"}, now_ms=1000) == -1
        # a follower that does not have the fetch offset yet, or no longer, is left out
        assert preferred_read_replica(selector, partition, "r2", 11, racks, now_ms=1000) == -1
        partition.record_follower_fetch(2, 10, 1000, log_start_offset=7)
        assert preferred_read_replica(selector, partition, "r2", 5, racks, now_ms=1000) == -1
        assert preferred_read_replica(selector, partition, "r2", 7, racks, now_ms=1000) == 2
    finally:
        partition.log.close()
