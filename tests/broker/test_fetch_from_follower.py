"""Fetch from the closest replica (KIP-392) in the replica manager: a consumer's Fetch v11+ (it
sends its rack, maybe empty) reads a follower's replica up to the follower's high watermark, with
Kafka's errors, and a leader with a replica selector answers it with a preferred read replica and no
records. Before v11, and for a follower's own fetches, only the leader serves. The follower's high
watermark comes from its leader's fetch responses and wakes the consumers parked on it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.broker.errors import ApiError
from kctl.broker.fetch_session import CachedPartition
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager
from kctl.broker.replica_selector import RackAwareReplicaSelector
from kctl.common.topic_partition import TopicPartition
from kctl.log.files import FileRegion
from kctl.log.manager import LogManager
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import iter_headers
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import BrokerRegistration, PartitionState

TP = TopicPartition("t", 0)
EPOCH = 4
RECORDS = 10  # on every replica
HIGH_WATERMARK = 6  # what the follower knows of it


def _batch(base_offset: int, count: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=EPOCH)
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


BATCHES = (_batch(0, HIGH_WATERMARK), _batch(HIGH_WATERMARK, RECORDS - HIGH_WATERMARK))


class Cluster:
    """Brokers 1, 2, 3 in racks r1, r2, r3; topic t, partition 0 on all three, led by broker 2
    (ISR all three); a replica manager for one of them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.registry = EmbeddedRegistry(tmp_path / "meta")
        self.registry.start()
        for broker_id in (1, 2, 3):
            self.registry.register_broker(
                BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id, rack=f"r{broker_id}")
            )
        self.registry.create_topic("t", {0: (2, 1, 3)}, {})
        self.registry.create_topic("u", {0: (2, 3)}, {})
        for topic in ("t", "u"):
            self.registry.set_partition_state(
                topic, 0, PartitionState(leader=2, leader_epoch=EPOCH, isr=(2, 1, 3))
            )
        self.metadata = MetadataCache(self.registry)
        self.metadata.refresh()
        self.logs: list[LogManager] = []

    def replicas(self, broker_id: int, *, selector: bool = False) -> ReplicaManager:
        logs = LogManager(
            [self.tmp_path / f"logs-{broker_id}"], broker_id=broker_id, high_watermark_follows_log_end=False
        )
        self.logs.append(logs)
        manager = ReplicaManager(
            broker_id,
            logs,
            self.metadata,
            registry=self.registry,
            replicated=True,
            now_ms=lambda: 1000,
            replica_selector=RackAwareReplicaSelector() if selector else None,
        )
        manager.sync()
        return manager

    def close(self) -> None:
        for logs in self.logs:
            logs.close()
        self.registry.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.close()


@pytest.fixture
def follower(cluster: Cluster) -> ReplicaManager:
    """Broker 1, a follower of t-0 holding RECORDS records, high watermark HIGH_WATERMARK."""
    replicas = cluster.replicas(1)
    partition = replicas.partitions[TP]
    assert not partition.is_leader
    for batch in BATCHES:
        partition.log.append_as_follower(batch)
    partition.follow_high_watermark(HIGH_WATERMARK)
    return replicas


def _last_offsets(region: FileRegion | None) -> list[int]:
    """The last offset of each batch a read found."""
    assert region is not None
    with region:
        data = region.read_bytes()
    return [header.last_offset for _, header in iter_headers(memoryview(data))]


def test_a_follower_serves_a_consumer_up_to_its_high_watermark(follower: ReplicaManager) -> None:
    read = follower.fetch(TP, 0, 1 << 20, client_rack="", current_leader_epoch=EPOCH)
    assert read.error_code == ErrorCode.NONE
    assert (read.high_watermark, read.log_start_offset) == (HIGH_WATERMARK, 0)
    assert read.preferred_read_replica == -1
    assert _last_offsets(read.records) == [HIGH_WATERMARK - 1]  # the first batch, not the second


def test_past_the_followers_high_watermark_is_no_records_yet(follower: ReplicaManager) -> None:
    for offset in (HIGH_WATERMARK, RECORDS - 1, RECORDS):
        read = follower.fetch(TP, offset, 1 << 20, client_rack="r1")
        assert (read.error_code, read.records, read.high_watermark) == (ErrorCode.NONE, None, HIGH_WATERMARK)


def test_out_of_the_followers_log_is_offset_out_of_range(follower: ReplicaManager) -> None:
    read = follower.fetch(TP, RECORDS + 1, 1 << 20, client_rack="r1")
    assert read.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_consumers_before_v11_and_followers_are_served_by_the_leader_only(follower: ReplicaManager) -> None:
    assert follower.fetch(TP, 0, 1 << 20).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert follower.fetch(TP, 0, 1 << 20, replica_id=3).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_list_offsets_and_offset_for_leader_epoch_stay_the_leaders(follower: ReplicaManager) -> None:
    """Both handlers take the partition from ``leader_partition``: a follower refuses consumers."""
    with pytest.raises(ApiError) as refused:
        follower.leader_partition(TP, EPOCH)
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert follower.readable_partition(TP, EPOCH) is follower.partitions[TP]


def test_leader_epoch_checks_on_a_follower(follower: ReplicaManager) -> None:
    fenced = follower.fetch(TP, 0, 1 << 20, client_rack="", current_leader_epoch=EPOCH - 1)
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
    unknown = follower.fetch(TP, 0, 1 << 20, client_rack="", current_leader_epoch=EPOCH + 1)
    assert unknown.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_broker_that_is_no_replica_or_is_fenced(follower: ReplicaManager) -> None:
    not_replica = follower.fetch(TopicPartition("u", 0), 0, 1 << 20, client_rack="r1")
    assert not_replica.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    unknown = follower.fetch(TopicPartition("nope", 0), 0, 1 << 20, client_rack="r1")
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    follower.fence()
    assert follower.fetch(TP, 0, 1 << 20, client_rack="r1").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def _leader(cluster: Cluster, *, selector: bool) -> ReplicaManager:
    """Broker 2, leading t-0 with RECORDS records that both followers have fetched."""
    leader = cluster.replicas(2, selector=selector)
    for batch in BATCHES:
        leader.append(TP, batch)
    for replica in (1, 3):
        leader.record_follower_fetch(leader.partitions[TP], replica, RECORDS, 0)
    assert leader.partitions[TP].high_watermark == RECORDS
    return leader


def test_the_leader_names_the_follower_in_the_consumers_rack(cluster: Cluster) -> None:
    leader = _leader(cluster, selector=True)
    read = leader.fetch(TP, 0, 1 << 20, client_rack="r1", current_leader_epoch=EPOCH)
    assert (read.error_code, read.preferred_read_replica, read.records) == (ErrorCode.NONE, 1, None)
    assert (read.high_watermark, read.log_start_offset) == (RECORDS, 0)
    served = leader.fetch(TP, 0, 1 << 20, client_rack="r2")  # the leader's own rack
    assert served.preferred_read_replica == -1
    assert _last_offsets(served.records) == [HIGH_WATERMARK - 1, RECORDS - 1]
    before_v11 = leader.fetch(TP, 0, 1 << 20)
    assert before_v11.preferred_read_replica == -1
    assert _last_offsets(before_v11.records) == [HIGH_WATERMARK - 1, RECORDS - 1]


def test_without_a_selector_the_leader_serves_every_rack(cluster: Cluster) -> None:
    leader = _leader(cluster, selector=False)
    read = leader.fetch(TP, 0, 1 << 20, client_rack="r1")
    assert read.preferred_read_replica == -1
    assert _last_offsets(read.records) == [HIGH_WATERMARK - 1, RECORDS - 1]


def test_an_incremental_session_always_carries_a_preferred_replica() -> None:
    cached = CachedPartition(("t", 0), TP, uuid.UUID(int=0), 0, -1, 1 << 20)
    assert cached.changed(ErrorCode.NONE, 0, 5, 5, 0)
    assert not cached.changed(ErrorCode.NONE, 0, 5, 5, 0)
    assert cached.changed(ErrorCode.NONE, 0, 5, 5, 0, preferred_read_replica=3)


def test_the_leaders_high_watermark_wakes_consumers_parked_on_the_follower(follower: ReplicaManager) -> None:
    partition = follower.partitions[TP]

    async def scenario() -> None:
        parked = asyncio.ensure_future(follower.wait_for_append([partition], 30.0))
        await asyncio.sleep(0)
        partition.follow_high_watermark(HIGH_WATERMARK)  # unchanged: stays parked
        await asyncio.sleep(0)
        assert not parked.done()
        partition.follow_high_watermark(RECORDS)
        await asyncio.wait_for(parked, 5.0)
        assert partition.high_watermark == RECORDS

    asyncio.run(scenario())
