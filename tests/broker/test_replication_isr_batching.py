"""A leader's ISR changes go to the registry in batches (Kafka's AlterPartitionManager): while one
write is in flight, the changes decided meanwhile wait and go together in the next. A leader of a
wide topic whose follower caught up on every partition at once made one registry write per
partition before, slow enough under load that the follower fell out of the ISR again before the
last one was written (a 600-partition cluster test never saw every ISR complete)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from replication_support import TP, three_replicas

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager
from kctl.common.topic_partition import TopicPartition
from kctl.log.manager import LogManager
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import BrokerRegistration, PartitionState, PartitionStateUpdate

COUNT = 50


class CountingIsrWrites(EmbeddedRegistry):
    """An embedded registry that counts the leaders' ISR writes and holds the first until released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.batches: list[list[PartitionStateUpdate]] = []

    def alter_partition_states(self, updates: list[PartitionStateUpdate]) -> Any:
        self.batches.append(list(updates))
        if len(self.batches) == 1:
            assert self.release.wait(10), "the first ISR write was never released"
        return super().alter_partition_states(updates)


async def _until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def test_isr_changes_decided_during_a_write_go_in_the_next_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        registry = CountingIsrWrites(tmp_path / "meta")
        registry.start()
        logs = LogManager([tmp_path / "logs"], broker_id=1, high_watermark_follows_log_end=False)
        try:
            for broker_id in (1, 2):
                registry.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id))
            registry.create_topic("wide", {p: (1, 2) for p in range(COUNT)}, {})
            for p in range(COUNT):
                registry.set_partition_state("wide", p, PartitionState(leader=1, leader_epoch=0, isr=(1,)))
            metadata = MetadataCache(registry)
            metadata.refresh()
            replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True)
            replicas.sync()  # creates the logs a slice at a time
            await _until(lambda: len(replicas.partitions) == COUNT)
            partitions = [replicas.partitions[TopicPartition("wide", p)] for p in range(COUNT)]

            replicas.record_follower_fetch(partitions[0], 2, 0)  # caught up: the first write, held
            await _until(lambda: len(registry.batches) == 1)
            for partition in partitions[1:]:  # the follower catches up on the rest meanwhile
                replicas.record_follower_fetch(partition, 2, 0)
                assert partition.isr_update_pending
            registry.release.set()
            await _until(lambda: not any(p.isr_update_pending for p in partitions))

            assert [len(batch) for batch in registry.batches] == [1, COUNT - 1]
            assert all(p.isr == (1, 2) for p in partitions)
            stored = registry.partition_states("wide")
            assert all(stored[p].isr == (1, 2) and stored[p].partition_epoch == 1 for p in range(COUNT))
            await replicas.close()
        finally:
            logs.close()
            registry.close()

    asyncio.run(scenario())


def test_a_change_that_lost_a_race_asks_for_a_metadata_read_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        registry = EmbeddedRegistry(tmp_path / "meta")
        registry.start()
        logs = LogManager([tmp_path / "logs"], broker_id=1, high_watermark_follows_log_end=False)
        conflicts: list[int] = []
        try:
            for broker_id in (1, 2):
                registry.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id))
            registry.create_topic("t", {0: (1, 2), 1: (1, 2)}, {})
            for p in (0, 1):
                registry.set_partition_state("t", p, PartitionState(leader=1, leader_epoch=0, isr=(1,)))
            metadata = MetadataCache(registry)
            metadata.refresh()
            replicas = ReplicaManager(
                1,
                logs,
                metadata,
                registry=registry,
                replicated=True,
                on_isr_conflict=lambda: conflicts.append(1),
            )
            replicas.sync()
            first, second = (replicas.partitions[TopicPartition("t", p)] for p in (0, 1))
            # the controller moves partition 0 on behind the leader's back
            registry.set_partition_state("t", 0, PartitionState(leader=1, leader_epoch=0, isr=(1,)))
            replicas.record_follower_fetch(first, 2, 0)
            replicas.record_follower_fetch(second, 2, 0)
            await _until(lambda: not first.isr_update_pending and not second.isr_update_pending)

            assert conflicts == [1]
            assert first.isr == (1,) and second.isr == (1, 2)
            assert registry.partition_states("t")[1].isr == (1, 2)
            await replicas.close()
        finally:
            logs.close()
            registry.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("removing", [(2,), ()])
def test_a_replica_being_removed_is_not_written_back_into_the_isr(
    tmp_path: Path, removing: tuple[int, ...]
) -> None:
    """The torn view a refresh can read in the middle of a reassignment's completion: the partition
    state the controller wrote first (leader 1, ISR [1, 3], replica 2 gone) with the topic znode of
    before (replicas [1, 2, 3], 2 being removed). Broker 2, not yet told, fetches caught up: the
    leader must not write it back into the ISR (a CI run's reassignment never finished so). Without
    the removal (the control case) the same fetch adds it."""

    async def scenario() -> None:
        with three_replicas(tmp_path, PartitionState(leader=1, leader_epoch=2, isr=(1, 3))) as (
            registry,
            logs,
        ):
            metadata = MetadataCache(registry)
            metadata.refresh()
            torn = dataclasses.replace(
                metadata.topics()[TP.topic], removing_replicas={TP.partition: removing}
            )
            metadata.topics = lambda: {TP.topic: torn}  # type: ignore[method-assign]
            replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True)
            replicas.sync()
            partition = replicas.partitions[TP]
            assert partition.is_leader and partition.isr == (1, 3)
            replicas.record_follower_fetch(partition, 2, 0)  # broker 2 at the log end
            assert partition.isr_update_pending is (not removing)
            await replicas.close()

    asyncio.run(scenario())
