"""CreatePartitions (key 37), v0–3, flexible from v2."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, STRING, Field, array, struct

CreatePartitionsAssignment = struct(
    "CreatePartitionsAssignment",
    Field("broker_ids", array(INT32)),
)

CreatePartitionsTopic = struct(
    "CreatePartitionsTopic",
    Field("name", STRING),
    Field("count", INT32),
    Field("assignments", array(CreatePartitionsAssignment), nullable="0+"),
)

CreatePartitionsRequest = struct(
    "CreatePartitionsRequest",
    Field("topics", array(CreatePartitionsTopic)),
    Field("timeout_ms", INT32),
    Field("validate_only", BOOL),
)

CreatePartitionsTopicResult = struct(
    "CreatePartitionsTopicResult",
    Field("name", STRING),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
)

CreatePartitionsResponse = struct(
    "CreatePartitionsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(CreatePartitionsTopicResult)),
)

SCHEMA = ApiSchema(37, "CreatePartitions", "0-3", "2+", CreatePartitionsRequest, CreatePartitionsResponse)
