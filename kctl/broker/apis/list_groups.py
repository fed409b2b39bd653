"""ListGroups: the groups this broker coordinates, optionally filtered by state (v4+).

Versions: v0-5. v3+ are flexible; v4+ filter by group state and answer with each group's state; v5+ filter
by group type (only classic groups exist here) and answer with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.LIST_GROUPS, versions=(0, 5))
async def handle(
    broker: GroupServices, context: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    version = context.header.api_version
    states = set(request.states_filter) if version >= 4 and request.states_filter else None
    if version >= 5 and request.types_filter and "classic" not in {t.lower() for t in request.types_filter}:
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[])
    groups = broker.groups.list_groups(states)
    cluster = AclResourceType.CLUSTER
    if not context.allowed(AclOperation.DESCRIBE, cluster, CLUSTER_NAME, log_denied=False):
        # as Kafka: without Describe on the cluster, only the groups the principal may describe
        groups = [
            g
            for g in groups
            if context.allowed(AclOperation.DESCRIBE, AclResourceType.GROUP, g.group_id, log_denied=False)
        ]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=0,
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )
            for g in groups
        ],
    )
