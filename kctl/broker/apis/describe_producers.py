"""DescribeProducers: the active producers of partitions this broker leads, from each log's
producer state — producer id and epoch, the last sequence written and its batch's timestamp, the epoch
of the coordinator that wrote its last marker and the first offset of its ongoing transaction (-1 when
none). Needs READ on the topic (TOPIC_AUTHORIZATION_FAILED); a partition this broker does not lead is
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.

Versions: v0 only (flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.describe_producers import (
    DescribeProducersPartitionResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeProducersTopicResponse,
    ProducerState,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext


def _producers(broker: PartitionServices, tp: TopicPartition) -> list[ProducerState]:
    partition = broker.replicas.leader_partition(tp)
    producers = partition.log.producer_state.producers
    return [
        ProducerState(
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.batches[-1].max_timestamp if entry.batches else -1,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.current_txn_first_offset,
        )
        for producer_id, entry in sorted(producers.items())
    ]


@api_handler(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0))
async def handle(
    broker: PartitionServices, context: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics = []
    for topic in request.topics:
        readable = context.allowed(AclOperation.READ, AclResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            code, message, producers = ErrorCode.NONE, None, []
            try:
                if not readable:
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"READ on {topic.name!r} denied")
                producers = _producers(broker, TopicPartition(topic.name, index))
            except ApiError as error:
                code, message = error.code, error.message
            partitions.append(
                DescribeProducersPartitionResponse(
                    partition_index=index, error_code=code, error_message=message, active_producers=producers
                )
            )
        topics.append(DescribeProducersTopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
