"""OffsetCommit (key 8), v0–9, flexible from v8."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

OffsetCommitRequestPartition = struct(
    "OffsetCommitRequestPartition",
    Field("partition_index", INT32),
    Field("committed_offset", INT64),
    Field("committed_leader_epoch", INT32, "6+", default=-1),
    Field("commit_timestamp", INT64, "1", default=-1),
    Field("committed_metadata", STRING, nullable="0+"),
)

OffsetCommitRequestTopic = struct(
    "OffsetCommitRequestTopic",
    Field("name", STRING),
    Field("partitions", array(OffsetCommitRequestPartition)),
)

OffsetCommitRequest = struct(
    "OffsetCommitRequest",
    Field("group_id", STRING),
    Field("generation_id_or_member_epoch", INT32, "1+", default=-1),
    Field("member_id", STRING, "1+"),
    Field("group_instance_id", STRING, "7+", nullable="7+", default=None),
    Field("retention_time_ms", INT64, "2-4", default=-1),
    Field("topics", array(OffsetCommitRequestTopic)),
)

OffsetCommitResponsePartition = struct(
    "OffsetCommitResponsePartition",
    Field("partition_index", INT32),
    Field("error_code", INT16),
)

OffsetCommitResponseTopic = struct(
    "OffsetCommitResponseTopic",
    Field("name", STRING),
    Field("partitions", array(OffsetCommitResponsePartition)),
)

OffsetCommitResponse = struct(
    "OffsetCommitResponse",
    Field("throttle_time_ms", INT32, "3+"),
    Field("topics", array(OffsetCommitResponseTopic)),
)

SCHEMA = ApiSchema(8, "OffsetCommit", "0-9", "8+", OffsetCommitRequest, OffsetCommitResponse)
