"""How a broker builds its ``ReplicaManager`` from its configuration: in cluster mode the replica
fetchers (``replica.fetch.*``, ``replica.socket.timeout.ms``, the follower's throttle) that copy the
partitions it follows from their leaders; in every mode the hosted partitions, the leader's
throttle of its followers and the replica selector (``replica.selector.class``, KIP-392) that names
consumers their preferred read replica."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kctl.broker.config import BrokerConfig
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager, ReplicaRegistry
from kctl.broker.replica_selector import replica_selector
from kctl.broker.replication.fetcher import ChannelFactory, FetcherSettings, ReplicaFetcherManager
from kctl.broker.replication.throttle import ReplicationQuota
from kctl.log.files import LogStorageError
from kctl.log.manager import LogManager


def build_replica_manager(
    config: BrokerConfig,
    logs: LogManager,
    metadata: MetadataCache,
    registry: ReplicaRegistry | None,
    *,
    channel_for: ChannelFactory,
    on_isr_conflict: Callable[[], None],
    on_disk_failure: Callable[[Path, LogStorageError], None],
    leader_quota: ReplicationQuota,
) -> ReplicaManager:
    """The broker's replica manager; ``registry`` given in cluster mode (replicated partitions, one
    fetcher per leader reached through ``channel_for``), None for the embedded single broker."""
    broker_id = config.broker_id
    fetchers = None
    if registry is not None:
        settings = FetcherSettings(
            broker_id=broker_id,
            wait_max_ms=config["replica.fetch.wait.max.ms"],
            socket_timeout_ms=config["replica.socket.timeout.ms"],
            min_bytes=config["replica.fetch.min.bytes"],
            max_bytes=config["replica.fetch.max.bytes"],
            response_max_bytes=config["replica.fetch.response.max.bytes"],
            backoff_ms=config["replica.fetch.backoff.ms"],
            quota=ReplicationQuota("follower", lambda: config["follower.replication.throttled.rate"]),
            on_disk_failure=on_disk_failure,
        )
        fetchers = ReplicaFetcherManager(settings, channel_for)
    return ReplicaManager(
        broker_id,
        logs,
        metadata,
        registry=registry,
        fetchers=fetchers,
        replicated=registry is not None,
        on_isr_conflict=on_isr_conflict,
        on_disk_failure=on_disk_failure,
        leader_quota=leader_quota,
        replica_selector=replica_selector(config["replica.selector.class"]),
    )
