"""DeleteGroups: delete empty groups and their committed offsets (NON_EMPTY_GROUP while members remain).

Versions: v0-2. The versions differ only in encoding (v2 is flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DELETE_GROUPS, versions=(0, 2))
async def handle(
    broker: GroupServices, context: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    results = []
    for group_id in request.groups_names:
        try:
            context.require(AclOperation.DELETE, AclResourceType.GROUP, group_id)
            code = broker.groups.delete_group(group_id)
        except ApiError as error:
            code = error.code
        results.append(DeletableGroupResult(group_id=group_id, error_code=code))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
