"""AddOffsetsToTxn (key 25), v0–4, flexible from v3: a transactional producer adds a consumer group's
``__consumer_offsets`` partition to its transaction before committing offsets in it
(``send_offsets_to_transaction``)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, struct

AddOffsetsToTxnRequest = struct(
    "AddOffsetsToTxnRequest",
    Field("transactional_id", STRING),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("group_id", STRING),
)

AddOffsetsToTxnResponse = struct(
    "AddOffsetsToTxnResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
)

SCHEMA = ApiSchema(25, "AddOffsetsToTxn", "0-4", "3+", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse)
