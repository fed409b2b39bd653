"""AlterClientQuotas: set or remove quota values (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ``controller_mutation_rate``) of user, client-id and (user, client-id)
entities, defaults included (a null name). Stored in the quota store (ZooKeeper in Kafka's layout, or
``client-quotas.json``), announced by a change notification; every broker reloads its quotas. Needs
ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED); a bad entity, key or value is
INVALID_REQUEST for its entry only. ``validate_only`` checks without writing.

Versions: v0-1. v1+ are flexible."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.quotas import check_quota_value, parse_entity
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.client_quotas import (
    AlterClientQuotasEntryResult,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import QuotaServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1))
async def handle(
    broker: QuotaServices, context: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    permitted = context.allowed(AclOperation.ALTER_CONFIGS, AclResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    changed = False
    for entry in request.entries:
        code, message = ErrorCode.NONE, None
        try:
            if not permitted:
                raise PermissionError("ALTER_CONFIGS on the cluster denied")
            entity = parse_entity([(e.entity_type, e.entity_name) for e in entry.entity])
            ops: dict[str, float | None] = {}
            for op in entry.ops:
                if op.key in ops:
                    raise ValueError(f"key {op.key!r} given twice")
                if not op.remove:
                    check_quota_value(op.key, op.value)
                else:
                    check_quota_value(op.key, 1.0)  # a known key
                ops[op.key] = None if op.remove else op.value
            if not request.validate_only and ops:
                await asyncio.to_thread(broker.quotas.store.alter, entity, ops)
                changed = True
        except PermissionError as error:
            code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, str(error)
        except ValueError as error:
            code, message = ErrorCode.INVALID_REQUEST, str(error)
        results.append(
            AlterClientQuotasEntryResult(error_code=code, error_message=message, entity=entry.entity)
        )
    if changed:
        await asyncio.to_thread(broker.quotas.reload)  # this broker at once; the others on notification
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=results)
