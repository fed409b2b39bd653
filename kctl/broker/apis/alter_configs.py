"""AlterConfigs: replace a topic's config overrides (the legacy, non-incremental API)."""

from __future__ import annotations

from typing import Any

from kctl.broker.config_alter import alter_topic_configs
from kctl.protocol.messages.configs import AlterConfigsResourceResponse, AlterConfigsResponse
from kctl.protocol.registry import ApiKey

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)


async def handle(broker: Any, context: Any, request: Any) -> AlterConfigsResponse:
    responses = alter_topic_configs(
        broker,
        request.resources,
        request.validate_only,
        lambda resource: {c.name: c.value for c in resource.configs if c.value is not None},
        AlterConfigsResourceResponse,
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
