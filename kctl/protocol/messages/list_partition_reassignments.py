"""ListPartitionReassignments (key 46), v0, flexible (Kafka's ListPartitionReassignmentsRequest/
Response.json). ``topics`` null: every partition being reassigned."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

ListPartitionReassignmentsTopics = struct(
    "ListPartitionReassignmentsTopics",
    Field("name", STRING),
    Field("partition_indexes", array(INT32)),
)

ListPartitionReassignmentsRequest = struct(
    "ListPartitionReassignmentsRequest",
    Field("timeout_ms", INT32, default=60000),
    Field("topics", array(ListPartitionReassignmentsTopics), nullable="0+", default=None),
)

OngoingPartitionReassignment = struct(
    "OngoingPartitionReassignment",
    Field("partition_index", INT32),
    Field("replicas", array(INT32)),
    Field("adding_replicas", array(INT32)),
    Field("removing_replicas", array(INT32)),
)

OngoingTopicReassignment = struct(
    "OngoingTopicReassignment",
    Field("name", STRING),
    Field("partitions", array(OngoingPartitionReassignment)),
)

ListPartitionReassignmentsResponse = struct(
    "ListPartitionReassignmentsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("topics", array(OngoingTopicReassignment)),
)

SCHEMA = ApiSchema(
    46,
    "ListPartitionReassignments",
    "0",
    "0+",
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
