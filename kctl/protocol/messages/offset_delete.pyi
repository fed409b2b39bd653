# Generated from kctl/protocol/messages/offset_delete.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class OffsetDeleteRequestPartition:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...

@dataclass(slots=True)
class OffsetDeleteRequestTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[OffsetDeleteRequestPartition] = ...

@dataclass(slots=True)
class OffsetDeleteRequest:
    __kafka_schema__: ClassVar[StructSchema]
    group_id: str = ...
    topics: list[OffsetDeleteRequestTopic] = ...
    def __kctl_response__(self) -> OffsetDeleteResponse: ...

@dataclass(slots=True)
class OffsetDeleteResponsePartition:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...
    error_code: int = ...

@dataclass(slots=True)
class OffsetDeleteResponseTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[OffsetDeleteResponsePartition] = ...

@dataclass(slots=True)
class OffsetDeleteResponse:
    __kafka_schema__: ClassVar[StructSchema]
    error_code: int = ...
    throttle_time_ms: int = ...
    topics: list[OffsetDeleteResponseTopic] = ...

SCHEMA: ApiSchema
