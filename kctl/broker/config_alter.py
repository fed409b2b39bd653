"""The loop AlterConfigs and IncrementalAlterConfigs share: for each resource, check that it is a
topic the principal may alter (AlterConfigs on it: TOPIC_AUTHORIZATION_FAILED; AlterConfigs on the
cluster for a broker resource: CLUSTER_AUTHORIZATION_FAILED, as Kafka checks before anything else),
compute its new overrides, store them (or only validate), and answer per resource."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kctl.broker.errors import ApiError
from kctl.broker.security.acls import require
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from kctl.protocol.errors import ErrorCode

R = TypeVar("R")


def alter_topic_configs(
    broker: Any,
    context: Any,
    resources: Iterable[Any],
    validate_only: bool,
    new_configs: Callable[[Any], dict[str, str]],
    response: Callable[..., R],
) -> list[R]:
    """One ``response(error_code=, error_message=, resource_type=, resource_name=)`` per resource;
    ``new_configs(resource)`` gives the topic's complete overrides or raises ``ApiError``."""
    responses = []
    for resource in resources:
        try:
            if resource.resource_type == TOPIC_RESOURCE:
                require(
                    broker, context, AclOperation.ALTER_CONFIGS, AclResourceType.TOPIC, resource.resource_name
                )
            elif resource.resource_type == BROKER_RESOURCE:
                require(broker, context, AclOperation.ALTER_CONFIGS, AclResourceType.CLUSTER)
            if resource.resource_type != TOPIC_RESOURCE:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST, "only topic configs can be altered (broker configs are static)"
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
