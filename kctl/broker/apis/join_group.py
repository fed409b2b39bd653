"""JoinGroup: join (or rejoin) a consumer group; answered when the group's rebalance completes.

Versions: v0-9. v1+ carry a rebalance timeout (v0 uses the session timeout); v4+ make a new member rejoin
with the member id it is given (MEMBER_ID_REQUIRED); v5+ carry a group instance id (static membership);
v6+ are flexible; v7+ answer with the protocol type and a nullable protocol name; v9 lets the leader skip
computing the assignment when it is only a static member's replacement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.group.membership import JoinResult
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.JOIN_GROUP, versions=(0, 9))
async def handle(
    broker: GroupServices, context: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    try:
        if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "READ on the group denied")
        result = await broker.groups.join_group(
            request, context.header.api_version, context.header.client_id or "", context.client_host
        )
    except ApiError as error:
        result = JoinResult(error.code, member_id=request.member_id)
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name or ("" if context.header.api_version < 7 else None),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
            for m, i, meta in result.members
        ],
    )
