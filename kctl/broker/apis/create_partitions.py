"""CreatePartitions (answered by the controller): raise a topic's partition count.

Versions: v0-3. The versions differ only in encoding (v2+ are flexible); the request and the answer are
the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.security.acls import require
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext


@api_handler(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def handle(
    broker: Broker, context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    results = []
    for topic in request.topics:
        try:
            require(broker, context, AclOperation.ALTER, AclResourceType.TOPIC, topic.name)
            if not broker.is_controller:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            assignment = [tuple(a.broker_ids) for a in topic.assignments] if topic.assignments else None
            broker.topics.create_partitions(
                topic.name, topic.count, assignment, validate_only=request.validate_only
            )
            broker.on_metadata_changed()
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=0))
        except ApiError as error:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=error.code, error_message=error.message
                )
            )
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
