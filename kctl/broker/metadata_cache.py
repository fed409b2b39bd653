"""The broker's in-memory view of cluster metadata (brokers, controller, topics, partition states, the
brokers in controlled shutdown), loaded from the registry and refreshed when the registry reports a
change. Request handlers read only this cache; they never wait on ZooKeeper.

Refreshes are serialized (one at a time, reads and install together): the broker's coalesced
refresh on its event loop and the admin handlers' refresh in a worker thread read the registry in
turn, through one ZooKeeper session, so a refresh reads at least what the one before it read and a
refresh started earlier never installs its snapshot over a newer one. A broker never answers an
older view than one it answered before (kctl.broker.metadata_propagation relies on it).

Concurrency: every read (``topics``, ``topic``, ``partition_state``, ``brokers``, ``controller_id``)
takes the current immutable snapshot under ``_lock`` and is safe from any thread; ``refresh`` is
safe from any thread too (serialized by ``_refreshing``). The compaction and dir-move threads do
not use it."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from kctl.zk.model import BrokerRegistration, PartitionState, TopicRecord
from kctl.zk.registry import ClusterMembership, TopicStore

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class MetadataSnapshot:
    cluster_id: str
    controller_id: int | None
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    #: brokers that asked for a controlled shutdown (a leader never takes them into an ISR)
    shutting_down: frozenset[int] = frozenset()


class MetadataSource(TopicStore, ClusterMembership, Protocol):
    """The parts of the registry the cache is loaded from: the topics and their partition states,
    the brokers and the controller."""


class MetadataCache:
    def __init__(self, registry: MetadataSource) -> None:
        self._registry = registry
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # one refresh at a time: snapshots never go back
        self.snapshot = MetadataSnapshot(cluster_id="", controller_id=None)
        self._racks: tuple[MetadataSnapshot, dict[int, str | None]] = (self.snapshot, {})

    def refresh(self) -> MetadataSnapshot:
        """Reload everything from the registry (blocking; cheap for the embedded registry). Waits for
        a refresh under way in another thread, then reads anew: its snapshot is at least as new."""
        with self._refreshing:
            return self._refresh()

    def _refresh(self) -> MetadataSnapshot:
        registry = self._registry
        topics = registry.topics()
        deleted: set[str] = set()
        states = registry.partition_states_of(topics, deleted)  # one pipelined read in ZooKeeper
        for name in deleted:  # deleted since the list was read: gone from this snapshot too
            del topics[name]
        if deleted:
            states = {key: state for key, state in states.items() if key[0] not in deleted}
        snapshot = MetadataSnapshot(
            cluster_id=registry.cluster_id(),
            controller_id=registry.controller_id(),
            brokers={b.broker_id: b for b in registry.live_brokers()},
            topics=topics,
            topic_names={record.topic_id: name for name, record in topics.items()},
            states=states,
            shutting_down=frozenset(registry.controlled_shutdown_requests()),
        )
        with self._lock:
            self.snapshot = snapshot
        return snapshot

    # -- reads (from the current snapshot) -----------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self.snapshot.cluster_id

    @property
    def controller_id(self) -> int | None:
        return self.snapshot.controller_id

    def brokers(self) -> list[BrokerRegistration]:
        return sorted(self.snapshot.brokers.values(), key=lambda b: b.broker_id)

    def broker_racks(self) -> dict[int, str | None]:
        """The ``broker.rack`` of every live broker (None: none set), worked out once per snapshot
        (a leader asks on each fetch of a consumer that sends its rack, KIP-392)."""
        snapshot = self.snapshot
        cached = self._racks
        if cached[0] is not snapshot:
            cached = self._racks = (snapshot, {i: b.rack for i, b in snapshot.brokers.items()})
        return cached[1]

    def shutting_down(self, broker_id: int) -> bool:
        """Whether ``broker_id`` asked for a controlled shutdown (as of the last refresh)."""
        return broker_id in self.snapshot.shutting_down

    def topic(self, name: str) -> TopicRecord | None:
        return self.snapshot.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.snapshot.topic_names.get(topic_id)

    def topics(self) -> dict[str, TopicRecord]:
        return self.snapshot.topics

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.snapshot.states.get((topic, partition))
