"""Heartbeat: keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from kctl.broker.errors import ApiError
from kctl.protocol.messages.heartbeat import HeartbeatResponse
from kctl.protocol.registry import ApiKey

API_KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)


async def handle(broker: Any, context: Any, request: Any) -> HeartbeatResponse:
    try:
        code = broker.groups.heartbeat(request, context.header.api_version)
    except ApiError as error:
        code = error.code
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
