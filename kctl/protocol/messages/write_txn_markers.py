"""WriteTxnMarkers (key 27), v0–1 (v1+ flexible): the transaction coordinator asks partition leaders to
append COMMIT (``transaction_result`` true) or ABORT (false) markers ending a producer's transaction,
stamped with the coordinator's epoch; each partition answers with its own error code."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, array, struct

WritableTxnMarkerTopic = struct(
    "WritableTxnMarkerTopic",
    Field("name", STRING),
    Field("partition_indexes", array(INT32)),
)

WritableTxnMarker = struct(
    "WritableTxnMarker",
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("transaction_result", BOOL),
    Field("topics", array(WritableTxnMarkerTopic)),
    Field("coordinator_epoch", INT32),
)

WriteTxnMarkersRequest = struct(
    "WriteTxnMarkersRequest",
    Field("markers", array(WritableTxnMarker)),
)

WritableTxnMarkerPartitionResult = struct(
    "WritableTxnMarkerPartitionResult",
    Field("partition_index", INT32),
    Field("error_code", INT16),
)

WritableTxnMarkerTopicResult = struct(
    "WritableTxnMarkerTopicResult",
    Field("name", STRING),
    Field("partitions", array(WritableTxnMarkerPartitionResult)),
)

WritableTxnMarkerResult = struct(
    "WritableTxnMarkerResult",
    Field("producer_id", INT64),
    Field("topics", array(WritableTxnMarkerTopicResult)),
)

WriteTxnMarkersResponse = struct(
    "WriteTxnMarkersResponse",
    Field("markers", array(WritableTxnMarkerResult)),
)

SCHEMA = ApiSchema(27, "WriteTxnMarkers", "0-1", "1+", WriteTxnMarkersRequest, WriteTxnMarkersResponse)
