# Generated from kctl/protocol/messages/delete_records.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class DeleteRecordsPartition:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...
    offset: int = ...

@dataclass(slots=True)
class DeleteRecordsTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[DeleteRecordsPartition] = ...

@dataclass(slots=True)
class DeleteRecordsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    topics: list[DeleteRecordsTopic] = ...
    timeout_ms: int = ...
    def __kctl_response__(self) -> DeleteRecordsResponse: ...

@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...
    low_watermark: int = ...
    error_code: int = ...

@dataclass(slots=True)
class DeleteRecordsTopicResult:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[DeleteRecordsPartitionResult] = ...

@dataclass(slots=True)
class DeleteRecordsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    topics: list[DeleteRecordsTopicResult] = ...

SCHEMA: ApiSchema
