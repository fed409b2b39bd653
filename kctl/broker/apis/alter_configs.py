"""AlterConfigs: replace a topic's config overrides, or a broker's (or the cluster-wide default's)
dynamic configs (the legacy, non-incremental API; broker loggers are refused with INVALID_REQUEST, as
Kafka does: they change through IncrementalAlterConfigs).

Versions: v0-2. The versions differ only in encoding (v2 is flexible); the request and the answer are the
same."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.config_alter import alter_topic_configs
from kctl.protocol.messages.configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import ConfigServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def handle(
    broker: ConfigServices, context: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = alter_topic_configs(
        broker,
        context,
        request.resources,
        request.validate_only,
        lambda resource: {c.name: c.value for c in resource.configs if c.value is not None},
        AlterConfigsResourceResponse,
        lambda resource, _stored: {c.name: c.value for c in resource.configs if c.value is not None},
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
