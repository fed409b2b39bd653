# Generated from kctl/protocol/messages/consumer_protocol.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.data import DataSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class ConsumerProtocolTopicPartition:
    __kafka_schema__: ClassVar[StructSchema]
    topic: str = ...
    partitions: list[int] = ...

@dataclass(slots=True)
class ConsumerProtocolSubscription:
    __kafka_schema__: ClassVar[StructSchema]
    topics: list[str] = ...
    user_data: bytes | None = ...
    owned_partitions: list[ConsumerProtocolTopicPartition] = ...
    generation_id: int = ...
    rack_id: str | None = ...

@dataclass(slots=True)
class ConsumerProtocolAssignment:
    __kafka_schema__: ClassVar[StructSchema]
    assigned_partitions: list[ConsumerProtocolTopicPartition] = ...
    user_data: bytes | None = ...

@dataclass(slots=True)
class StickyAssignorUserData:
    __kafka_schema__: ClassVar[StructSchema]
    previous_assignment: list[ConsumerProtocolTopicPartition] = ...
    generation: int = ...

PROTOCOL_TYPE: str
SUBSCRIPTION: DataSchema
ASSIGNMENT: DataSchema
STICKY_ASSIGNOR_USER_DATA: DataSchema
