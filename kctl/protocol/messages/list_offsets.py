"""ListOffsets (key 2), v0–9, flexible from v6: offsets by timestamp (earliest -2, latest -1, ...)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT8, INT16, INT32, INT64, STRING, Field, array, struct

ListOffsetsPartition = struct(
    "ListOffsetsPartition",
    Field("partition_index", INT32),
    Field("current_leader_epoch", INT32, "4+", default=-1),
    Field("timestamp", INT64),
    Field("max_num_offsets", INT32, "0", default=1),
)

ListOffsetsTopic = struct(
    "ListOffsetsTopic",
    Field("name", STRING),
    Field("partitions", array(ListOffsetsPartition)),
)

ListOffsetsRequest = struct(
    "ListOffsetsRequest",
    # the 3.9 spec states no default (0); later specs use -1, what every consumer sends
    Field("replica_id", INT32, default=-1),
    Field("isolation_level", INT8, "2+"),
    Field("topics", array(ListOffsetsTopic)),
)

ListOffsetsPartitionResponse = struct(
    "ListOffsetsPartitionResponse",
    Field("partition_index", INT32),
    Field("error_code", INT16),
    Field("old_style_offsets", array(INT64), "0"),
    Field("timestamp", INT64, "1+", default=-1),
    Field("offset", INT64, "1+", default=-1),
    Field("leader_epoch", INT32, "4+", default=-1),
)

ListOffsetsTopicResponse = struct(
    "ListOffsetsTopicResponse",
    Field("name", STRING),
    Field("partitions", array(ListOffsetsPartitionResponse)),
)

ListOffsetsResponse = struct(
    "ListOffsetsResponse",
    Field("throttle_time_ms", INT32, "2+"),
    Field("topics", array(ListOffsetsTopicResponse)),
)

SCHEMA = ApiSchema(2, "ListOffsets", "0-9", "6+", ListOffsetsRequest, ListOffsetsResponse)
