"""FindCoordinator (key 10), v0–6, flexible from v3; v4+ looks up a batch of coordinator keys.

``key_type``: 0 group, 1 transaction (2 share, v6). v5 and v6 add no fields (new error/key type only).
"""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT8, INT16, INT32, STRING, Field, array, struct

FindCoordinatorRequest = struct(
    "FindCoordinatorRequest",
    Field("key", STRING, "0-3"),
    Field("key_type", INT8, "1+", default=0),
    Field("coordinator_keys", array(STRING), "4+"),
)

Coordinator = struct(
    "Coordinator",
    Field("key", STRING, "4+"),
    Field("node_id", INT32, "4+"),
    Field("host", STRING, "4+"),
    Field("port", INT32, "4+"),
    Field("error_code", INT16, "4+"),
    Field("error_message", STRING, "4+", nullable="4+"),
)

FindCoordinatorResponse = struct(
    "FindCoordinatorResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("error_code", INT16, "0-3"),
    Field("error_message", STRING, "1-3", nullable="1-3"),
    Field("node_id", INT32, "0-3"),
    Field("host", STRING, "0-3"),
    Field("port", INT32, "0-3"),
    Field("coordinators", array(Coordinator), "4+"),
)

SCHEMA = ApiSchema(10, "FindCoordinator", "0-6", "3+", FindCoordinatorRequest, FindCoordinatorResponse)
