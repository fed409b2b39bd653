"""DescribeLogDirs (key 35), v0–4, flexible from v2: a broker's log directories, the partitions in
each and their size on disk."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, array, struct

DescribableLogDirTopic = struct(
    "DescribableLogDirTopic",
    Field("topic", STRING),
    Field("partitions", array(INT32)),
)

DescribeLogDirsRequest = struct(
    "DescribeLogDirsRequest",
    Field("topics", array(DescribableLogDirTopic), nullable="0+", default=None),  # null: every topic
)

DescribeLogDirsPartition = struct(
    "DescribeLogDirsPartition",
    Field("partition_index", INT32),
    Field("partition_size", INT64),
    Field("offset_lag", INT64),
    Field("is_future_key", BOOL),
)

DescribeLogDirsTopic = struct(
    "DescribeLogDirsTopic",
    Field("name", STRING),
    Field("partitions", array(DescribeLogDirsPartition)),
)

DescribeLogDirsResult = struct(
    "DescribeLogDirsResult",
    Field("error_code", INT16),
    Field("log_dir", STRING),
    Field("topics", array(DescribeLogDirsTopic)),
    Field("total_bytes", INT64, "4+", default=-1),
    Field("usable_bytes", INT64, "4+", default=-1),
)

DescribeLogDirsResponse = struct(
    "DescribeLogDirsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, "3+"),
    Field("results", array(DescribeLogDirsResult)),
)

SCHEMA = ApiSchema(35, "DescribeLogDirs", "0-4", "2+", DescribeLogDirsRequest, DescribeLogDirsResponse)
