"""Cluster admin calls: describe the cluster (DescribeCluster, else Metadata: id, controller,
brokers) and the brokers' log directories (DescribeLogDirs: replicas and their size on disk)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from kctl.client.admin.base import AdminBase
from kctl.client.admin.results import ClusterDescription, LogDirDescription, ReplicaLogInfo
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
)
from kctl.client.types import BrokerInfo, TopicPartition
from kctl.protocol import ApiKey
from kctl.protocol.messages.describe_cluster import DescribeClusterRequest
from kctl.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest


class ClusterAdmin(AdminBase):
    """The cluster and its brokers' log directories (see the module docstring)."""

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster, else Metadata)."""
        deadline = self._deadline(timeout)

        def call() -> ClusterDescription:
            conn = self.cluster.any_connection(deadline=deadline)
            if conn.supports(ApiKey.DESCRIBE_CLUSTER):
                r = conn.request(
                    ApiKey.DESCRIBE_CLUSTER,
                    DescribeClusterRequest(include_cluster_authorized_operations=False),
                    timeout=deadline.timeout(self.config.request_timeout),
                )
                if r.error_code:
                    raise BrokerResponseError(r.error_code, r.error_message, context="DescribeCluster")
                brokers = tuple(
                    sorted(
                        (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in r.brokers),
                        key=lambda b: b.node_id,
                    )
                )
                return ClusterDescription(r.cluster_id, r.controller_id, brokers)
            metadata = self.cluster.refresh_metadata([], deadline=deadline)
            return ClusterDescription(
                metadata.cluster_id,
                metadata.controller_id,
                tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
            )

        return self.cluster.retry(call, deadline=deadline)

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        topic_partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """The log directories of brokers (DescribeLogDirs, to each broker; all brokers by default)
        and, in each, the replicas of ``topic_partitions`` (all partitions by default) with their
        size on disk. Raises if a broker cannot be asked by the deadline."""
        deadline = self._deadline(timeout)
        if brokers is None:
            brokers = [b.node_id for b in self.describe_cluster(timeout=deadline.remaining()).brokers]
        topics: list[DescribableLogDirTopic] | None = None
        if topic_partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in topic_partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [
                DescribableLogDirTopic(topic=t, partitions=sorted(set(ps))) for t, ps in by_topic.items()
            ]
            if not topics:
                return {broker_id: [] for broker_id in brokers}
        request = DescribeLogDirsRequest(topics=topics)

        def ask(broker_id: int) -> list[LogDirDescription]:
            conn = self.cluster.connection(broker_id, deadline=deadline)
            if not conn.supports(ApiKey.DESCRIBE_LOG_DIRS):
                raise IncompatibleBrokerError(f"broker {broker_id} does not answer DescribeLogDirs")
            r = conn.request(
                ApiKey.DESCRIBE_LOG_DIRS, request, timeout=deadline.timeout(self.config.request_timeout)
            )
            if r.error_code:
                raise BrokerResponseError(
                    r.error_code, None, context=f"DescribeLogDirs on broker {broker_id}"
                )
            return [_log_dir(broker_id, result) for result in r.results]

        return {
            broker_id: self.cluster.retry(functools.partial(ask, broker_id), deadline=deadline)
            for broker_id in sorted(set(brokers))
        }




def _log_dir(broker_id: int, result: Any) -> LogDirDescription:
    replicas = sorted(
        (
            ReplicaLogInfo(
                TopicPartition(t.name, p.partition_index), p.partition_size, p.offset_lag, p.is_future_key
            )
            for t in result.topics
            for p in t.partitions
        ),
        key=lambda r: (r.topic_partition, r.is_future),
    )
    return LogDirDescription(
        broker_id=broker_id,
        path=result.log_dir,
        replicas=tuple(replicas),
        total_bytes=result.total_bytes,
        usable_bytes=result.usable_bytes,
        error_code=result.error_code,
    )
