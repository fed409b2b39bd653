"""Cluster admin calls: describe the cluster (DescribeCluster, else Metadata: id, controller,
brokers) and the brokers' log directories (DescribeLogDirs: replicas and their size on disk).

``log_dirs_by_broker`` answers for every broker it can: a broker that is not in the cluster, or
does not answer (given up after ``request.timeout.ms``, see ``kctl.client.admin.base``), gets its
error in its ``BrokerLogDirs`` while the others' log dirs are still returned;
``describe_log_dirs`` raises the first such error instead."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

from kctl.client.admin.base import AdminBase
from kctl.client.admin.results import ClusterDescription, LogDirDescription, ReplicaLogInfo
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaError,
)
from kctl.client.types import BrokerInfo
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.describe_cluster import DescribeClusterRequest
from kctl.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest


@dataclasses.dataclass(frozen=True)
class BrokerLogDirs:
    """One broker's log directories, or why it gave none (``error``: BROKER_NOT_AVAILABLE when it
    is not in the cluster, ``BrokerNotAnsweringError``, or its DescribeLogDirs failed)."""

    broker_id: int
    log_dirs: tuple[LogDirDescription, ...] = ()
    error: KafkaError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


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
        size on disk. Raises the first error of a broker that cannot be asked (``log_dirs_by_broker``
        answers for the others too)."""
        answers = self.log_dirs_by_broker(brokers, topic_partitions, timeout=timeout)
        for answer in answers.values():
            if answer.error is not None:
                raise answer.error
        return {broker_id: list(answer.log_dirs) for broker_id, answer in answers.items()}

    def log_dirs_by_broker(
        self,
        brokers: Iterable[int] | None = None,
        topic_partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[int, BrokerLogDirs]:
        """Each broker's log directories (DescribeLogDirs; all brokers of the cluster by default),
        with the replicas of ``topic_partitions`` (all partitions by default) and their size on
        disk — or the error that broker gave: not in the cluster (at once), not answering (given up
        after ``request.timeout.ms``), or a failed request."""
        deadline = self._deadline(timeout)
        live = [b.node_id for b in self.describe_cluster(timeout=deadline.remaining()).brokers]
        wanted = live if brokers is None else sorted(set(brokers))
        topics: list[DescribableLogDirTopic] | None = None
        if topic_partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in topic_partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [
                DescribableLogDirTopic(topic=t, partitions=sorted(set(ps))) for t, ps in by_topic.items()
            ]
            if not topics:
                return {broker_id: BrokerLogDirs(broker_id) for broker_id in wanted}
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

        answers: dict[int, BrokerLogDirs] = {}
        for broker_id in wanted:
            if broker_id not in live:
                missing = BrokerResponseError(
                    ErrorCode.BROKER_NOT_AVAILABLE,
                    f"broker {broker_id} is not in the cluster (its brokers: {', '.join(map(str, live))})",
                )
                answers[broker_id] = BrokerLogDirs(broker_id, error=missing)
                continue
            try:
                dirs = self.cluster.retry(functools.partial(ask, broker_id), deadline=deadline)
            except KafkaError as error:
                answers[broker_id] = BrokerLogDirs(broker_id, error=error)
            else:
                answers[broker_id] = BrokerLogDirs(broker_id, tuple(dirs))
        return answers




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
