# Generated from kctl/protocol/messages/add_offsets_to_txn.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class AddOffsetsToTxnRequest:
    __kafka_schema__: ClassVar[StructSchema]
    transactional_id: str = ...
    producer_id: int = ...
    producer_epoch: int = ...
    group_id: str = ...
    def __kctl_response__(self) -> AddOffsetsToTxnResponse: ...

@dataclass(slots=True)
class AddOffsetsToTxnResponse:
    __kafka_schema__: ClassVar[StructSchema]
    throttle_time_ms: int = ...
    error_code: int = ...

SCHEMA: ApiSchema
