"""TxnOffsetCommit (key 28), v0–4: a transactional producer's consumer offsets, sent to the group
coordinator (KIP-98) after AddOffsetsToTxn. v2+ carry a committed leader epoch per partition; v3+
are flexible and carry the consumer's group metadata (generation, member id, group instance id) for
KIP-447's fencing of zombie producers; v4 is v3 with the TRANSACTION_ABORTABLE error (KIP-890)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

TxnOffsetCommitRequestPartition = struct(
    "TxnOffsetCommitRequestPartition",
    Field("partition_index", INT32),
    Field("committed_offset", INT64),
    Field("committed_leader_epoch", INT32, "2+", default=-1),
    Field("committed_metadata", STRING, nullable="0+"),
)

TxnOffsetCommitRequestTopic = struct(
    "TxnOffsetCommitRequestTopic",
    Field("name", STRING),
    Field("partitions", array(TxnOffsetCommitRequestPartition)),
)

TxnOffsetCommitRequest = struct(
    "TxnOffsetCommitRequest",
    Field("transactional_id", STRING),
    Field("group_id", STRING),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("generation_id", INT32, "3+", default=-1),
    Field("member_id", STRING, "3+", default=""),
    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    Field("topics", array(TxnOffsetCommitRequestTopic)),
)

TxnOffsetCommitResponsePartition = struct(
    "TxnOffsetCommitResponsePartition",
    Field("partition_index", INT32),
    Field("error_code", INT16),
)

TxnOffsetCommitResponseTopic = struct(
    "TxnOffsetCommitResponseTopic",
    Field("name", STRING),
    Field("partitions", array(TxnOffsetCommitResponsePartition)),
)

TxnOffsetCommitResponse = struct(
    "TxnOffsetCommitResponse",
    Field("throttle_time_ms", INT32),
    Field("topics", array(TxnOffsetCommitResponseTopic)),
)

SCHEMA = ApiSchema(28, "TxnOffsetCommit", "0-4", "3+", TxnOffsetCommitRequest, TxnOffsetCommitResponse)
