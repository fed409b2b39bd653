"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT single topic configs, or dynamic
broker configs (of one broker, or the cluster-wide default); SET and DELETE a broker's logger levels
(BROKER_LOGGER, kctl.broker.loggers).

Versions: v0-1. The versions differ only in encoding (v1 is flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kctl.broker.apis.registry import api_handler
from kctl.broker.config import BROKER_CONFIGS
from kctl.broker.config_alter import alter_topic_configs
from kctl.broker.errors import ApiError
from kctl.broker.security.config import listener_config
from kctl.common.config_def import ConfigDef, ConfigType
from kctl.log.config import TOPIC_CONFIGS
from kctl.protocol.configs import AlterConfigOp
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import ConfigServices
    from kctl.broker.request_context import RequestContext

SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOp.SET,
    AlterConfigOp.DELETE,
    AlterConfigOp.APPEND,
    AlterConfigOp.SUBTRACT,
)


def apply_operations(broker: ConfigServices, topic: str, operations: list[Any]) -> dict[str, str]:
    record = broker.metadata.topic(topic)
    if record is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")
    configs = dict(record.configs)
    effective = broker.config.log_config.with_overrides(configs).to_properties()
    return _apply(TOPIC_CONFIGS, "topic", configs, effective, operations)


def apply_broker_operations(
    broker: ConfigServices, stored: dict[str, str], operations: list[Any]
) -> dict[str, str]:
    """A broker entity's dynamic configs after ``operations`` (APPEND/SUBTRACT start from the
    stored value, else the broker's current one)."""
    configs, plain = dict(stored), []
    for op in operations:  # listener.name.<l>.<config>: SET or DELETE (dynamic_config validates them)
        if listener_config(op.name) is None:
            plain.append(op)
        elif op.config_operation == SET and op.value is not None:
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        else:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"{op.name}: a listener config takes SET or DELETE")
    effective = {name: text or "" for name, text in broker.config.raw.items()}
    return _apply(BROKER_CONFIGS, "broker", configs, effective, plain)


def _apply(
    definition: ConfigDef,
    what: str,
    configs: dict[str, str],
    effective: dict[str, str],
    operations: list[Any],
) -> dict[str, str]:
    for op in operations:
        if op.name not in definition:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"unknown {what} config {op.name!r}")
        if op.config_operation == SET:
            if op.value is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"SET {op.name} needs a value")
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if definition[op.name].type is not ConfigType.LIST:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"{op.name} is not a list config")
            items = [v for v in configs.get(op.name, effective[op.name]).split(",") if v]
            change = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.config_operation == APPEND:
                items += [v for v in change if v not in items]
            else:
                items = [v for v in items if v not in change]
            configs[op.name] = ",".join(items)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op.config_operation}")
    return configs


@api_handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def handle(
    broker: ConfigServices, context: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = alter_topic_configs(
        broker,
        context,
        request.resources,
        request.validate_only,
        lambda resource: apply_operations(broker, resource.resource_name, resource.configs),
        IncrementalAlterConfigsResourceResponse,
        lambda resource, stored: apply_broker_operations(broker, stored, resource.configs),
        incremental=True,
    )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
