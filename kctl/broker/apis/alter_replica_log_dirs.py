"""AlterReplicaLogDirs: move replicas hosted by this broker to another of its log directories. The
answer comes at once; each move runs in the background while the partition keeps serving (a future
replica copied, then swapped in: kctl.broker.log_dir_moves) and shows in DescribeLogDirs as a future
replica until it is done. A directory that is not one of this broker's is LOG_DIR_NOT_FOUND, a
partition it does not host REPLICA_NOT_AVAILABLE. Needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED).

Versions: v0-2. v1 is v0 on the wire; v2+ are flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.common.topic_partition import TopicPartition
from kctl.log.dir_move import LogDirNotFoundError
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(0, 2))
async def handle(
    broker: PartitionServices, context: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    permitted = context.allowed(AclOperation.ALTER, AclResourceType.CLUSTER, CLUSTER_NAME)
    mover = broker.log_dir_moves
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for directory in request.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                tp = TopicPartition(topic.name, index)
                code = ErrorCode.NONE
                if not permitted:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif tp not in broker.replicas.partitions:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                else:
                    try:
                        mover.start(tp, directory.path)
                    except LogDirNotFoundError:
                        code = ErrorCode.LOG_DIR_NOT_FOUND
                    except KeyError:
                        code = ErrorCode.REPLICA_NOT_AVAILABLE
                    except OSError:
                        code = ErrorCode.KAFKA_STORAGE_ERROR
                results.setdefault(topic.name, []).append(
                    AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps) for t, ps in results.items()],
    )
