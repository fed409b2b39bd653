"""ApiVersions: the versions of every API this broker answers (derived from the handler modules)."""

from __future__ import annotations

from typing import Any

from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kctl.protocol.registry import ApiKey

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)


async def handle(broker: Any, context: Any, request: Any) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersion(key, low, high) for key, (low, high) in sorted(broker.supported_versions.items())
        ],
        throttle_time_ms=0,
    )
