"""DeleteRecords (key 21), v0–2, flexible from v2: advance partitions' log start offsets."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

DeleteRecordsPartition = struct(
    "DeleteRecordsPartition",
    Field("partition_index", INT32),
    Field("offset", INT64),
)

DeleteRecordsTopic = struct(
    "DeleteRecordsTopic",
    Field("name", STRING),
    Field("partitions", array(DeleteRecordsPartition)),
)

DeleteRecordsRequest = struct(
    "DeleteRecordsRequest",
    Field("topics", array(DeleteRecordsTopic)),
    Field("timeout_ms", INT32),
)

DeleteRecordsPartitionResult = struct(
    "DeleteRecordsPartitionResult",
    Field("partition_index", INT32),
    Field("low_watermark", INT64),
    Field("error_code", INT16),
)

DeleteRecordsTopicResult = struct(
    "DeleteRecordsTopicResult",
    Field("name", STRING),
    Field("partitions", array(DeleteRecordsPartitionResult)),
)

DeleteRecordsResponse = struct(
    "DeleteRecordsResponse",
    Field("throttle_time_ms", INT32),
    Field("topics", array(DeleteRecordsTopicResult)),
)

SCHEMA = ApiSchema(21, "DeleteRecords", "0-2", "2+", DeleteRecordsRequest, DeleteRecordsResponse)
