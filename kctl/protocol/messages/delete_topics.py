"""DeleteTopics (key 20), v0–6, flexible from v4; v6 names topics by name and/or id."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, STRING, UUID, Field, array, struct

DeleteTopicState = struct(
    "DeleteTopicState",
    Field("name", STRING, "6+", nullable="6+", default=None),
    Field("topic_id", UUID, "6+"),
)

DeleteTopicsRequest = struct(
    "DeleteTopicsRequest",
    Field("topics", array(DeleteTopicState), "6+"),
    Field("topic_names", array(STRING), "0-5"),
    Field("timeout_ms", INT32),
)

DeletableTopicResult = struct(
    "DeletableTopicResult",
    Field("name", STRING, nullable="6+"),
    Field("topic_id", UUID, "6+"),
    Field("error_code", INT16),
    Field("error_message", STRING, "5+", nullable="5+", default=None),
)

DeleteTopicsResponse = struct(
    "DeleteTopicsResponse",
    Field("throttle_time_ms", INT32, "1+"),
    Field("responses", array(DeletableTopicResult)),
)

SCHEMA = ApiSchema(20, "DeleteTopics", "0-6", "4+", DeleteTopicsRequest, DeleteTopicsResponse)
