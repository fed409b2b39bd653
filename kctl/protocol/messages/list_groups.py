"""ListGroups (key 16), v0–5, flexible from v3; v4 filters by state, v5 by type."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

ListGroupsRequest = struct(
    "ListGroupsRequest",
    Field("states_filter", array(STRING), "4+"),
    Field("types_filter", array(STRING), "5+"),
)

ListedGroup = struct(
    "ListedGroup",
    Field("group_id", STRING),
    Field("protocol_type", STRING),
    Field("group_state", STRING, "4+"),
    Field("group_type", STRING, "5+"),
)

ListGroupsResponse = struct(
    "ListGroupsResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16),
    Field("groups", array(ListedGroup)),
)

SCHEMA = ApiSchema(16, "ListGroups", "0-5", "3+", ListGroupsRequest, ListGroupsResponse)
