"""ApiVersions: the versions of every API this broker answers (derived from the handler registry).

Versions: v0-4. v1+ answer with throttle_time_ms; v3+ are flexible and carry the client's software name
and version (not used) and the supported/finalized feature lists (kctl sends none). A request at a version
above 4 is answered with the v0 error reply listing the supported versions (by the server, before any
handler)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import VersionServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.API_VERSIONS, versions=(0, 4))
async def handle(
    broker: VersionServices, context: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersion(key, low, high) for key, (low, high) in sorted(broker.supported_versions.items())
        ],
        throttle_time_ms=0,
    )
