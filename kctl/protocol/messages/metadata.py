"""Metadata (key 3), v0–12, flexible from v9: brokers, cluster id, controller, topics and partitions."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, STRING, UUID, Field, array, struct

MetadataRequestTopic = struct(
    "MetadataRequestTopic",
    Field("topic_id", UUID, "10+"),
    Field("name", STRING, nullable="10+"),
)

MetadataRequest = struct(
    "MetadataRequest",
    # null (v1+) asks for all topics; an empty array for none
    Field("topics", array(MetadataRequestTopic), nullable="1+"),
    Field("allow_auto_topic_creation", BOOL, "4+", default=True),
    Field("include_cluster_authorized_operations", BOOL, "8-10"),
    Field("include_topic_authorized_operations", BOOL, "8+"),
)

MetadataResponseBroker = struct(
    "MetadataResponseBroker",
    Field("node_id", INT32),
    Field("host", STRING),
    Field("port", INT32),
    Field("rack", STRING, "1+", nullable="1+", default=None),
)

MetadataResponsePartition = struct(
    "MetadataResponsePartition",
    Field("error_code", INT16),
    Field("partition_index", INT32),
    Field("leader_id", INT32),
    Field("leader_epoch", INT32, "7+", default=-1),
    Field("replica_nodes", array(INT32)),
    Field("isr_nodes", array(INT32)),
    Field("offline_replicas", array(INT32), "5+"),
)

MetadataResponseTopic = struct(
    "MetadataResponseTopic",
    Field("error_code", INT16),
    Field("name", STRING, nullable="12+"),
    Field("topic_id", UUID, "10+"),
    Field("is_internal", BOOL, "1+", default=False),
    Field("partitions", array(MetadataResponsePartition)),
    Field("topic_authorized_operations", INT32, "8+", default=-2147483648),
)

MetadataResponse = struct(
    "MetadataResponse",
    Field("throttle_time_ms", INT32, "3+"),
    Field("brokers", array(MetadataResponseBroker)),
    Field("cluster_id", STRING, "2+", nullable="2+", default=None),
    Field("controller_id", INT32, "1+", default=-1),
    Field("topics", array(MetadataResponseTopic)),
    Field("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
)

SCHEMA = ApiSchema(3, "Metadata", "0-12", "9+", MetadataRequest, MetadataResponse)
