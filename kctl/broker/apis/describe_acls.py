"""DescribeAcls: the ACLs matching a filter. Needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an authorizer.

Versions: v0-3. v1+ carry pattern types (LITERAL before); v2+ are flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.acls import filter_from_request
from kctl.protocol.acl_types import AclOperation
from kctl.protocol.messages.acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DESCRIBE_ACLS, versions=(0, 3))
async def handle(
    broker: SecurityServices, context: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    error = context.acl_change_denied(AclOperation.DESCRIBE)
    if error is not None:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=error[0], error_message=error[1], resources=[]
        )
    acl_filter = filter_from_request(request, context.header.api_version)
    grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
    for b in broker.security.authorizer.bindings():
        if acl_filter.matches(b):
            grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                AclDescription(
                    principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission
                )
            )
    resources = [
        DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in sorted(grouped.items())
    ]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)
