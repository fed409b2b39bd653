"""SyncGroup (key 14), v0–5, flexible from v4: the leader hands out assignments."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BYTES, INT16, INT32, STRING, Field, array, struct

SyncGroupRequestAssignment = struct(
    "SyncGroupRequestAssignment",
    Field("member_id", STRING),
    Field("assignment", BYTES),
)

SyncGroupRequest = struct(
    "SyncGroupRequest",
    Field("group_id", STRING),
    Field("generation_id", INT32),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    Field("protocol_type", STRING, "5+", nullable="5+", default=None),
    Field("protocol_name", STRING, "5+", nullable="5+", default=None),
    Field("assignments", array(SyncGroupRequestAssignment)),
)

SyncGroupResponse = struct(
    "SyncGroupResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16),
    Field("protocol_type", STRING, "5+", nullable="5+", default=None),
    Field("protocol_name", STRING, "5+", nullable="5+", default=None),
    Field("assignment", BYTES),
)

SCHEMA = ApiSchema(14, "SyncGroup", "0-5", "4+", SyncGroupRequest, SyncGroupResponse)
