"""The key and value formats of ``__consumer_offsets`` records, as Kafka writes them, so the topic
reads the same with Kafka's own tools:

* offset commit — key v1: group, topic, partition; value v3: offset, leader epoch, metadata,
  commit timestamp;
* group metadata — key v2: group; value v3: protocol type, generation, protocol, leader,
  state timestamp, members (id, instance id, client id, host, timeouts, subscription, assignment).

The layouts are the data schemas of ``kctl.protocol.messages.group_coordinator_records``, encoded and
decoded by the shared protocol codec; this module picks the versions the coordinator writes, tells
the two key kinds apart, and keeps the coordinator's names for the structs. Older versions (and
v4, Kafka's first flexible one) are read too. A null value is a tombstone (the offset or group was
deleted); bytes after a value are ignored, as Kafka's reader does."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from kctl.protocol.exceptions import ProtocolDecodeError
from kctl.protocol.messages.group_coordinator_records import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

# The coordinator's names for Kafka's record structs.
OffsetKey = OffsetCommitKey
GroupKey = GroupMetadataKey
OffsetValue = OffsetCommitValue
GroupValue = GroupMetadataValue
MemberValue = MemberMetadata

_VERSION = struct.Struct(">h")


class CorruptOffsetsRecordError(ValueError):
    """A __consumer_offsets record that does not parse."""


def encode_offset_key(key: OffsetCommitKey) -> bytes:
    return OFFSET_COMMIT_KEY.encode(key, OFFSET_KEY_VERSION)


def encode_group_key(key: GroupMetadataKey) -> bytes:
    return GROUP_METADATA_KEY.encode(key, GROUP_KEY_VERSION)


def encode_offset_value(value: OffsetCommitValue) -> bytes:
    return OFFSET_COMMIT_VALUE.encode(value, OFFSET_VALUE_VERSION)


def encode_group_value(value: GroupMetadataValue) -> bytes:
    return GROUP_METADATA_VALUE.encode(value, GROUP_VALUE_VERSION)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """An offset commit key (versions 0-1) or a group metadata key (version 2)."""
    if len(data) < 2:
        raise CorruptOffsetsRecordError(f"a key of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version == 0 or version == 1:
        schema = OFFSET_COMMIT_KEY
    elif version == 2:
        schema = GROUP_METADATA_KEY
    else:
        raise CorruptOffsetsRecordError(f"unknown key version {version}")
    try:
        return schema.decode_body(data, version, 2, allow_trailing=True)
    except ProtocolDecodeError as error:
        raise CorruptOffsetsRecordError(str(error)) from None


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    try:
        return OFFSET_COMMIT_VALUE.decode(data, allow_trailing=True)[1]
    except ProtocolDecodeError as error:
        raise CorruptOffsetsRecordError(str(error)) from None


def decode_group_value(data: bytes) -> GroupMetadataValue:
    try:
        return GROUP_METADATA_VALUE.decode(data, allow_trailing=True)[1]
    except ProtocolDecodeError as error:
        raise CorruptOffsetsRecordError(str(error)) from None


def decode_record(key: bytes, value: bytes | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A __consumer_offsets record as plain data (Kafka's --offsets-decoder): an offset commit or
    group metadata key and value; a null value (a tombstone) stays None. Raises
    CorruptOffsetsRecordError for a record that does not parse."""
    decoded_key = decode_key(key)
    if value is None:
        return dataclasses.asdict(decoded_key), None
    if isinstance(decoded_key, GroupMetadataKey):
        return dataclasses.asdict(decoded_key), dataclasses.asdict(decode_group_value(value))
    return dataclasses.asdict(decoded_key), dataclasses.asdict(decode_offset_value(value))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for_group(group_id: str, partitions: int) -> int:
    """Kafka's placement of a group in __consumer_offsets: abs(hashCode) mod partitions."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions
