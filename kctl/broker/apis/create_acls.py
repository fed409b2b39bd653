"""CreateAcls: add ACLs (kctl.broker.security.acls; stored like Kafka's). Needs ALTER on the cluster;
SECURITY_DISABLED without an authorizer; a binding that is not specific (ANY, MATCH, UNKNOWN values, no
principal type) is INVALID_REQUEST.

Versions: v0-3. v1+ carry pattern types (LITERAL before); v2+ are flexible."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.acls import AclBinding
from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.CREATE_ACLS, versions=(0, 3))
async def handle(
    broker: SecurityServices, context: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse:
    error = context.acl_change_denied(AclOperation.ALTER)
    if error is not None:
        failed = [AclCreationResult(error_code=error[0], error_message=error[1]) for _ in request.creations]
        return CreateAclsResponse(throttle_time_ms=0, results=failed)
    results = []
    for c in request.creations:
        try:
            binding = AclBinding(
                AclResourceType(c.resource_type),
                c.resource_name,
                PatternType(
                    c.resource_pattern_type if context.header.api_version >= 1 else PatternType.LITERAL
                ),
                c.principal,
                c.host,
                AclOperation(c.operation),
                AclPermissionType(c.permission_type),
            )
            why = binding.validate()
        except ValueError as bad:
            binding, why = None, str(bad)
        if binding is None or why is not None:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=why))
            continue
        try:
            await asyncio.to_thread(broker.security.authorizer.create, binding)
        except Exception as failure:  # the store (ZooKeeper) failed
            results.append(
                AclCreationResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(failure))
            )
            continue
        results.append(AclCreationResult(error_code=0, error_message=None))
    return CreateAclsResponse(throttle_time_ms=0, results=results)
