"""Produce (key 0), v0–11, flexible from v9.

v0–2 share the v3 layout minus ``transactional_id``; their records are legacy message sets, v3+
carry RecordBatch v2. Either way records are opaque bytes here (a zero-copy memoryview on decode).
"""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, RECORDS, STRING, Field, array, struct

PartitionProduceData = struct(
    "PartitionProduceData",
    Field("index", INT32),
    Field("records", RECORDS, nullable="0+"),
)

TopicProduceData = struct(
    "TopicProduceData",
    Field("name", STRING),
    Field("partition_data", array(PartitionProduceData)),
)

ProduceRequest = struct(
    "ProduceRequest",
    Field("transactional_id", STRING, "3+", nullable="3+", default=None),
    Field("acks", INT16),
    Field("timeout_ms", INT32),
    Field("topic_data", array(TopicProduceData)),
)

BatchIndexAndErrorMessage = struct(
    "BatchIndexAndErrorMessage",
    Field("batch_index", INT32, "8+"),
    Field("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
)

LeaderIdAndEpoch = struct(
    "LeaderIdAndEpoch",
    Field("leader_id", INT32, "10+", default=-1),
    Field("leader_epoch", INT32, "10+", default=-1),
)

PartitionProduceResponse = struct(
    "PartitionProduceResponse",
    Field("index", INT32),
    Field("error_code", INT16),
    Field("base_offset", INT64),
    Field("log_append_time_ms", INT64, "2+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("record_errors", array(BatchIndexAndErrorMessage), "8+"),
    Field("error_message", STRING, "8+", nullable="8+", default=None),
    Field("current_leader", LeaderIdAndEpoch, "10+", tag=0),
)

TopicProduceResponse = struct(
    "TopicProduceResponse",
    Field("name", STRING),
    Field("partition_responses", array(PartitionProduceResponse)),
)

NodeEndpoint = struct(
    "NodeEndpoint",
    Field("node_id", INT32, "10+"),
    Field("host", STRING, "10+"),
    Field("port", INT32, "10+"),
    Field("rack", STRING, "10+", nullable="10+", default=None),
)

ProduceResponse = struct(
    "ProduceResponse",
    Field("responses", array(TopicProduceResponse)),
    Field("throttle_time_ms", INT32, "1+", default=0),
    Field("node_endpoints", array(NodeEndpoint), "10+", tag=0),
)

SCHEMA = ApiSchema(0, "Produce", "0-11", "9+", ProduceRequest, ProduceResponse)
