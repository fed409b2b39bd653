"""What the API handlers use of their broker, as narrow Protocols: one per family of APIs.

A handler module (kctl.broker.apis) types its ``broker`` argument with the Protocol of its family,
not with ``kctl.broker.broker.Broker``: it sees only the services it needs, it does not import the
module that imports it (no import circle), and a test can hand it anything with those attributes
(kctl.testing's in-process broker hands it a real ``Broker`` built without listeners). ``Broker``
satisfies every one of them; ``HandlerServices`` is their union, which the handler registry's type
(kctl.broker.apis.registry) and ``Broker`` are checked against by mypy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kctl.broker.config import BrokerConfig
    from kctl.broker.controller.controller import Controller
    from kctl.broker.dynamic_config import DynamicBrokerConfigs
    from kctl.broker.fetch_session import FetchSessionCache
    from kctl.broker.group.coordinator import GroupCoordinator
    from kctl.broker.log_dir_moves import LogDirMover
    from kctl.broker.loggers import BrokerLoggers
    from kctl.broker.metadata_cache import MetadataCache
    from kctl.broker.metadata_propagation import Expectations
    from kctl.broker.metrics import BrokerMetrics
    from kctl.broker.producer_ids import ProducerIdManager
    from kctl.broker.quotas import QuotaManager
    from kctl.broker.replica_manager import ReplicaManager
    from kctl.broker.security.manager import BrokerSecurity
    from kctl.broker.topics import TopicAdmin
    from kctl.broker.transaction.coordinator import TransactionCoordinator
    from kctl.broker.transaction.verification import TransactionVerifier
    from kctl.log.clock import Clock
    from kctl.log.manager import LogManager
    from kctl.zk import Registry


class VersionServices(Protocol):
    """ApiVersions."""

    @property
    def supported_versions(self) -> dict[int, tuple[int, int]]: ...


class SecurityServices(Protocol):
    """SASL, ACLs and SCRAM credentials."""

    @property
    def security(self) -> BrokerSecurity: ...


class QuotaServices(Protocol):
    """Client quotas."""

    @property
    def quotas(self) -> QuotaManager: ...


class GroupServices(Protocol):
    """The consumer group APIs and committed offsets."""

    @property
    def groups(self) -> GroupCoordinator: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metadata(self) -> MetadataCache: ...


class TransactionServices(Protocol):
    """Transactions, producer ids and FindCoordinator."""

    @property
    def transactions(self) -> TransactionCoordinator: ...
    @property
    def groups(self) -> GroupCoordinator: ...
    @property
    def producer_ids(self) -> ProducerIdManager: ...
    @property
    def metadata(self) -> MetadataCache: ...


class PartitionServices(Protocol):
    """The APIs on hosted partitions and log dirs (ListOffsets, DeleteRecords, log dir moves, ...)."""

    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def log_dir_moves(self) -> LogDirMover: ...


class ProduceServices(Protocol):
    """Produce."""

    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def metrics(self) -> BrokerMetrics: ...
    @property
    def quotas(self) -> QuotaManager: ...
    @property
    def topics(self) -> TopicAdmin: ...
    @property
    def txn_verifier(self) -> TransactionVerifier: ...


class FetchServices(Protocol):
    """Fetch: the partitions' reads and the long poll, fetch sessions, ACLs, quotas and the fetch metrics."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...
    @property
    def security(self) -> BrokerSecurity: ...
    @property
    def quotas(self) -> QuotaManager: ...
    @property
    def metrics(self) -> BrokerMetrics: ...


class TopicConfigServices(Protocol):
    """A topic's effective configs (DescribeConfigs, CreateTopics' answer)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...


class ClusterServices(Protocol):
    """Metadata, DescribeCluster, DescribeConfigs."""

    @property
    def broker_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def topics(self) -> TopicAdmin: ...
    @property
    def metrics(self) -> BrokerMetrics: ...
    @property
    def loggers(self) -> BrokerLoggers: ...


class TopicAdminServices(Protocol):
    """CreateTopics, CreatePartitions, DeleteTopics: change, then wait for every broker to serve it."""

    @property
    def broker_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def topics(self) -> TopicAdmin: ...
    @property
    def is_controller(self) -> bool: ...
    async def await_metadata(self, expected: Expectations, deadline: float) -> dict[str, str]: ...
    def on_metadata_changed(self) -> None: ...


class ConfigServices(Protocol):
    """AlterConfigs, IncrementalAlterConfigs (kctl.broker.config_alter)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def topics(self) -> TopicAdmin: ...
    @property
    def dynamic_configs(self) -> DynamicBrokerConfigs: ...
    def on_metadata_changed(self) -> None: ...


class ControllerServices(Protocol):
    """ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: requests for the
    controller, written to the registry."""

    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def is_controller(self) -> bool: ...
    @property
    def controller(self) -> Controller: ...


class HandlerServices(
    VersionServices,
    SecurityServices,
    QuotaServices,
    GroupServices,
    TransactionServices,
    PartitionServices,
    ProduceServices,
    FetchServices,
    ClusterServices,
    TopicAdminServices,
    ConfigServices,
    ControllerServices,
    Protocol,
):
    """Everything a handler may use: what the broker hands every handler."""
