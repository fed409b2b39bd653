"""LeaveGroup (key 13), v0–5, flexible from v4; v3+ removes a batch of members."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

MemberIdentity = struct(
    "MemberIdentity",
    Field("member_id", STRING, "3+"),
    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    Field("reason", STRING, "5+", nullable="5+", default=None),
)

LeaveGroupRequest = struct(
    "LeaveGroupRequest",
    Field("group_id", STRING),
    Field("member_id", STRING, "0-2"),
    Field("members", array(MemberIdentity), "3+"),
)

MemberResponse = struct(
    "MemberResponse",
    Field("member_id", STRING, "3+"),
    Field("group_instance_id", STRING, "3+", nullable="3+"),
    Field("error_code", INT16, "3+"),
)

LeaveGroupResponse = struct(
    "LeaveGroupResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16),
    Field("members", array(MemberResponse), "3+"),
)

SCHEMA = ApiSchema(13, "LeaveGroup", "0-5", "4+", LeaveGroupRequest, LeaveGroupResponse)
