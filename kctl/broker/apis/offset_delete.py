"""OffsetDelete: delete a group's committed offsets for topics its members do not subscribe to.

Versions: v0 only (not flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.OFFSET_DELETE, versions=(0, 0))
async def handle(
    broker: GroupServices, context: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not context.allowed(AclOperation.DELETE, AclResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
        )
    readable = {
        t.name for t in request.topics if context.allowed(AclOperation.READ, AclResourceType.TOPIC, t.name)
    }
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name in readable]
    try:
        results = broker.groups.offsets.delete_offsets(request.group_id, wanted)
        for t in request.topics:
            if t.name not in readable:
                results.update(
                    {(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED for p in t.partitions}
                )
        code = ErrorCode.NONE
    except ApiError as error:
        return OffsetDeleteResponse(error_code=error.code, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(
        error_code=code,
        throttle_time_ms=0,
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=results[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
