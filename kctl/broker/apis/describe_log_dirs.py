"""DescribeLogDirs: this broker's log directories, the partitions each holds, their size on disk and
the volume's total and usable bytes. An offline log directory (its disk failed) answers
KAFKA_STORAGE_ERROR with no partitions, as Kafka's.

A partition moving to another directory (AlterReplicaLogDirs) is also listed there as a future
replica (is_future_key), with the bytes copied so far.

Versions: v0-4. v2+ are flexible; v3+ answer with a top-level error code; v4+ with each log directory's
total and usable bytes."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.log_dir_moves import MoveProgress
from kctl.broker.partition import Partition
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext


def _wanted(request: DescribeLogDirsRequest) -> Callable[[TopicPartition], bool]:
    """A predicate on topic partitions: every one when the request's topics are null."""
    if request.topics is None:
        return lambda tp: True
    names = {(t.topic, p) for t in request.topics for p in t.partitions}
    return lambda tp: (tp.topic, tp.partition) in names


def _partition_entry(partition: Partition) -> DescribeLogDirsPartition:
    return DescribeLogDirsPartition(
        partition_index=partition.topic_partition.partition,
        partition_size=partition.log.size_in_bytes,
        offset_lag=max(0, partition.high_watermark - partition.log_end_offset),
        is_future_key=False,
    )


def _dir_result(
    log_dir: Path, partitions: list[Partition], futures: list[MoveProgress], offline: bool
) -> DescribeLogDirsResult:
    try:
        if offline:  # its disk failed (KIP-112): as Kafka, the error and no partitions
            raise OSError(f"{log_dir} is offline")
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return DescribeLogDirsResult(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir), topics=[]
        )
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for partition in sorted(partitions, key=lambda p: p.topic_partition):
        by_topic.setdefault(partition.topic_partition.topic, []).append(_partition_entry(partition))
    for future in futures:  # a move to this directory in progress (AlterReplicaLogDirs)
        by_topic.setdefault(future.topic_partition.topic, []).append(
            DescribeLogDirsPartition(
                partition_index=future.topic_partition.partition,
                partition_size=future.size,
                offset_lag=future.offset_lag,
                is_future_key=True,
            )
        )
    return DescribeLogDirsResult(
        error_code=0,
        log_dir=str(log_dir),
        topics=[DescribeLogDirsTopic(name=name, partitions=ps) for name, ps in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )


@api_handler(ApiKey.DESCRIBE_LOG_DIRS, versions=(0, 4))
async def handle(
    broker: PartitionServices, context: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not context.allowed(AclOperation.DESCRIBE, AclResourceType.CLUSTER, CLUSTER_NAME):
        # as Kafka: no directories, and (v3+) CLUSTER_AUTHORIZATION_FAILED
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    wanted = _wanted(request)
    log_dirs: list[Path] = list(broker.logs.log_dirs)
    hosted: dict[Path, list[Partition]] = {log_dir: [] for log_dir in log_dirs}
    partitions: dict[TopicPartition, Partition] = broker.replicas.partitions
    for tp, partition in partitions.items():
        if wanted(tp):
            hosted.setdefault(partition.log.directory.parent, []).append(partition)
    futures: dict[Path, list[MoveProgress]] = {}
    for move in broker.log_dir_moves.in_progress():
        if wanted(move.topic_partition):
            futures.setdefault(move.destination, []).append(move)
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=0,
        results=[
            _dir_result(log_dir, ps, futures.get(log_dir, []), log_dir in broker.logs.offline_dirs)
            for log_dir, ps in hosted.items()
        ],
    )
