"""ListOffsets: the earliest (-2), latest (-1), max-timestamp (-3) offset, or the first offset whose
timestamp is at or after a given time.

Versions: v0-9. v0 asks for several old-style offsets (answered with at most one); v1+ answer with one
offset and its timestamp; v2+ carry an isolation level; v4+ carry and answer with a leader epoch; v6+ are
flexible; v7+ may ask for the offset of the max timestamp (-3). A request with a replica id (>= 0)
comes from a follower, whose latest offset is the leader's log end offset (consumers: the high
watermark, or with isolation level 1, READ_COMMITTED, the last stable offset; a read_committed
timestamp lookup finds nothing at or above the last stable offset, as Kafka's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.partition import Partition
    from kctl.broker.request_context import RequestContext

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1
EARLIEST_LOCAL, LATEST_TIERED = -4, -5  # tiered storage (v8+/v9): no tiers here, the log is all local


def _lookup(
    partition: Partition, timestamp: int, follower: bool = False, committed: bool = False
) -> tuple[int, int]:
    """(offset, timestamp) for the request's timestamp; (-1, -1) when no record is that recent.
    The latest offset is the high watermark for a consumer (the last stable offset when ``committed``),
    the log end offset for a follower."""
    log = partition.log
    if timestamp == LATEST:
        if follower:
            return partition.log_end_offset, -1
        return (log.last_stable_offset if committed else partition.high_watermark), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return partition.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        max_timestamp, offset = log.max_timestamp_and_offset()
        return (offset, max_timestamp) if offset >= 0 else (-1, -1)
    found = log.offset_for_timestamp(timestamp)
    if found is None or (committed and found[0] >= log.last_stable_offset):
        return -1, -1
    return found


@api_handler(ApiKey.LIST_OFFSETS, versions=(0, 9))
async def handle(
    broker: PartitionServices, context: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    version = context.header.api_version
    topics = []
    for topic in request.topics:
        partitions = []
        describable = context.allowed(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic.name)
        for part in topic.partitions:
            try:
                if not describable:
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on the topic denied")
                if part.timestamp == MAX_TIMESTAMP and version < 7:
                    raise ApiError(ErrorCode.UNSUPPORTED_VERSION, "max timestamp needs ListOffsets v7+")
                partition = broker.replicas.leader_partition(
                    TopicPartition(topic.name, part.partition_index), part.current_leader_epoch
                )
                offset, timestamp = _lookup(
                    partition,
                    part.timestamp,
                    request.replica_id >= 0,
                    version >= 2 and request.isolation_level == READ_COMMITTED,
                )
                partitions.append(
                    ListOffsetsPartitionResponse(
                        partition_index=part.partition_index,
                        error_code=0,
                        old_style_offsets=[offset] if offset >= 0 else [],
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=partition.leader_epoch,
                    )
                )
            except ApiError as error:
                partitions.append(
                    ListOffsetsPartitionResponse(
                        partition_index=part.partition_index,
                        error_code=error.code,
                        old_style_offsets=[],
                    )
                )
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
