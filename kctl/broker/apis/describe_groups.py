"""DescribeGroups: state, protocol and members (with their metadata and assignments) of groups.

Versions: v0-5. v3+ may ask for authorized operations (not tracked: answered as unknown); v4+ answer with
each member's group instance id; v5 is flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


def _describe(broker: GroupServices, context: RequestContext, group_id: str) -> DescribedGroup:
    try:
        context.require(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id)
        group = broker.groups.describe_group(group_id)
    except ApiError as error:
        return DescribedGroup(
            error_code=error.code,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    if group is None:
        return DescribedGroup(
            error_code=ErrorCode.NONE,
            group_id=group_id,
            group_state="Dead",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    stable = group.state.value == "Stable"
    return DescribedGroup(
        error_code=ErrorCode.NONE,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=group.protocol_name or "" if stable else "",
        members=[
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol_name or "") if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ],
    )


@api_handler(ApiKey.DESCRIBE_GROUPS, versions=(0, 5))
async def handle(
    broker: GroupServices, context: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(
        throttle_time_ms=0, groups=[_describe(broker, context, g) for g in request.groups]
    )
