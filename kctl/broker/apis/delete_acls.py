"""DeleteAcls: remove the ACLs matching each filter, answering with what was removed. Needs ALTER on the
cluster; SECURITY_DISABLED without an authorizer.

Versions: v0-3. v1+ carry pattern types (LITERAL before); v2+ are flexible."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.acls import filter_from_request
from kctl.protocol.acl_types import AclOperation
from kctl.protocol.messages.acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DELETE_ACLS, versions=(0, 3))
async def handle(
    broker: SecurityServices, context: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    error = context.acl_change_denied(AclOperation.ALTER)
    if error is not None:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                DeleteAclsFilterResult(error_code=error[0], error_message=error[1], matching_acls=[])
                for _ in request.filters
            ],
        )
    results = []
    for f in request.filters:
        deleted = await asyncio.to_thread(
            broker.security.authorizer.delete, filter_from_request(f, context.header.api_version)
        )
        results.append(
            DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=b.resource_type,
                        resource_name=b.resource_name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission,
                    )
                    for b in deleted
                ],
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
