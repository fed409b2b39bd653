"""DeleteRecords: raise a partition's log start offset (-1 means the high watermark); whole segments
below it are deleted at once. As in Kafka, only a topic whose cleanup.policy includes ``delete`` may
have records deleted: a compact-only one answers POLICY_VIOLATION.

Versions: v0-2. The versions differ only in encoding (v2 is flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.log.log import OffsetOutOfRangeError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DELETE_RECORDS, versions=(0, 2))
async def handle(
    broker: PartitionServices, context: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            try:
                context.require(AclOperation.DELETE, AclResourceType.TOPIC, topic.name)
                partition = broker.replicas.leader_partition(TopicPartition(topic.name, part.partition_index))
                if not partition.log.config.delete:
                    raise ApiError(
                        ErrorCode.POLICY_VIOLATION,
                        f"records of {topic.name}-{part.partition_index} cannot be deleted: "
                        "its cleanup.policy does not include delete",
                    )
                offset = partition.high_watermark if part.offset == -1 else part.offset
                if offset < 0 or offset > partition.high_watermark:
                    raise ApiError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"offset {offset} is above the high watermark {partition.high_watermark}",
                    )
                try:
                    partition.log.maybe_increment_log_start_offset(offset)
                except OffsetOutOfRangeError as error:
                    raise ApiError(ErrorCode.OFFSET_OUT_OF_RANGE, str(error)) from None
                partition.log.delete_old_segments(retention_ms=-1, retention_bytes=-1)
                partitions.append(
                    DeleteRecordsPartitionResult(
                        partition_index=part.partition_index,
                        low_watermark=partition.log_start_offset,
                        error_code=0,
                    )
                )
            except ApiError as error:
                partitions.append(
                    DeleteRecordsPartitionResult(
                        partition_index=part.partition_index, low_watermark=-1, error_code=error.code
                    )
                )
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
