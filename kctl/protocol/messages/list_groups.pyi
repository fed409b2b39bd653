# Generated from kctl/protocol/messages/list_groups.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class ListGroupsRequest:
    __kafka_schema__: ClassVar[StructSchema]
    states_filter: list[str] = ...
    types_filter: list[str] = ...

@dataclass(slots=True)
class ListedGroup:
    __kafka_schema__: ClassVar[StructSchema]
    group_id: str = ...
    protocol_type: str = ...
    group_state: str = ...
    group_type: str = ...

@dataclass(slots=True)
class ListGroupsResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    error_code: int = ...
    groups: list[ListedGroup] = ...

SCHEMA: ApiSchema
