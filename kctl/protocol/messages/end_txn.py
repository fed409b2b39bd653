"""EndTxn (key 26), v0–5, flexible from v3: a transactional producer commits (``committed`` true) or
aborts its transaction. v5 (KIP-890 part 2) answers the producer id and epoch."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, struct

EndTxnRequest = struct(
    "EndTxnRequest",
    Field("transactional_id", STRING),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("committed", BOOL),
)

EndTxnResponse = struct(
    "EndTxnResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, "5+", default=-1),
    Field("producer_epoch", INT16, "5+", default=-1),
)

SCHEMA = ApiSchema(26, "EndTxn", "0-5", "3+", EndTxnRequest, EndTxnResponse)
