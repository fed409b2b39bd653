"""The key and value formats of ``__consumer_offsets`` records, as Kafka writes them, so the topic
reads the same with Kafka's own tools:

* offset commit — key v1: group, topic, partition; value v3: offset, leader epoch, metadata,
  commit timestamp;
* group metadata — key v2: group; value v3: protocol type, generation, protocol, leader,
  state timestamp, members (id, instance id, client id, host, timeouts, subscription, assignment).

A null value is a tombstone (the offset or group was deleted)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


class CorruptOffsetsRecordError(ValueError):
    """A __consumer_offsets record that does not parse."""


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, value: int) -> _Writer:
        self.out += struct.pack(">h", value)
        return self

    def int32(self, value: int) -> _Writer:
        self.out += struct.pack(">i", value)
        return self

    def int64(self, value: int) -> _Writer:
        self.out += struct.pack(">q", value)
        return self

    def string(self, value: str | None) -> _Writer:
        if value is None:
            return self.int16(-1)
        raw = value.encode()
        self.int16(len(raw))
        self.out += raw
        return self

    def bytes(self, value: bytes | None) -> _Writer:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self.out += value
        return self


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptOffsetsRecordError(f"truncated record at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def string(self) -> str | None:
        size = self.int16()
        return None if size < 0 else self._take(size).decode("utf-8", errors="replace")

    def bytes(self) -> bytes | None:
        size = self.int32()
        return None if size < 0 else bytes(self._take(size))


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


def encode_offset_key(key: OffsetKey) -> bytes:
    return bytes(
        _Writer().int16(OFFSET_KEY_VERSION).string(key.group).string(key.topic).int32(key.partition).out
    )


def encode_group_key(key: GroupKey) -> bytes:
    return bytes(_Writer().int16(GROUP_KEY_VERSION).string(key.group).out)


def encode_offset_value(value: OffsetValue) -> bytes:
    writer = _Writer().int16(OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return bytes(writer.string(value.metadata).int64(value.commit_timestamp).out)


def encode_group_value(value: GroupValue) -> bytes:
    writer = _Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
    writer.string(value.protocol).string(value.leader).int64(value.current_state_timestamp)
    writer.int32(len(value.members))
    for member in value.members:
        writer.string(member.member_id).string(member.group_instance_id).string(member.client_id)
        writer.string(member.client_host).int32(member.rebalance_timeout).int32(member.session_timeout)
        writer.bytes(member.subscription).bytes(member.assignment)
    return bytes(writer.out)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        group, topic = reader.string() or "", reader.string() or ""
        return OffsetKey(group, topic, reader.int32())
    if version == 2:
        return GroupKey(reader.string() or "")
    raise CorruptOffsetsRecordError(f"unknown key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.int16()
    offset = reader.int64()
    if version == 0:
        metadata = reader.string() or ""
        return OffsetValue(offset, -1, metadata, reader.int64())
    if version == 1:
        metadata = reader.string() or ""
        timestamp = reader.int64()
        reader.int64()  # expire timestamp, unused since Kafka 2.1
        return OffsetValue(offset, -1, metadata, timestamp)
    if version in (2, 3):
        epoch = reader.int32() if version == 3 else -1
        metadata = reader.string() or ""
        return OffsetValue(offset, epoch, metadata, reader.int64())
    raise CorruptOffsetsRecordError(f"unknown offset value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
    version = reader.int16()
    if not 0 <= version <= 4:
        raise CorruptOffsetsRecordError(f"unknown group value version {version}")
    protocol_type = reader.string() or ""
    generation = reader.int32()
    protocol = reader.string()
    leader = reader.string()
    timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.int32()):
        member_id = reader.string() or ""
        instance = reader.string() if version >= 3 else None
        client_id = reader.string() or ""
        host = reader.string() or ""
        rebalance = reader.int32() if version >= 1 else -1
        session = reader.int32()
        subscription = reader.bytes() or b""
        assignment = reader.bytes() or b""
        members.append(
            MemberValue(member_id, instance, client_id, host, rebalance, session, subscription, assignment)
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, members)


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
