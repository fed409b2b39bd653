# Generated from kctl/protocol/messages/write_txn_markers.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class WritableTxnMarkerTopic:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partition_indexes: list[int] = ...

@dataclass(slots=True)
class WritableTxnMarker:
    __kafka_schema__: ClassVar[StructSchema]
    producer_id: int = ...
    producer_epoch: int = ...
    transaction_result: bool = ...
    topics: list[WritableTxnMarkerTopic] = ...
    coordinator_epoch: int = ...

@dataclass(slots=True)
class WriteTxnMarkersRequest:
    __kafka_schema__: ClassVar[StructSchema]
    markers: list[WritableTxnMarker] = ...
    def __kctl_response__(self) -> WriteTxnMarkersResponse: ...

@dataclass(slots=True)
class WritableTxnMarkerPartitionResult:
    __kafka_schema__: ClassVar[StructSchema]
    partition_index: int = ...
    error_code: int = ...

@dataclass(slots=True)
class WritableTxnMarkerTopicResult:
    __kafka_schema__: ClassVar[StructSchema]
    name: str = ...
    partitions: list[WritableTxnMarkerPartitionResult] = ...

@dataclass(slots=True)
class WritableTxnMarkerResult:
    __kafka_schema__: ClassVar[StructSchema]
    producer_id: int = ...
    topics: list[WritableTxnMarkerTopicResult] = ...

@dataclass(slots=True)
class WriteTxnMarkersResponse:
    __kafka_schema__: ClassVar[StructSchema]
    markers: list[WritableTxnMarkerResult] = ...

SCHEMA: ApiSchema
