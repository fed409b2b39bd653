"""OffsetForLeaderEpoch (key 23), v0–4, flexible from v4: the end offset of a leader epoch."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

OffsetForLeaderPartition = struct(
    "OffsetForLeaderPartition",
    Field("partition", INT32),
    Field("current_leader_epoch", INT32, "2+", default=-1),
    Field("leader_epoch", INT32),
)

OffsetForLeaderTopic = struct(
    "OffsetForLeaderTopic",
    Field("topic", STRING),
    Field("partitions", array(OffsetForLeaderPartition)),
)

OffsetForLeaderEpochRequest = struct(
    "OffsetForLeaderEpochRequest",
    Field("replica_id", INT32, "3+", default=-2),  # a follower's broker id, or -1 from a consumer
    Field("topics", array(OffsetForLeaderTopic)),
)

EpochEndOffset = struct(
    "EpochEndOffset",
    Field("error_code", INT16),
    Field("partition", INT32),
    Field("leader_epoch", INT32, "1+", default=-1),
    Field("end_offset", INT64, default=-1),
)

OffsetForLeaderTopicResult = struct(
    "OffsetForLeaderTopicResult",
    Field("topic", STRING),
    Field("partitions", array(EpochEndOffset)),
)

OffsetForLeaderEpochResponse = struct(
    "OffsetForLeaderEpochResponse",
    Field("throttle_time_ms", INT32, "2+"),
    Field("topics", array(OffsetForLeaderTopicResult)),
)

SCHEMA = ApiSchema(
    23, "OffsetForLeaderEpoch", "0-4", "4+", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
)
