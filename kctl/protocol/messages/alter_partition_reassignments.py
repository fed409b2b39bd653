"""AlterPartitionReassignments (key 45), v0, flexible (Kafka's AlterPartitionReassignmentsRequest/
Response.json). A partition whose ``replicas`` is null cancels its pending reassignment."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

ReassignablePartition = struct(
    "ReassignablePartition",
    Field("partition_index", INT32),
    Field("replicas", array(INT32), nullable="0+", default=None),
)

ReassignableTopic = struct(
    "ReassignableTopic",
    Field("name", STRING),
    Field("partitions", array(ReassignablePartition)),
)

AlterPartitionReassignmentsRequest = struct(
    "AlterPartitionReassignmentsRequest",
    Field("timeout_ms", INT32, default=60000),
    Field("topics", array(ReassignableTopic)),
)

ReassignablePartitionResponse = struct(
    "ReassignablePartitionResponse",
    Field("partition_index", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
)

ReassignableTopicResponse = struct(
    "ReassignableTopicResponse",
    Field("name", STRING),
    Field("partitions", array(ReassignablePartitionResponse)),
)

AlterPartitionReassignmentsResponse = struct(
    "AlterPartitionReassignmentsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("responses", array(ReassignableTopicResponse)),
)

SCHEMA = ApiSchema(
    45,
    "AlterPartitionReassignments",
    "0",
    "0+",
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
