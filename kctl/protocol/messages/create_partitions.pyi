# Generated from kctl/protocol/messages/create_partitions.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class CreatePartitionsAssignment:
    __kafka_schema__: ClassVar[StructSchema]
    broker_ids: list[int] = ...

@dataclass(slots=True)
class CreatePartitionsTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    count: int = ...
    assignments: list[CreatePartitionsAssignment] | None = ...

@dataclass(slots=True)
class CreatePartitionsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    topics: list[CreatePartitionsTopic] = ...
    timeout_ms: int = ...
    validate_only: bool = ...

@dataclass(slots=True)
class CreatePartitionsTopicResult:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    error_code: int = ...
    error_message: str | None = ...

@dataclass(slots=True)
class CreatePartitionsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    results: list[CreatePartitionsTopicResult] = ...

SCHEMA: ApiSchema
