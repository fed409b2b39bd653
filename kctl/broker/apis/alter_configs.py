"""AlterConfigs: replace a topic's config overrides (the legacy, non-incremental API).

Versions: v0-2. The versions differ only in encoding (v2 is flexible); the request and the answer are the
same."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.describe_configs import TOPIC_RESOURCE
from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext


@api_handler(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def handle(
    broker: Broker, context: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        try:
            if resource.resource_type != TOPIC_RESOURCE:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST, "only topic configs can be altered (broker configs are static)"
                )
            configs = {c.name: c.value for c in resource.configs if c.value is not None}
            broker.topics.set_topic_configs(
                resource.resource_name, configs, validate_only=request.validate_only
            )
            broker.on_metadata_changed()
            responses.append(
                AlterConfigsResourceResponse(
                    error_code=0,
                    error_message=None,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        except ApiError as error:
            responses.append(
                AlterConfigsResourceResponse(
                    error_code=error.code,
                    error_message=error.message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
