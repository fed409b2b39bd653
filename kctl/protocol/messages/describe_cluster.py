"""DescribeCluster (key 60), v0–1, flexible in every version."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT8, INT16, INT32, STRING, Field, array, struct

DescribeClusterRequest = struct(
    "DescribeClusterRequest",
    Field("include_cluster_authorized_operations", BOOL),
    Field("endpoint_type", INT8, "1+", default=1),  # 1 brokers, 2 controllers
)

DescribeClusterBroker = struct(
    "DescribeClusterBroker",
    Field("broker_id", INT32),
    Field("host", STRING),
    Field("port", INT32),
    Field("rack", STRING, nullable="0+", default=None),
)

DescribeClusterResponse = struct(
    "DescribeClusterResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("endpoint_type", INT8, "1+", default=1),
    Field("cluster_id", STRING),
    Field("controller_id", INT32, default=-1),
    Field("brokers", array(DescribeClusterBroker)),
    Field("cluster_authorized_operations", INT32, default=-2147483648),
)

SCHEMA = ApiSchema(60, "DescribeCluster", "0-1", "0+", DescribeClusterRequest, DescribeClusterResponse)
