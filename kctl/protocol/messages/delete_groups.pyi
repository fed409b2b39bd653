# Generated from kctl/protocol/messages/delete_groups.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class DeleteGroupsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    groups_names: list[str] = ...
    def __kctl_response__(self) -> DeleteGroupsResponse: ...

@dataclass(slots=True)
class DeletableGroupResult:
    __kafka_schema__: ClassVar[StructSchema]
    group_id: str = ...
    error_code: int = ...

@dataclass(slots=True)
class DeleteGroupsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    results: list[DeletableGroupResult] = ...

SCHEMA: ApiSchema
