"""MetadataCache.refresh (kctl/broker/metadata_cache.py) against a registry whose topics change under
it: a topic deleted between the listing and the read of its partition states leaves the snapshot
(the refresh completes instead of failing, which skipped the whole update)."""

from __future__ import annotations

import uuid

from kctl.broker.metadata_cache import MetadataCache
from kctl.zk.model import PartitionState, TopicRecord, UnknownTopicError


class RacingRegistry:
    """Lists ``listed`` topics; reading the states of a name in ``deleted`` fails as ZooKeeper's does
    for a topic deleted after the listing."""

    def __init__(self, listed: list[str], deleted: set[str]) -> None:
        self.listed, self.deleted = listed, deleted

    def topics(self) -> dict[str, TopicRecord]:
        return {name: TopicRecord(name, uuid.uuid4(), {0: (1,)}) for name in self.listed}

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        if topic in self.deleted:
            raise UnknownTopicError(f"Topic '{topic}' does not exist.")
        return {0: PartitionState(leader=1, leader_epoch=0, isr=(1,))}

    def cluster_id(self) -> str:
        return "c"

    def controller_id(self) -> int | None:
        return 1

    def live_brokers(self) -> list[object]:
        return []

    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]:
        return {}


def test_a_topic_deleted_during_the_refresh_leaves_the_snapshot() -> None:
    cache = MetadataCache(RacingRegistry(["kept", "gone", "also-kept"], {"gone"}))  # type: ignore[arg-type]
    snapshot = cache.refresh()
    assert sorted(snapshot.topics) == ["also-kept", "kept"]
    assert sorted(snapshot.states) == [("also-kept", 0), ("kept", 0)]
    assert "gone" not in snapshot.topic_names.values()
    assert cache.snapshot is snapshot
