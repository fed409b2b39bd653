"""The loop AlterConfigs and IncrementalAlterConfigs share: for each resource, check that the
principal may alter it (AlterConfigs on the topic: TOPIC_AUTHORIZATION_FAILED; AlterConfigs on the
cluster for a broker resource: CLUSTER_AUTHORIZATION_FAILED, as Kafka checks before anything else),
compute its new configs — a topic's overrides, or a broker's (resource name = its id) or the
cluster-wide default's (resource name "") dynamic configs — store them in the registry (or only
validate), apply them, and answer per resource. A broker's loggers (BROKER_LOGGER, ALTER_CONFIGS on
the cluster) change without being stored, through IncrementalAlterConfigs only."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kctl.broker.dynamic_config import entity_of, validate_broker_configs
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.configs import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigResourceType
from kctl.protocol.errors import ErrorCode
from kctl.zk.model import RegistryError

R = TypeVar("R")
BROKER_LOGGER = ConfigResourceType.BROKER_LOGGER


def alter_topic_configs(
    broker: Any,
    context: Any,
    resources: Iterable[Any],
    validate_only: bool,
    new_configs: Callable[[Any], dict[str, str]],
    response: Callable[..., R],
    new_broker_configs: Callable[[Any, dict[str, str]], dict[str, str]] | None = None,
    *,
    incremental: bool = False,
) -> list[R]:
    """One ``response(error_code=, error_message=, resource_type=, resource_name=)`` per resource;
    ``new_configs(resource)`` gives the topic's complete overrides, ``new_broker_configs(resource,
    stored)`` a broker entity's complete dynamic configs from those stored; either raises
    ``ApiError``. A broker's loggers (BROKER_LOGGER) change only ``incremental``ly (Kafka's legacy
    AlterConfigs refuses them), at once and unstored (kctl.broker.loggers)."""
    responses = []
    for resource in resources:
        try:
            if resource.resource_type == BROKER_LOGGER:
                if not incremental:
                    raise ApiError(
                        ErrorCode.INVALID_REQUEST,
                        "the legacy AlterConfigs does not alter broker loggers (resource type 8): "
                        "use IncrementalAlterConfigs",
                    )
                context.require(AclOperation.ALTER_CONFIGS, AclResourceType.CLUSTER)
                broker.loggers.check_resource(resource.resource_name)
                broker.loggers.alter(resource.configs, validate_only=validate_only)
                responses.append(
                    response(
                        error_code=0,
                        error_message=None,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
                continue
            if resource.resource_type == TOPIC_RESOURCE:
                context.require(AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC, resource.resource_name)
            elif resource.resource_type == BROKER_RESOURCE:
                context.require(AclOperation.ALTER_CONFIGS, AclResourceType.CLUSTER)
            if resource.resource_type == BROKER_RESOURCE and new_broker_configs is not None:
                _alter_broker_configs(broker, resource, validate_only, new_broker_configs)
                responses.append(
                    response(
                        error_code=0,
                        error_message=None,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
                continue
            if resource.resource_type != TOPIC_RESOURCE:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"configs of resource type {resource.resource_type} cannot be altered",
                )
            configs = new_configs(resource)
            broker.topics.set_topic_configs(resource.resource_name, configs, validate_only=validate_only)
            broker.on_metadata_changed()
            code, message = 0, None
        except ApiError as error:
            code, message = error.code, error.message
        responses.append(
            response(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return responses


def _alter_broker_configs(
    broker: Any,
    resource: Any,
    validate_only: bool,
    new_broker_configs: Callable[[Any, dict[str, str]], dict[str, str]],
) -> None:
    entity = entity_of(resource.resource_name)
    registry = broker.registry
    try:
        stored = registry.broker_configs(entity)
        configs = new_broker_configs(resource, stored)
        validate_broker_configs(broker.dynamic_configs, resource.resource_name, configs)
        if validate_only:
            return
        if entity == str(broker.broker_id):  # key or trust store files rewritten in place
            broker.dynamic_configs.reload_updated_files(resource.resource_name)
        registry.set_broker_configs(entity, configs)
    except RegistryError as error:
        raise ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker configs not stored: {error}") from None
    broker.dynamic_configs.reload()
