"""FindCoordinator: which broker coordinates a consumer group. The group coordinator itself
(JoinGroup, OffsetCommit, ...) is the consumer-groups work; until it lands this answers with this
broker for groups, and COORDINATOR_NOT_AVAILABLE for transactions (not supported)."""

from __future__ import annotations

from typing import Any

from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from kctl.protocol.registry import ApiKey

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)
GROUP, TRANSACTION = 0, 1
FIRST_BATCHED_VERSION = 4


def _coordinator(broker: Any, key: str, key_type: int) -> Coordinator:
    if key_type != GROUP:
        return Coordinator(
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message="transactions are not supported",
        )
    me = next((b for b in broker.metadata.brokers() if b.broker_id == broker.broker_id), None)
    if me is None:
        return Coordinator(
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message="this broker is not registered yet",
        )
    return Coordinator(
        key=key, node_id=me.broker_id, host=me.host, port=me.port, error_code=0, error_message=None
    )


async def handle(broker: Any, context: Any, request: Any) -> FindCoordinatorResponse:
    version = context.header.api_version
    if version >= FIRST_BATCHED_VERSION:
        coordinators = [_coordinator(broker, key, request.key_type) for key in request.coordinator_keys]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    found = _coordinator(broker, request.key, request.key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )
