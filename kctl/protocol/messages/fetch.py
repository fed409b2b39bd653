"""Fetch (key 1), v0–17, flexible from v12; topic ids replace topic names from v13.

The response's ``records`` are the broker's hot path: encode them as bytes, a memoryview, or a
file-region object (int ``size``) that ``encode_response_chunks`` leaves in place for sendfile.
"""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Field, array, struct

ReplicaState = struct(
    "ReplicaState",
    Field("replica_id", INT32, "15+", default=-1),
    Field("replica_epoch", INT64, "15+", default=-1),
)

FetchPartition = struct(
    "FetchPartition",
    Field("partition", INT32),
    Field("current_leader_epoch", INT32, "9+", default=-1),
    Field("fetch_offset", INT64),
    Field("last_fetched_epoch", INT32, "12+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("partition_max_bytes", INT32),
    Field("replica_directory_id", UUID, "17+", tag=0),
)

FetchTopic = struct(
    "FetchTopic",
    Field("topic", STRING, "0-12"),
    Field("topic_id", UUID, "13+"),
    Field("partitions", array(FetchPartition)),
)

ForgottenTopic = struct(
    "ForgottenTopic",
    Field("topic", STRING, "7-12"),
    Field("topic_id", UUID, "13+"),
    Field("partitions", array(INT32), "7+"),
)

FetchRequest = struct(
    "FetchRequest",
    Field("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None),
    Field("replica_id", INT32, "0-14", default=-1),
    Field("replica_state", ReplicaState, "15+", tag=1),
    Field("max_wait_ms", INT32),
    Field("min_bytes", INT32),
    Field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
    Field("isolation_level", INT8, "4+", default=0),
    Field("session_id", INT32, "7+", default=0),
    Field("session_epoch", INT32, "7+", default=-1),
    Field("topics", array(FetchTopic)),
    Field("forgotten_topics_data", array(ForgottenTopic), "7+"),
    Field("rack_id", STRING, "11+", default=""),
)

EpochEndOffset = struct(
    "EpochEndOffset",
    Field("epoch", INT32, "12+", default=-1),
    Field("end_offset", INT64, "12+", default=-1),
)

LeaderIdAndEpoch = struct(
    "LeaderIdAndEpoch",
    Field("leader_id", INT32, "12+", default=-1),
    Field("leader_epoch", INT32, "12+", default=-1),
)

SnapshotId = struct(
    "SnapshotId",
    Field("end_offset", INT64, default=-1),
    Field("epoch", INT32, default=-1),
)

AbortedTransaction = struct(
    "AbortedTransaction",
    Field("producer_id", INT64, "4+"),
    Field("first_offset", INT64, "4+"),
)

PartitionData = struct(
    "PartitionData",
    Field("partition_index", INT32),
    Field("error_code", INT16),
    Field("high_watermark", INT64),
    Field("last_stable_offset", INT64, "4+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("diverging_epoch", EpochEndOffset, "12+", tag=0),
    Field("current_leader", LeaderIdAndEpoch, "12+", tag=1),
    Field("snapshot_id", SnapshotId, "12+", tag=2),
    Field("aborted_transactions", array(AbortedTransaction), "4+", nullable="4+"),
    Field("preferred_read_replica", INT32, "11+", default=-1),
    Field("records", RECORDS, nullable="0+"),
)

FetchableTopicResponse = struct(
    "FetchableTopicResponse",
    Field("topic", STRING, "0-12"),
    Field("topic_id", UUID, "13+"),
    Field("partitions", array(PartitionData)),
)

NodeEndpoint = struct(
    "NodeEndpoint",
    Field("node_id", INT32, "16+"),
    Field("host", STRING, "16+"),
    Field("port", INT32, "16+"),
    Field("rack", STRING, "16+", nullable="16+", default=None),
)

FetchResponse = struct(
    "FetchResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16, "7+"),
    Field("session_id", INT32, "7+", default=0),
    Field("responses", array(FetchableTopicResponse)),
    Field("node_endpoints", array(NodeEndpoint), "16+", tag=0),
)

SCHEMA = ApiSchema(1, "Fetch", "0-17", "12+", FetchRequest, FetchResponse)
