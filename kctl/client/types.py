"""Small value types shared by the clients: the cluster metadata snapshot (``TopicPartition`` is
``kctl.common.topic_partition``'s; users import it from ``kctl.client``).

``ClusterMetadata`` is what a Metadata response says, as immutable objects: the brokers, the cluster
id, the controller and, per topic, its id, internal flag and partitions (leader, leader epoch,
replicas, in-sync replicas, offline replicas) with the error codes the broker gave.
"""

from __future__ import annotations

import dataclasses
import uuid

from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import error_name


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition's leadership and replicas. ``leader`` is -1 when it has none."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0

    @property
    def error(self) -> str | None:
        """Kafka's name of ``error_code``, or None when it is 0."""
        return error_name(self.error_code) if self.error_code else None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclasses.dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic as Metadata lists it; ``partitions`` are sorted by index."""

    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]
    error_code: int = 0

    @property
    def error(self) -> str | None:
        return error_name(self.error_code) if self.error_code else None

    def partition(self, index: int) -> PartitionMetadata | None:
        for p in self.partitions:
            if p.partition == index:
                return p
        return None

    @property
    def replication_factor(self) -> int:
        """The replica count of partition 0 (Kafka's tools show that one), 0 without partitions."""
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """A snapshot of the cluster: brokers by id, the controller, topics by name."""

    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicMetadata]

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def leader(self, tp: TopicPartition) -> int:
        """The leader's broker id of ``tp``, -1 when unknown."""
        topic = self.topics.get(tp.topic)
        part = topic.partition(tp.partition) if topic is not None else None
        return part.leader if part is not None else -1
