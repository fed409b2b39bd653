"""DescribeUserScramCredentials: the SCRAM users and their iterations (never a secret). Needs DESCRIBE
on the cluster; an unknown user is RESOURCE_NOT_FOUND.

Versions: v0 only, flexible."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.common.scram import (
    MECHANISM_CODES,
    ScramCredential,
)
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def handle(
    broker: SecurityServices, context: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not context.allowed(AclOperation.DESCRIBE, AclResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="DESCRIBE on the cluster is not allowed",
            results=[],
        )
    users = await asyncio.to_thread(broker.security.store.users)
    wanted = sorted(users) if not request.users else [u.name for u in request.users]
    results = []
    for name in wanted:
        credentials = users.get(name)
        if not credentials:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"attempt to describe a user credential that does not exist: {name}",
                    credential_infos=[],
                )
            )
            continue
        infos = [
            CredentialInfo(
                mechanism=MECHANISM_CODES[m], iterations=ScramCredential.from_text(text).iterations
            )
            for m, text in sorted(credentials.items())
            if m in MECHANISM_CODES
        ]
        results.append(
            DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message=None, credential_infos=infos
            )
        )
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )
