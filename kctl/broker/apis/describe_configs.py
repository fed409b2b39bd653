"""DescribeConfigs: a topic's effective configs (override, broker default or built-in default, with
synonyms) and a broker's configs (its dynamic config, the cluster-wide dynamic default, static or
built-in default, with their sources; resource name "": the dynamic defaults). Types, docs,
defaults and synonyms come from the config definitions (``TOPIC_CONFIGS``, ``BROKER_CONFIGS``). A
BROKER_LOGGER resource (named by this broker's id) lists the broker's loggers and their levels
(kctl.broker.loggers), allowed as a broker resource by DESCRIBE_CONFIGS on the cluster.

Versions: v0-4. v0 answers with is_default, v1+ with config_source and, when asked, synonyms; v3+ with
config_type and, when asked, documentation; v4 is flexible."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl.broker.apis.registry import api_handler
from kctl.broker.config import BROKER_CONFIGS
from kctl.broker.errors import ApiError
from kctl.broker.security.config import is_dynamic_listener_config, listener_config
from kctl.common.config_def import ConfigKey, ConfigType, Dynamic, format_value
from kctl.log.config import TOPIC_CONFIGS, LogConfig
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigResourceType,
    ConfigSource,
    ConfigTypeCode,
)
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import ClusterServices, TopicConfigServices
    from kctl.broker.request_context import RequestContext


DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG
STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG
DYNAMIC_BROKER_CONFIG = ConfigSource.DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT_BROKER_CONFIG = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
BROKER_LOGGER = ConfigResourceType.BROKER_LOGGER


def config_type_code(key: ConfigKey) -> int:
    """The DescribeConfigs ``config_type`` of a defined key."""
    return ConfigTypeCode[ConfigType(key.type).name]


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    config_source: int
    read_only: bool
    synonyms: list[tuple[str, str | None, int]]
    config_type: int
    documentation: str | None
    is_sensitive: bool = False


def topic_config_entries(
    broker: TopicConfigServices,
    topic: str,
    keys: list[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigEntry]:
    record = broker.metadata.topic(topic)
    overrides = record.configs if record else {}
    defaults = LogConfig().to_properties()
    broker_defaults = broker.config.log_config.to_properties()
    entries = []
    for name, key in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            value, source = overrides[name], DYNAMIC_TOPIC_CONFIG
            synonyms.append((name, value, DYNAMIC_TOPIC_CONFIG))
        else:
            value, source = broker_defaults[name], DEFAULT_CONFIG
        static = broker.config.topic_config_source(name)
        if static is not None:
            if source == DEFAULT_CONFIG:
                value, source = broker_defaults[name], STATIC_BROKER_CONFIG
            synonyms.append((static[0], static[1], STATIC_BROKER_CONFIG))
        broker_property = key.synonyms[0].name if key.synonyms else name
        synonyms.append((broker_property, defaults[name], DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name,
                value,
                source,
                False,
                synonyms if include_synonyms else [],
                config_type_code(key),
                key.doc if include_documentation else None,
            )
        )
    return entries


def broker_config_entries(
    broker: ClusterServices,
    keys: list[str] | None,
    include_documentation: bool,
    include_synonyms: bool = False,
    *,
    default_only: bool = False,
) -> list[ConfigEntry]:
    """A broker's configs with their effective value and source (this broker's dynamic config, the
    cluster-wide dynamic default, server.properties, the built-in default), read-only as Kafka marks
    it, sensitive values hidden. Synonyms, as Kafka's, in that order. ``default_only``: the
    cluster-wide default resource (name ""), which describes only the dynamic defaults set."""
    config = broker.config
    entries = []
    for name, key in BROKER_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        if default_only and name not in config.dynamic_default:
            continue
        layers: list[tuple[str | None, int]] = []
        if name in config.dynamic_broker and not default_only:
            layers.append((config.dynamic_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in config.dynamic_default:
            layers.append((config.dynamic_default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in config.explicit and not default_only:
            layers.append((config.properties.get(name), STATIC_BROKER_CONFIG))
        if not key.required and not default_only:
            layers.append((format_value(key.parsed_default), DEFAULT_CONFIG))
        value, source = layers[0] if layers else (config.raw.get(name), DEFAULT_CONFIG)
        if source == DEFAULT_CONFIG:
            value = config.raw.get(name)  # a synonym may set it (log.retention.ms <- .hours)
        if key.sensitive:
            value = None
        if name == "metrics.listener" and value:
            value = _bound_metrics_listener(broker, value)
        synonyms = [(name, None if key.sensitive else v, src) for v, src in layers]
        entries.append(
            ConfigEntry(
                name,
                value,
                source,
                key.dynamic == Dynamic.READ_ONLY,
                synonyms if include_synonyms else [],
                config_type_code(key),
                key.doc if include_documentation else None,
                key.sensitive,
            )
        )
    if not default_only:
        entries += _listener_entries(config, keys, include_synonyms, include_documentation)
    return entries


def logger_entries(broker: ClusterServices, resource_name: str, keys: list[str] | None) -> list[ConfigEntry]:
    """The BROKER_LOGGER resource of this broker (kctl.broker.loggers): each logger and its level;
    ApiError for another broker's id."""
    broker.loggers.check_resource(resource_name)
    return [
        ConfigEntry(entry.name, entry.level, entry.source, False, [], ConfigTypeCode.STRING, None)
        for entry in broker.loggers.describe(keys)
    ]


def _bound_metrics_listener(broker: ClusterServices, configured: str) -> str:
    """``metrics.listener`` with port 0 (a free one) described as the port the endpoint got, so that
    a client (`kctl top`) finds it; any other value as configured."""
    url = broker.metrics.url
    if url is None or not configured.rstrip("/").endswith(":0"):
        return configured
    return url.removesuffix("/metrics")


def _listener_entries(
    config: Any, keys: list[str] | None, include_synonyms: bool, include_documentation: bool
) -> list[ConfigEntry]:
    """The listener-prefixed TLS configs set on this broker (``listener.name.<l>.ssl.keystore.location``
    ...: dynamic per broker, or in server.properties), as Kafka lists them with the base config's type."""
    entries = []
    for name in sorted(config.effective_properties()):
        if not is_dynamic_listener_config(name) or (keys is not None and name not in keys):
            continue
        key = BROKER_CONFIGS[listener_config(name)[1]]  # type: ignore[index]
        layers: list[tuple[str, int]] = []
        if name in config.dynamic_broker:
            layers.append((config.dynamic_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in config.properties:
            layers.append((config.properties[name], STATIC_BROKER_CONFIG))
        value, source = layers[0]
        synonyms: list[tuple[str, str | None, int]] = [
            (name, None if key.sensitive else v, src) for v, src in layers
        ]
        entries.append(
            ConfigEntry(
                name,
                None if key.sensitive else value,
                source,
                False,
                synonyms if include_synonyms else [],
                config_type_code(key),
                key.doc if include_documentation else None,
                key.sensitive,
            )
        )
    return entries


def _result(entry: ConfigEntry, version: int) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.config_source == DEFAULT_CONFIG,
        config_source=entry.config_source,
        is_sensitive=entry.is_sensitive,
        synonyms=[DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in entry.synonyms],
        config_type=entry.config_type,
        documentation=entry.documentation,
    )


def _denied(broker: ClusterServices, context: RequestContext, resource_type: int, name: str) -> int | None:
    """Kafka's check: DescribeConfigs on the topic, or on the cluster for a broker resource."""
    if resource_type == TOPIC_RESOURCE:
        if not context.allowed(AclOperation.DESCRIBE_CONFIGS, AclResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type in (BROKER_RESOURCE, BROKER_LOGGER) and not context.allowed(
        AclOperation.DESCRIBE_CONFIGS, AclResourceType.CLUSTER, CLUSTER_NAME
    ):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


@api_handler(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4))
async def handle(
    broker: ClusterServices, context: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    version = context.header.api_version
    results = []
    for resource in request.resources:
        keys = list(resource.configuration_keys) if resource.configuration_keys is not None else None
        denied = _denied(broker, context, resource.resource_type, resource.resource_name)
        if denied is not None:
            results.append(
                DescribeConfigsResult(
                    error_code=denied,
                    error_message="DESCRIBE_CONFIGS is not allowed",
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        if resource.resource_type == TOPIC_RESOURCE:
            if broker.metadata.topic(resource.resource_name) is None:
                results.append(
                    DescribeConfigsResult(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"topic {resource.resource_name!r} does not exist",
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        configs=[],
                    )
                )
                continue
            entries = topic_config_entries(
                broker,
                resource.resource_name,
                keys,
                version >= 1 and request.include_synonyms,
                version >= 3 and request.include_documentation,
            )
        elif resource.resource_type == BROKER_RESOURCE and resource.resource_name in (
            "",
            str(broker.broker_id),
        ):
            entries = broker_config_entries(
                broker,
                keys,
                version >= 3 and request.include_documentation,
                version >= 1 and request.include_synonyms,
                default_only=resource.resource_name == "",
            )
        elif resource.resource_type == BROKER_LOGGER:
            try:
                entries = logger_entries(broker, resource.resource_name, keys)
            except ApiError as error:
                results.append(
                    DescribeConfigsResult(
                        error_code=error.code,
                        error_message=error.message,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        configs=[],
                    )
                )
                continue
        else:
            results.append(
                DescribeConfigsResult(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=(
                        f"resource type {resource.resource_type} {resource.resource_name!r} is not supported"
                    ),
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        results.append(
            DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_result(e, version) for e in entries],
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
