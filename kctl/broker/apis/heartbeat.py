"""Heartbeat: keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

Versions: v0-4. v1+ answer with throttle_time_ms; v3+ carry a group instance id (static membership); v4 is
flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.HEARTBEAT, versions=(0, 4))
async def handle(
    broker: GroupServices, context: RequestContext, request: HeartbeatRequest
) -> HeartbeatResponse:
    try:
        if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "READ on the group denied")
        code = broker.groups.heartbeat(request, context.header.api_version)
    except ApiError as error:
        code = error.code
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
