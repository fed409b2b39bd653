"""OffsetFetch (key 9), v0–9, flexible from v6; v8+ fetches for a batch of groups.

A null ``topics`` (v2+ for the single group, v8+ per group) asks for all the group's partitions.
"""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, array, struct

OffsetFetchRequestTopic = struct(
    "OffsetFetchRequestTopic",
    Field("name", STRING, "0-7"),
    Field("partition_indexes", array(INT32), "0-7"),
)

OffsetFetchRequestTopics = struct(
    "OffsetFetchRequestTopics",
    Field("name", STRING, "8+"),
    Field("partition_indexes", array(INT32), "8+"),
)

OffsetFetchRequestGroup = struct(
    "OffsetFetchRequestGroup",
    Field("group_id", STRING, "8+"),
    Field("member_id", STRING, "9+", nullable="9+", default=None),
    Field("member_epoch", INT32, "9+", default=-1),
    Field("topics", array(OffsetFetchRequestTopics), "8+", nullable="8+"),
)

OffsetFetchRequest = struct(
    "OffsetFetchRequest",
    Field("group_id", STRING, "0-7"),
    Field("topics", array(OffsetFetchRequestTopic), "0-7", nullable="2-7"),
    Field("groups", array(OffsetFetchRequestGroup), "8+"),
    Field("require_stable", BOOL, "7+", default=False),
)

OffsetFetchResponsePartition = struct(
    "OffsetFetchResponsePartition",
    Field("partition_index", INT32, "0-7"),
    Field("committed_offset", INT64, "0-7"),
    Field("committed_leader_epoch", INT32, "5-7", default=-1),
    Field("metadata", STRING, "0-7", nullable="0-7"),
    Field("error_code", INT16, "0-7"),
)

OffsetFetchResponseTopic = struct(
    "OffsetFetchResponseTopic",
    Field("name", STRING, "0-7"),
    Field("partitions", array(OffsetFetchResponsePartition), "0-7"),
)

OffsetFetchResponsePartitions = struct(
    "OffsetFetchResponsePartitions",
    Field("partition_index", INT32, "8+"),
    Field("committed_offset", INT64, "8+"),
    Field("committed_leader_epoch", INT32, "8+", default=-1),
    Field("metadata", STRING, "8+", nullable="8+"),
    Field("error_code", INT16, "8+"),
)

OffsetFetchResponseTopics = struct(
    "OffsetFetchResponseTopics",
    Field("name", STRING, "8+"),
    Field("partitions", array(OffsetFetchResponsePartitions), "8+"),
)

OffsetFetchResponseGroup = struct(
    "OffsetFetchResponseGroup",
    Field("group_id", STRING, "8+"),
    Field("topics", array(OffsetFetchResponseTopics), "8+"),
    Field("error_code", INT16, "8+", default=0),
)

OffsetFetchResponse = struct(
    "OffsetFetchResponse",
    Field("throttle_time_ms", INT32, "3+"),
    Field("topics", array(OffsetFetchResponseTopic), "0-7"),
    Field("error_code", INT16, "2-7", default=0),
    Field("groups", array(OffsetFetchResponseGroup), "8+"),
)

SCHEMA = ApiSchema(9, "OffsetFetch", "0-9", "6+", OffsetFetchRequest, OffsetFetchResponse)
