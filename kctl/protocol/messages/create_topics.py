"""CreateTopics (key 19), v0–7, flexible from v5."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT8, INT16, INT32, STRING, UUID, Field, array, struct

CreatableReplicaAssignment = struct(
    "CreatableReplicaAssignment",
    Field("partition_index", INT32),
    Field("broker_ids", array(INT32)),
)

CreatableTopicConfig = struct(
    "CreatableTopicConfig",
    Field("name", STRING),
    Field("value", STRING, nullable="0+"),
)

CreatableTopic = struct(
    "CreatableTopic",
    Field("name", STRING),
    Field("num_partitions", INT32),
    Field("replication_factor", INT16),
    Field("assignments", array(CreatableReplicaAssignment)),
    Field("configs", array(CreatableTopicConfig)),
)

CreateTopicsRequest = struct(
    "CreateTopicsRequest",
    Field("topics", array(CreatableTopic)),
    Field("timeout_ms", INT32, default=60000),
    Field("validate_only", BOOL, "1+", default=False),
)

CreatableTopicConfigs = struct(
    "CreatableTopicConfigs",
    Field("name", STRING, "5+"),
    Field("value", STRING, "5+", nullable="5+"),
    Field("read_only", BOOL, "5+"),
    Field("config_source", INT8, "5+", default=-1),
    Field("is_sensitive", BOOL, "5+"),
)

CreatableTopicResult = struct(
    "CreatableTopicResult",
    Field("name", STRING),
    Field("topic_id", UUID, "7+"),
    Field("error_code", INT16),
    Field("error_message", STRING, "1+", nullable="0+"),
    Field("topic_config_error_code", INT16, "5+", tag=0),
    Field("num_partitions", INT32, "5+", default=-1),
    Field("replication_factor", INT16, "5+", default=-1),
    Field("configs", array(CreatableTopicConfigs), "5+", nullable="5+"),
)

CreateTopicsResponse = struct(
    "CreateTopicsResponse",
    Field("throttle_time_ms", INT32, "2+"),
    Field("topics", array(CreatableTopicResult)),
)

SCHEMA = ApiSchema(19, "CreateTopics", "0-7", "5+", CreateTopicsRequest, CreateTopicsResponse)
