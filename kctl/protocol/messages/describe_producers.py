"""DescribeProducers (key 61), v0, flexible: the active (idempotent or transactional) producers of
partitions, from each leader's producer state."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

DescribeProducersTopicRequest = struct(
    "DescribeProducersTopicRequest",
    Field("name", STRING),
    Field("partition_indexes", array(INT32)),
)

DescribeProducersRequest = struct(
    "DescribeProducersRequest",
    Field("topics", array(DescribeProducersTopicRequest)),
)

ProducerState = struct(
    "ProducerState",
    Field("producer_id", INT64),
    Field("producer_epoch", INT32),
    Field("last_sequence", INT32, default=-1),
    Field("last_timestamp", INT64, default=-1),
    Field("coordinator_epoch", INT32),
    Field("current_txn_start_offset", INT64, default=-1),
)

DescribeProducersPartitionResponse = struct(
    "DescribeProducersPartitionResponse",
    Field("partition_index", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("active_producers", array(ProducerState)),
)

DescribeProducersTopicResponse = struct(
    "DescribeProducersTopicResponse",
    Field("name", STRING),
    Field("partitions", array(DescribeProducersPartitionResponse)),
)

DescribeProducersResponse = struct(
    "DescribeProducersResponse",
    Field("throttle_time_ms", INT32),
    Field("topics", array(DescribeProducersTopicResponse)),
)

SCHEMA = ApiSchema(61, "DescribeProducers", "0", "0+", DescribeProducersRequest, DescribeProducersResponse)
