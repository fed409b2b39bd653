# Generated from kctl/protocol/messages/delete_topics.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

import uuid
from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class DeleteTopicState:
    __kafka_schema__: ClassVar[StructSchema]
    name: str | None = ...
    topic_id: uuid.UUID = ...

@dataclass(slots=True)
class DeleteTopicsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    topics: list[DeleteTopicState] = ...
    topic_names: list[str] = ...
    timeout_ms: int = ...

@dataclass(slots=True)
class DeletableTopicResult:
    __kafka_schema__: ClassVar[StructSchema]
    name: str | None = ...
    topic_id: uuid.UUID = ...
    error_code: int = ...
    error_message: str | None = ...

@dataclass(slots=True)
class DeleteTopicsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    responses: list[DeletableTopicResult] = ...

SCHEMA: ApiSchema
