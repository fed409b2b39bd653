"""WriteTxnMarkers: the transaction coordinator's request to the partition leaders to end a producer's
transaction with a COMMIT or ABORT control batch (:meth:`kctl.log.log.Log.append_control_marker`).

Inter-broker: needs CLUSTER_ACTION on the cluster (else every partition answers
CLUSTER_AUTHORIZATION_FAILED). Each partition answers on its own: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (the marker's producer epoch is older than the
partition's), TRANSACTION_COORDINATOR_FENCED (its coordinator epoch is older than the last marker's),
KAFKA_STORAGE_ERROR; NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT when, in a cluster, the marker
is not replicated to the ISR within ``request.timeout.ms`` (markers are written with acks=all, as Kafka
does). A marker makes read_committed fetches parked on the partition re-read it.

Versions: v0-1; v1+ are flexible, otherwise the same."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import PartitionServices
    from kctl.broker.request_context import RequestContext

REPLICATION_TIMEOUT_S = 30.0  # Kafka waits request.timeout.ms (30 s by default) for acks=all


@api_handler(ApiKey.WRITE_TXN_MARKERS, versions=(0, 1))
async def handle(
    broker: PartitionServices, context: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    authorized = context.allowed(AclOperation.CLUSTER_ACTION, AclResourceType.CLUSTER, CLUSTER_NAME)
    replicas = broker.replicas
    results = []
    waits: list[tuple[WritableTxnMarkerPartitionResult, TopicPartition, int]] = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                result = WritableTxnMarkerPartitionResult(partition_index=index, error_code=ErrorCode.NONE)
                partitions.append(result)
                if not authorized:
                    result.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    continue
                tp = TopicPartition(topic.name, index)
                try:
                    info = replicas.append_marker(
                        tp,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.coordinator_epoch,
                        marker.transaction_result,
                    )
                except ApiError as error:
                    result.error_code = error.code
                    continue
                if replicas.replicated:
                    waits.append((result, tp, info.last_offset + 1))
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    if waits:
        codes = await asyncio.gather(
            *(replicas.wait_for_replication(tp, offset, REPLICATION_TIMEOUT_S) for _, tp, offset in waits)
        )
        for (result, _, _), code in zip(waits, codes, strict=True):
            result.error_code = code
    return WriteTxnMarkersResponse(markers=results)
