"""The wire constants of the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs),
defined once for the broker's handlers and the admin client: resource types (Kafka's
``ConfigResource.Type``), config sources, config types and the incremental operations."""

from __future__ import annotations

import enum


class ConfigResourceType(enum.IntEnum):
    """``resource_type`` of a config resource."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16


TOPIC_RESOURCE = ConfigResourceType.TOPIC
BROKER_RESOURCE = ConfigResourceType.BROKER


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (DescribeConfigs ``config_source``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, code: int) -> ConfigSource:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


class ConfigTypeCode(enum.IntEnum):
    """``config_type`` of a DescribeConfigs entry (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (``config_operation``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
