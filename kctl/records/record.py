"""Decoded records: what a consumer sees after the record codec has read a batch.

This module owns the in-memory types of the record level of RecordBatch v2 — :class:`Record` (one
record with its absolute offset and timestamp), :class:`DecodedBatch` (a batch header with its
records) — and the control records transaction markers are made of (:class:`ControlRecord`): a
control batch's record key is ``int16 version, int16 type`` (0 = ABORT, 1 = COMMIT) and its value,
for those two types, the EndTransactionMarker ``int16 version, int32 coordinator_epoch``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from kctl.records.compression import CompressionType
from kctl.records.header import NO_TIMESTAMP, BatchHeader

__all__ = ["ControlRecord", "ControlRecordType", "DecodedBatch", "Record"]

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One record: absolute offset, timestamp (ms), key, value and headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


@dataclass(slots=True)
class DecodedBatch:
    """A batch header and its decoded records (offsets and timestamps already absolute)."""

    header: BatchHeader
    records: list[Record]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        """Bytes the encoded batch occupies, header included."""
        return self.header.size

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.header.compression)

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def is_log_append_time(self) -> bool:
        return self.header.is_log_append_time

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def has_timestamps(self) -> bool:
        return self.header.max_timestamp != NO_TIMESTAMP


class ControlRecordType(IntEnum):
    """The type field of a control record's key."""

    ABORT = 0
    COMMIT = 1


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


@dataclass(slots=True, frozen=True)
class ControlRecord:
    """A control record (transaction marker) of a control batch.

    ``type`` is a ControlRecordType for the known types, the raw int16 otherwise (readers must skip
    unknown types); ``coordinator_epoch`` comes from the EndTransactionMarker value of ABORT/COMMIT."""

    type: ControlRecordType | int
    version: int = CONTROL_RECORD_KEY_VERSION
    coordinator_epoch: int | None = None

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None = None) -> ControlRecord:
        """Decode a control record from its key (and value, for transaction markers).

        Raises ValueError if the key is missing or shorter than 4 bytes."""
        if key is None or len(key) < _CONTROL_KEY.size:
            raise ValueError(f"control record key must hold int16 version + int16 type, got {key!r}")
        version, raw_type = _CONTROL_KEY.unpack_from(key)
        control_type: ControlRecordType | int
        try:
            control_type = ControlRecordType(raw_type)
        except ValueError:
            control_type = raw_type
        coordinator_epoch = None
        is_marker = isinstance(control_type, ControlRecordType)
        if is_marker and value is not None and len(value) >= _END_TXN_MARKER.size:
            _, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
        return cls(control_type, version, coordinator_epoch)

    @classmethod
    def from_record(cls, record: Record) -> ControlRecord:
        return cls.decode(record.key, record.value)

    def encode_key(self) -> bytes:
        return _CONTROL_KEY.pack(self.version, int(self.type))

    def encode_value(self) -> bytes | None:
        """The EndTransactionMarker value (None when ``coordinator_epoch`` is not set)."""
        if self.coordinator_epoch is None:
            return None
        return _END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)
