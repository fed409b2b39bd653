"""OffsetDelete (key 47), v0 only, never flexible: delete a group's committed offsets."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

OffsetDeleteRequestPartition = struct(
    "OffsetDeleteRequestPartition",
    Field("partition_index", INT32),
)

OffsetDeleteRequestTopic = struct(
    "OffsetDeleteRequestTopic",
    Field("name", STRING),
    Field("partitions", array(OffsetDeleteRequestPartition)),
)

OffsetDeleteRequest = struct(
    "OffsetDeleteRequest",
    Field("group_id", STRING),
    Field("topics", array(OffsetDeleteRequestTopic)),
)

OffsetDeleteResponsePartition = struct(
    "OffsetDeleteResponsePartition",
    Field("partition_index", INT32),
    Field("error_code", INT16),
)

OffsetDeleteResponseTopic = struct(
    "OffsetDeleteResponseTopic",
    Field("name", STRING),
    Field("partitions", array(OffsetDeleteResponsePartition)),
)

OffsetDeleteResponse = struct(
    "OffsetDeleteResponse",
    Field("error_code", INT16),
    Field("throttle_time_ms", INT32),
    Field("topics", array(OffsetDeleteResponseTopic)),
)

SCHEMA = ApiSchema(47, "OffsetDelete", "0", "none", OffsetDeleteRequest, OffsetDeleteResponse)
