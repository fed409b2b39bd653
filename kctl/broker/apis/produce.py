"""Produce: append each partition's record batches (validated and offset-assigned as bytes) and
answer with the base offsets; acks=0 sends no response. With one replica per partition, acks=1 and
acks=-1 are both satisfied once the append returns.

Versions: v0-11. v0-2 carry the pre-0.11 message formats, which kctl does not store: each partition gets
UNSUPPORTED_VERSION (the versions are advertised because librdkafka before 2.11.1 requires them). v3+
carry record batches and a transactional id (transactions are not supported); v2+ answer with
log_append_time_ms, v5+ with the log start offset, v8+ with record errors and an error message; v9+ are
flexible."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.log.naming import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext

FIRST_RECORD_BATCH_VERSION = 3  # v0-2 carry the pre-0.11 message formats, which kctl does not store

log = logging.getLogger("kctl.broker.produce")


def _partition_response(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
        error_message=message,
    )


@api_handler(ApiKey.PRODUCE, versions=(0, 11))
async def handle(broker: Broker, context: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    version = context.header.api_version
    acks = request.acks
    responses = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            try:
                if acks not in (0, 1, -1):
                    raise ApiError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} must be 0, 1 or -1")
                if version < FIRST_RECORD_BATCH_VERSION:
                    raise ApiError(
                        ErrorCode.UNSUPPORTED_VERSION,
                        "Produce v0-2 (message format v0/v1) is not supported; use v3 or later",
                    )
                if data.records is None or len(data.records) == 0:
                    raise ApiError(ErrorCode.CORRUPT_MESSAGE, "no records")
                broker.ensure_topic_for_produce(topic.name)
                info = broker.replicas.append(tp, data.records)
            except ApiError as error:
                if error.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                    log.warning("produce to %s from %s rejected: %s", tp, context.client_host, error.message)
                partitions.append(_partition_response(data.index, error.code, error.message))
                continue
            partitions.append(
                PartitionProduceResponse(
                    index=data.index,
                    error_code=0,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time,
                    log_start_offset=info.log_start_offset,
                    record_errors=[],
                    error_message=None,
                )
            )
        responses.append(TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
