"""AlterReplicaLogDirs (key 34), v0–2, flexible from v2 (v1 is v0 on the wire): move partitions of
this broker to another of its log directories."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

AlterReplicaLogDirTopic = struct(
    "AlterReplicaLogDirTopic",
    Field("name", STRING),
    Field("partitions", array(INT32)),
)

AlterReplicaLogDir = struct(
    "AlterReplicaLogDir",
    Field("path", STRING),
    Field("topics", array(AlterReplicaLogDirTopic)),
)

AlterReplicaLogDirsRequest = struct(
    "AlterReplicaLogDirsRequest",
    Field("dirs", array(AlterReplicaLogDir)),
)

AlterReplicaLogDirPartitionResult = struct(
    "AlterReplicaLogDirPartitionResult",
    Field("partition_index", INT32),
    Field("error_code", INT16),
)

AlterReplicaLogDirTopicResult = struct(
    "AlterReplicaLogDirTopicResult",
    Field("topic_name", STRING),
    Field("partitions", array(AlterReplicaLogDirPartitionResult)),
)

AlterReplicaLogDirsResponse = struct(
    "AlterReplicaLogDirsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(AlterReplicaLogDirTopicResult)),
)

SCHEMA = ApiSchema(
    34, "AlterReplicaLogDirs", "0-2", "2+", AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
)
