"""InitProducerId (key 22), v0–5, flexible from v2: a producer id and epoch for idempotence/txns."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, struct

InitProducerIdRequest = struct(
    "InitProducerIdRequest",
    # null for an idempotent (non-transactional) producer; Kafka's spec gives no default, we use null
    Field("transactional_id", STRING, nullable="0+", default=None),
    Field("transaction_timeout_ms", INT32),
    Field("producer_id", INT64, "3+", default=-1),
    Field("producer_epoch", INT16, "3+", default=-1),
)

InitProducerIdResponse = struct(
    "InitProducerIdResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("producer_id", INT64, default=-1),
    Field("producer_epoch", INT16),
)

SCHEMA = ApiSchema(22, "InitProducerId", "0-5", "2+", InitProducerIdRequest, InitProducerIdResponse)
