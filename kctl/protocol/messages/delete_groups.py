"""DeleteGroups (key 42), v0–2, flexible from v2."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, Field, array, struct

DeleteGroupsRequest = struct(
    "DeleteGroupsRequest",
    Field("groups_names", array(STRING)),
)

DeletableGroupResult = struct(
    "DeletableGroupResult",
    Field("group_id", STRING),
    Field("error_code", INT16),
)

DeleteGroupsResponse = struct(
    "DeleteGroupsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(DeletableGroupResult)),
)

SCHEMA = ApiSchema(42, "DeleteGroups", "0-2", "2+", DeleteGroupsRequest, DeleteGroupsResponse)
