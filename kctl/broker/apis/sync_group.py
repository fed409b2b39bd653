"""SyncGroup: the leader hands in the assignment; every member receives its own.

Versions: v0-5. v1+ answer with throttle_time_ms; v3+ carry a group instance id (static membership); v4+
are flexible; v5+ carry and answer with the protocol type and name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.group.membership import SyncResult
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.SYNC_GROUP, versions=(0, 5))
async def handle(
    broker: GroupServices, context: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    try:
        if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "READ on the group denied")
        result = await broker.groups.sync_group(request, context.header.api_version)
    except ApiError as error:
        result = SyncResult(error.code)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
