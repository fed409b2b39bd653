"""A metadata sync skips what did not change (kctl.broker.applied_metadata): after a refresh that
changed one partition's state, only that partition goes through the leader/follower logic again,
and a topic's log config reaches the logs only when it changed. At 10,000 partitions every refresh
(one per batch of a failover's controller writes, one per CreateTopics anywhere in the cluster)
held the event loop for 0.3-0.5 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager
from kctl.common.topic_partition import TopicPartition
from kctl.log.manager import LogManager
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import BrokerRegistration, PartitionState, TopicRecord

COUNT = 6


class KeptRecords(EmbeddedRegistry):
    """Hands out the same topic record while the topic is unchanged, as ZooKeeper's kept reads do
    (the embedded registry builds new records on every read; its states are kept objects)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept: dict[str, TopicRecord] = {}

    def topics(self) -> dict[str, TopicRecord]:
        fresh = super().topics()
        for name, record in fresh.items():
            if self._kept.get(name) != record:
                self._kept[name] = record
        return {name: self._kept[name] for name in fresh}


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    registry = KeptRecords(tmp_path / "meta")
    registry.start()
    logs = LogManager([tmp_path / "logs"], broker_id=1, high_watermark_follows_log_end=False)
    for broker_id in (1, 2):
        registry.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id))
    registry.create_topic("t", {p: (1, 2) for p in range(COUNT)}, {"retention.ms": "1000"})
    for p in range(COUNT):
        registry.set_partition_state("t", p, PartitionState(leader=1, leader_epoch=0, isr=(1, 2)))
    metadata = MetadataCache(registry)
    metadata.refresh()
    replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True, now_ms=lambda: 0)
    applied: list[int] = []
    apply_state = replicas._apply_state
    monkeypatch.setattr(
        replicas,
        "_apply_state",
        lambda partition, *args: (
            applied.append(partition.topic_partition.partition),
            apply_state(partition, *args),
        ),
    )
    configs: list[str] = []
    update = logs.update_topic_config
    monkeypatch.setattr(
        logs, "update_topic_config", lambda name, config: (configs.append(name), update(name, config))
    )
    yield registry, metadata, replicas, logs, applied, configs
    logs.close()
    registry.close()


def test_only_what_changed_is_applied_again(setup: Any) -> None:
    registry, metadata, replicas, logs, applied, configs = setup
    replicas.sync()
    assert sorted(applied) == list(range(COUNT)) and configs == ["t"]
    assert all(replicas.partitions[TopicPartition("t", p)].is_leader for p in range(COUNT))
    applied.clear(), configs.clear()
    metadata.refresh()
    replicas.sync()  # nothing changed
    assert applied == [] and configs == []
    registry.set_partition_state("t", 3, PartitionState(leader=2, leader_epoch=1, isr=(2,)))
    metadata.refresh()
    replicas.sync()
    assert applied == [3] and configs == []
    moved = replicas.partitions[TopicPartition("t", 3)]
    assert not moved.is_leader and moved.leader_epoch == 1 and moved.isr == (2,)
    applied.clear()
    registry.set_topic_configs("t", {"retention.ms": "2000"})
    metadata.refresh()
    replicas.sync()  # a new record: its partitions are looked at again, the new config goes to the logs
    assert configs == ["t"]
    assert logs.get_log(TopicPartition("t", 0)).config.retention_ms == 2000
    applied.clear(), configs.clear()
    replicas.unfence()  # after a fence, everything is applied again
    replicas.sync()
    assert sorted(applied) == list(range(COUNT)) and configs == []


def test_a_partition_moved_outside_the_metadata_is_applied_again(setup: Any) -> None:
    """A partition whose leader epoch is not the one its unchanged state says (something else
    changed it) is not skipped."""
    _, _, replicas, _, applied, _ = setup
    replicas.sync()
    applied.clear()
    partition = replicas.partitions[TopicPartition("t", 2)]
    partition.make_follower(-1, partition.leader_epoch + 5, partition.isr, partition.replicas, 0, 0)
    replicas.sync()
    assert applied == [2]
