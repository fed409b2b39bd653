"""JoinGroup (key 11), v0–9, flexible from v6: the first phase of the classic group protocol."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, BYTES, INT16, INT32, STRING, Field, array, struct

JoinGroupRequestProtocol = struct(
    "JoinGroupRequestProtocol",
    Field("name", STRING),
    Field("metadata", BYTES),
)

JoinGroupRequest = struct(
    "JoinGroupRequest",
    Field("group_id", STRING),
    Field("session_timeout_ms", INT32),
    Field("rebalance_timeout_ms", INT32, "1+", default=-1),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
    Field("protocol_type", STRING),
    Field("protocols", array(JoinGroupRequestProtocol)),
    Field("reason", STRING, "8+", nullable="8+", default=None),
)

JoinGroupResponseMember = struct(
    "JoinGroupResponseMember",
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
    Field("metadata", BYTES),
)

JoinGroupResponse = struct(
    "JoinGroupResponse",
    Field("throttle_time_ms", INT32, "2+"),
    Field("error_code", INT16),
    Field("generation_id", INT32, default=-1),
    Field("protocol_type", STRING, "7+", nullable="7+", default=None),
    Field("protocol_name", STRING, nullable="7+"),
    Field("leader", STRING),
    Field("skip_assignment", BOOL, "9+", default=False),
    Field("member_id", STRING),
    Field("members", array(JoinGroupResponseMember)),
)

SCHEMA = ApiSchema(11, "JoinGroup", "0-9", "6+", JoinGroupRequest, JoinGroupResponse)
