# Generated from kctl/protocol/messages/elect_leaders.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class TopicPartitions:
    __kafka_schema__: ClassVar[StructSchema]
    topic: str = ...
    partitions: list[int] = ...

@dataclass(slots=True)
class ElectLeadersRequest:
    __kafka_schema__: ClassVar[StructSchema]
    election_type: int = ...
    topic_partitions: list[TopicPartitions] | None = ...
    timeout_ms: int = ...

@dataclass(slots=True)
class PartitionResult:
    __kafka_schema__: ClassVar[StructSchema]
    partition_id: int = ...
    error_code: int = ...
    error_message: str | None = ...

@dataclass(slots=True)
class ReplicaElectionResult:
    __kafka_schema__: ClassVar[StructSchema]
    topic: str = ...
    partition_result: list[PartitionResult] = ...

@dataclass(slots=True)
class ElectLeadersResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    error_code: int = ...
    replica_election_results: list[ReplicaElectionResult] = ...

PREFERRED: int
UNCLEAN: int
SCHEMA: ApiSchema
