# Generated from kctl/protocol/messages/heartbeat.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class HeartbeatRequest:
    __kafka_schema__: ClassVar[StructSchema]
    group_id: str = ...
    generation_id: int = ...
    member_id: str = ...
    group_instance_id: str | None = ...
    def __kctl_response__(self) -> HeartbeatResponse: ...

@dataclass(slots=True)
class HeartbeatResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    error_code: int = ...

SCHEMA: ApiSchema
