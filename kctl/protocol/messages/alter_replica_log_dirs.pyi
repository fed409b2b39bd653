# Generated from kctl/protocol/messages/alter_replica_log_dirs.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class AlterReplicaLogDirTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[int] = ...

@dataclass(slots=True)
class AlterReplicaLogDir:
    __kafka_schema__: ClassVar[StructSchema]
    path: str = ...
    topics: list[AlterReplicaLogDirTopic] = ...

@dataclass(slots=True)
class AlterReplicaLogDirsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    dirs: list[AlterReplicaLogDir] = ...
    def __kctl_response__(self) -> AlterReplicaLogDirsResponse: ...

@dataclass(slots=True)
class AlterReplicaLogDirPartitionResult:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...
    error_code: int = ...

@dataclass(slots=True)
class AlterReplicaLogDirTopicResult:
    __kafka_schema__: ClassVar[StructSchema]
    topic_name: str = ...
    partitions: list[AlterReplicaLogDirPartitionResult] = ...

@dataclass(slots=True)
class AlterReplicaLogDirsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    results: list[AlterReplicaLogDirTopicResult] = ...

SCHEMA: ApiSchema
