"""The configuration APIs: DescribeConfigs (key 32, v0–4, flexible v4+), AlterConfigs (key 33, v0–2,
flexible v2+) and IncrementalAlterConfigs (key 44, v0–1, flexible v1+)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT8, INT16, INT32, STRING, Field, array, struct

# ---------------------------------------------------------------------------------- DescribeConfigs

DescribeConfigsResource = struct(
    "DescribeConfigsResource",
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("configuration_keys", array(STRING), nullable="0+"),
)

DescribeConfigsRequest = struct(
    "DescribeConfigsRequest",
    Field("resources", array(DescribeConfigsResource)),
    Field("include_synonyms", BOOL, "1+", default=False),
    Field("include_documentation", BOOL, "3+", default=False),
)

DescribeConfigsSynonym = struct(
    "DescribeConfigsSynonym",
    Field("name", STRING, "1+"),
    Field("value", STRING, "1+", nullable="0+"),
    Field("source", INT8, "1+"),
)

DescribeConfigsResourceResult = struct(
    "DescribeConfigsResourceResult",
    Field("name", STRING),
    Field("value", STRING, nullable="0+"),
    Field("read_only", BOOL),
    Field("is_default", BOOL, "0"),
    Field("config_source", INT8, "1+", default=-1),
    Field("is_sensitive", BOOL),
    Field("synonyms", array(DescribeConfigsSynonym), "1+"),
    Field("config_type", INT8, "3+", default=0),
    Field("documentation", STRING, "3+", nullable="0+"),
)

DescribeConfigsResult = struct(
    "DescribeConfigsResult",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+"),
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("configs", array(DescribeConfigsResourceResult)),
)

DescribeConfigsResponse = struct(
    "DescribeConfigsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(DescribeConfigsResult)),
)

DESCRIBE_CONFIGS = ApiSchema(
    32, "DescribeConfigs", "0-4", "4+", DescribeConfigsRequest, DescribeConfigsResponse
)

# ---------------------------------------------------------------------------------- AlterConfigs

AlterableConfig = struct(
    "AlterableConfig",
    Field("name", STRING),
    Field("value", STRING, nullable="0+"),
)

AlterConfigsResource = struct(
    "AlterConfigsResource",
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("configs", array(AlterableConfig)),
)

AlterConfigsRequest = struct(
    "AlterConfigsRequest",
    Field("resources", array(AlterConfigsResource)),
    Field("validate_only", BOOL),
)

AlterConfigsResourceResponse = struct(
    "AlterConfigsResourceResponse",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+"),
    Field("resource_type", INT8),
    Field("resource_name", STRING),
)

AlterConfigsResponse = struct(
    "AlterConfigsResponse",
    Field("throttle_time_ms", INT32),
    Field("responses", array(AlterConfigsResourceResponse)),
)

ALTER_CONFIGS = ApiSchema(33, "AlterConfigs", "0-2", "2+", AlterConfigsRequest, AlterConfigsResponse)

# ---------------------------------------------------------------------------------- IncrementalAlterConfigs

IncrementalAlterableConfig = struct(
    "AlterableConfig",
    Field("name", STRING),
    Field("config_operation", INT8),  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    Field("value", STRING, nullable="0+"),
)

IncrementalAlterConfigsResource = struct(
    "AlterConfigsResource",
    Field("resource_type", INT8),
    Field("resource_name", STRING),
    Field("configs", array(IncrementalAlterableConfig)),
)

IncrementalAlterConfigsRequest = struct(
    "IncrementalAlterConfigsRequest",
    Field("resources", array(IncrementalAlterConfigsResource)),
    Field("validate_only", BOOL),
)

IncrementalAlterConfigsResourceResponse = struct(
    "AlterConfigsResourceResponse",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+"),
    Field("resource_type", INT8),
    Field("resource_name", STRING),
)

IncrementalAlterConfigsResponse = struct(
    "IncrementalAlterConfigsResponse",
    Field("throttle_time_ms", INT32),
    Field("responses", array(IncrementalAlterConfigsResourceResponse)),
)

INCREMENTAL_ALTER_CONFIGS = ApiSchema(
    44,
    "IncrementalAlterConfigs",
    "0-1",
    "1+",
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
