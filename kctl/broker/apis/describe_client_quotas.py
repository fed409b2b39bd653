"""DescribeClientQuotas: the configured quota entities matching a filter, with their values. A filter
component names an entity type and matches an exact name (0), the default (1) or any name of that
type (2, the default included); with ``strict``, entities with types the filter does not name are
left out. Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED); a bad filter is
INVALID_REQUEST.

Versions: v0-1. v1+ are flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.quotas import entity_pairs
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    DescribeClientQuotasEntry,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    QuotaEntityData,
    QuotaValueData,
)
from kctl.protocol.registry import ApiKey
from kctl.zk.quota_store import CLIENT_ID, DEFAULT_NAME, USER, QuotaEntity

if TYPE_CHECKING:
    from kctl.broker.handler_services import QuotaServices
    from kctl.broker.request_context import RequestContext


def _matcher(request: DescribeClientQuotasRequest) -> dict[str, tuple[int, str | None]]:
    """entity type -> (match type, name); ValueError for a bad filter."""
    out: dict[str, tuple[int, str | None]] = {}
    for c in request.components:
        if c.entity_type not in (USER, CLIENT_ID):
            raise ValueError(f"unknown entity type {c.entity_type!r} (user or client-id)")
        if c.entity_type in out:
            raise ValueError(f"entity type {c.entity_type!r} given twice")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise ValueError(f"unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise ValueError("an exact match needs a name")
        out[c.entity_type] = (c.match_type, c.match)
    return out


def _matches(entity: QuotaEntity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    for entity_type, name in ((USER, entity[0]), (CLIENT_ID, entity[1])):
        match = wanted.get(entity_type)
        if match is None:
            if strict and name is not None:
                return False
            continue
        match_type, match_name = match
        if name is None:
            return False
        if match_type == MATCH_EXACT and name != match_name:
            return False
        if match_type == MATCH_DEFAULT and name != DEFAULT_NAME:
            return False
    return True


@api_handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1))
async def handle(
    broker: QuotaServices, context: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not context.allowed(AclOperation.DESCRIBE_CONFIGS, AclResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeClientQuotasResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="DESCRIBE_CONFIGS on the cluster denied",
            entries=None,
        )
    try:
        wanted = _matcher(request)
    except ValueError as error:
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(error), entries=None
        )
    entries = [
        DescribeClientQuotasEntry(
            entity=[QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity_pairs(entity)],
            values=[QuotaValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in sorted(broker.quotas.quotas.items(), key=lambda item: str(item[0]))
        if _matches(entity, wanted, request.strict)
    ]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)
