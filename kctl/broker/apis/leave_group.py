"""LeaveGroup: members leave (one by member id before v3, a batch by member or instance id from v3).

Versions: v0-5. v0-2 remove one member by member id; v3+ remove a batch of members by member or group
instance id, with an error per member; v4+ are flexible; v5+ carry a reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.LEAVE_GROUP, versions=(0, 5))
async def handle(
    broker: GroupServices, context: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    version = context.header.api_version
    members: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in request.members]
        if version >= 3
        else [(request.member_id, None)]
    )
    try:
        if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "READ on the group denied")
        codes = broker.groups.leave_group(request.group_id, members)
    except ApiError as error:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error.code, members=[])
    if version < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes[0])
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        members=[
            MemberResponse(member_id=m, group_instance_id=i, error_code=c)
            for (m, i), c in zip(members, codes, strict=True)
        ],
    )
