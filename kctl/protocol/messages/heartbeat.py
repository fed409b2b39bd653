"""Heartbeat (key 12), v0–4, flexible from v4."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, struct

HeartbeatRequest = struct(
    "HeartbeatRequest",
    Field("group_id", STRING),
    Field("generation_id", INT32),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
)

HeartbeatResponse = struct(
    "HeartbeatResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16),
)

SCHEMA = ApiSchema(12, "Heartbeat", "0-4", "4+", HeartbeatRequest, HeartbeatResponse)
