"""What the metrics read of their broker (``kctl.broker.broker.Broker`` is one): the Protocol the
collector and the leader-offsets poller are typed against, so neither imports the broker module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kctl.broker.controller import Controller
    from kctl.broker.group.coordinator import GroupCoordinator
    from kctl.broker.metadata_cache import MetadataCache
    from kctl.broker.quotas import QuotaManager
    from kctl.broker.replica_manager import ReplicaManager
    from kctl.broker.replication.channel import BrokerChannel
    from kctl.broker.server import KafkaServer
    from kctl.zk import Registry


class MetricsSource(Protocol):
    @property
    def broker_id(self) -> int: ...
    @property
    def replicated(self) -> bool: ...
    @property
    def servers(self) -> Sequence[KafkaServer]: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def groups(self) -> GroupCoordinator: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def quotas(self) -> QuotaManager: ...
    def channel_to(self, broker_id: int) -> BrokerChannel | None: ...
