"""OffsetForLeaderEpoch: where a leader epoch ends in the leader's log (KIP-101, KIP-279), answered
from the partition's leader epoch cache. Followers ask it after a leader change to find where their
log diverges from the new leader's; consumers (librdkafka, the Java client) ask it to detect log
truncation after a leader change.

Only the leader answers (NOT_LEADER_OR_FOLLOWER otherwise). The answer for an epoch is (the largest
epoch at or below it that the leader knows, the start offset of the next epoch) — for the leader's
latest epoch, its log end offset — and (-1, -1) for an epoch the leader cannot place. A current leader
epoch older than the partition's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH. With the
authorizer on, a principal holding ClusterAction on the cluster (a follower) is answered for every
topic, anyone else only for topics it may describe (TOPIC_AUTHORIZATION_FAILED), as Kafka does.

Versions: v0-4. v1+ answer with the epoch; v2+ carry the current leader epoch and answer with a
throttle time; v3+ carry the replica id (a follower's broker id, or -1 from a consumer); v4+ are
flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(0, 4))
async def handle(
    broker: PartitionServices, context: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = []
    # as Kafka (KIP-320): followers hold ClusterAction; consumers need Describe on each topic
    replica = context.allowed(
        AclOperation.CLUSTER_ACTION, AclResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    )
    for topic in request.topics:
        partitions = []
        describable = replica or context.allowed(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic.topic)
        for part in topic.partitions:
            if not describable:
                partitions.append(
                    EpochEndOffset(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        partition=part.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
                continue
            try:
                partition = broker.replicas.leader_partition(
                    TopicPartition(topic.topic, part.partition), part.current_leader_epoch
                )
                epoch, end_offset = partition.log.end_offset_for_epoch(part.leader_epoch)
                partitions.append(
                    EpochEndOffset(
                        error_code=0, partition=part.partition, leader_epoch=epoch, end_offset=end_offset
                    )
                )
            except ApiError as error:
                partitions.append(
                    EpochEndOffset(
                        error_code=error.code, partition=part.partition, leader_epoch=-1, end_offset=-1
                    )
                )
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
