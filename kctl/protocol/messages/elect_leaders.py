"""ElectLeaders (key 43), v0–2, flexible from v2 (Kafka's ElectLeadersRequest/Response.json)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT8, INT16, INT32, STRING, Field, array, struct

PREFERRED = 0
UNCLEAN = 1

TopicPartitions = struct(
    "TopicPartitions",
    Field("topic", STRING),
    Field("partitions", array(INT32)),
)

ElectLeadersRequest = struct(
    "ElectLeadersRequest",
    Field("election_type", INT8, "1+", default=PREFERRED),  # 0 preferred, 1 unclean
    Field("topic_partitions", array(TopicPartitions), nullable="0+", default=None),  # null: all
    Field("timeout_ms", INT32, default=60000),
)

PartitionResult = struct(
    "PartitionResult",
    Field("partition_id", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
)

ReplicaElectionResult = struct(
    "ReplicaElectionResult",
    Field("topic", STRING),
    Field("partition_result", array(PartitionResult)),
)

ElectLeadersResponse = struct(
    "ElectLeadersResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, "1+"),
    Field("replica_election_results", array(ReplicaElectionResult)),
)

SCHEMA = ApiSchema(43, "ElectLeaders", "0-2", "2+", ElectLeadersRequest, ElectLeadersResponse)
