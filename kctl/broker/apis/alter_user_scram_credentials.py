"""AlterUserScramCredentials: add or delete SCRAM credentials in the security store (ZooKeeper
``/config/users/<user>`` in cluster mode, ``security.json`` otherwise).

Versions: v0 only, flexible. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED). The client salts:
an upsertion brings the salt and salted password, from which the broker keeps StoredKey and ServerKey
(never the password). Iterations must lie in 4096-16384 (UNACCEPTABLE_CREDENTIAL); an unknown mechanism
is UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist is RESOURCE_NOT_FOUND."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.common.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
)
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def handle(
    broker: SecurityServices, context: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    if not context.allowed(AclOperation.ALTER, AclResourceType.CLUSTER, CLUSTER_NAME):
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                AlterUserScramCredentialsResult(
                    user=n,
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="ALTER on the cluster is not allowed",
                )
                for n in dict.fromkeys(names)
            ],
        )
    store = broker.security.store
    errors: dict[str, tuple[int, str]] = {}
    for d in request.deletions:
        mechanism = MECHANISM_NAMES.get(d.mechanism)
        if mechanism is None:
            errors.setdefault(d.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "unknown SCRAM mechanism"))
        elif not await asyncio.to_thread(store.set_user_credential, d.name, mechanism, None):
            errors.setdefault(
                d.name,
                (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"attempt to delete a user credential that does not exist: {mechanism}",
                ),
            )
    for u in request.upsertions:
        mechanism = MECHANISM_NAMES.get(u.mechanism)
        if mechanism is None:
            errors.setdefault(u.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "unknown SCRAM mechanism"))
            continue
        if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS or not u.name:
            errors.setdefault(
                u.name,
                (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}"),
            )
            continue
        credential = ScramCredential.from_salted_password(
            mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations
        )
        await asyncio.to_thread(store.set_user_credential, u.name, mechanism, credential.to_text())
    results = [
        AlterUserScramCredentialsResult(
            user=n, error_code=errors.get(n, (0, None))[0], error_message=errors.get(n, (0, None))[1]
        )
        for n in dict.fromkeys(names)
    ]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
