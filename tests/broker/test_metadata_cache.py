"""MetadataCache.refresh (kctl/broker/metadata_cache.py) against a registry whose topics change under
it: a topic deleted between the listing and the read of its partition states leaves the snapshot
(the refresh completes instead of failing, which skipped the whole update); and two refreshes in
two threads install their snapshots in the order they read them (never an older one last)."""

from __future__ import annotations

import threading
import uuid

from kctl.broker.metadata_cache import MetadataCache
from kctl.testing import wait_for
from kctl.zk.model import PartitionState, TopicRecord, UnknownTopicError
from kctl.zk.registry import TopicStore


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

    def partition_states_of(
        self, topics: dict[str, TopicRecord], deleted: set[str] | None = None
    ) -> dict[tuple[str, int], PartitionState]:
        return TopicStore.partition_states_of(self, topics, deleted)  # type: ignore[arg-type]

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


class SlowFirstReader(RacingRegistry):
    """The first refresh lists topic ``a`` and then stalls (until ``release`` is set) before it
    reads the rest; a refresh after it lists ``a`` and ``b`` (created meanwhile)."""

    def __init__(self) -> None:
        super().__init__([], set())
        self.release = threading.Event()
        self.first: threading.Thread | None = None

    def topics(self) -> dict[str, TopicRecord]:
        if self.first is None:
            self.first = threading.current_thread()
            self.listed = ["a"]
        else:
            self.listed = ["a", "b"]
        return super().topics()

    def cluster_id(self) -> str:
        if threading.current_thread() is self.first:
            assert self.release.wait(10), "never released"
        return "c"


def test_a_refresh_started_earlier_never_installs_over_a_newer_one() -> None:
    """Two refreshes in two threads (the broker's coalesced refresh and an admin handler's): the one
    that read first must not install its snapshot after the one that read later."""
    registry = SlowFirstReader()
    cache = MetadataCache(registry)  # type: ignore[arg-type]
    earlier = threading.Thread(target=cache.refresh)
    earlier.start()
    wait_for(lambda: registry.first is not None, "the first refresh listing the topics")
    later = threading.Thread(target=cache.refresh)
    later.start()
    later.join(timeout=0.5)  # bounded: with serialized refreshes it waits for the first one
    registry.release.set()
    earlier.join(timeout=10)
    later.join(timeout=10)
    assert not earlier.is_alive() and not later.is_alive()
    assert sorted(cache.snapshot.topics) == ["a", "b"]
