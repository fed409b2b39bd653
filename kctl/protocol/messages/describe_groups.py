"""DescribeGroups (key 15), v0–5, flexible from v5."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, BYTES, INT16, INT32, STRING, Field, array, struct

DescribeGroupsRequest = struct(
    "DescribeGroupsRequest",
    Field("groups", array(STRING)),
    Field("include_authorized_operations", BOOL, "3+"),
)

DescribedGroupMember = struct(
    "DescribedGroupMember",
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "4+", nullable="4+", default=None),
    Field("client_id", STRING),
    Field("client_host", STRING),
    Field("member_metadata", BYTES),
    Field("member_assignment", BYTES),
)

DescribedGroup = struct(
    "DescribedGroup",
    Field("error_code", INT16),
    Field("group_id", STRING),
    Field("group_state", STRING),
    Field("protocol_type", STRING),
    Field("protocol_data", STRING),
    Field("members", array(DescribedGroupMember)),
    Field("authorized_operations", INT32, "3+", default=-2147483648),
)

DescribeGroupsResponse = struct(
    "DescribeGroupsResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("groups", array(DescribedGroup)),
)

SCHEMA = ApiSchema(15, "DescribeGroups", "0-5", "5+", DescribeGroupsRequest, DescribeGroupsResponse)
