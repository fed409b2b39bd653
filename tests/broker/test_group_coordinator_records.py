"""The ``__consumer_offsets`` record formats (kctl.broker.group.records, declared as data schemas in
kctl.protocol.messages.group_coordinator_records) against bytes laid out by hand here from Kafka's
record specs, version by version — the bytes the coordinator writes, and every version it reads
(including v4, Kafka's first flexible one, with compact strings and tag sections)."""

from __future__ import annotations

import struct

import pytest

from kctl.broker.group.records import (
    CorruptOffsetsRecordError,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None, *, compact: bool = False) -> bytes:
    if v is None:
        return b"\x00" if compact else b"\xff\xff"
    raw = v.encode()
    return (bytes([len(raw) + 1]) if compact else i16(len(raw))) + raw


def b(v: bytes, *, compact: bool = False) -> bytes:
    return (bytes([len(v) + 1]) if compact else i32(len(v))) + v


TAGS = b"\x00"  # an empty tagged-field section


def test_keys() -> None:
    key = OffsetKey("group-é", "orders", 7)
    assert encode_offset_key(key) == i16(1) + s("group-é") + s("orders") + i32(7)
    for version in (0, 1):  # the same layout
        assert decode_key(i16(version) + s("group-é") + s("orders") + i32(7)) == key
    assert encode_group_key(GroupKey("g")) == i16(2) + s("g")
    assert decode_key(i16(2) + s("g")) == GroupKey("g")
    with pytest.raises(CorruptOffsetsRecordError, match="unknown key version 3"):
        decode_key(i16(3) + s("g"))
    with pytest.raises(CorruptOffsetsRecordError):
        decode_key(i16(1) + s("g") + s("t") + b"\x00\x00")  # ends inside the partition
    with pytest.raises(CorruptOffsetsRecordError):
        decode_key(b"\x00")


OFFSET = OffsetValue(1234567890123, 5, "meta", 1_700_000_000_000)


def offset_value_bytes(version: int) -> bytes:
    o = OFFSET
    if version == 0 or version == 2:
        return i16(version) + i64(o.offset) + s(o.metadata) + i64(o.commit_timestamp)
    if version == 1:
        return i16(1) + i64(o.offset) + s(o.metadata) + i64(o.commit_timestamp) + i64(1_700_000_600_000)
    if version == 3:
        return i16(3) + i64(o.offset) + i32(o.leader_epoch) + s(o.metadata) + i64(o.commit_timestamp)
    compact = s(o.metadata, compact=True)
    return i16(4) + i64(o.offset) + i32(o.leader_epoch) + compact + i64(o.commit_timestamp) + TAGS


def test_offset_value_written_as_v3() -> None:
    assert encode_offset_value(OFFSET) == offset_value_bytes(3)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_value_read_at_every_version(version: int) -> None:
    got = decode_offset_value(offset_value_bytes(version))
    assert (got.offset, got.metadata) == (OFFSET.offset, "meta")
    assert got.commit_timestamp == OFFSET.commit_timestamp
    assert got.leader_epoch == (5 if version >= 3 else -1)
    assert got.expire_timestamp == (1_700_000_600_000 if version == 1 else -1)
    assert decode_offset_value(offset_value_bytes(version) + b"later") == got  # trailing bytes ignored


def test_offset_value_errors() -> None:
    with pytest.raises(CorruptOffsetsRecordError, match="unsupported version 5"):
        decode_offset_value(i16(5) + offset_value_bytes(3)[2:])
    with pytest.raises(CorruptOffsetsRecordError):
        decode_offset_value(offset_value_bytes(3)[:-1])


MEMBERS = [
    MemberValue("m-1", "instance-1", "client-a", "/10.0.0.1", 300_000, 45_000, b"\x00\x03sub", b"\x00\x03as"),
    MemberValue("m-2", None, "client-b", "/10.0.0.2", 60_000, 10_000, b"", b""),
]
GROUP = GroupValue("consumer", 12, "range", "m-1", 1_700_000_000_000, MEMBERS)


def member_bytes(m: MemberValue, version: int) -> bytes:
    c = version >= 4
    out = s(m.member_id, compact=c)
    if version >= 3:
        out += s(m.group_instance_id, compact=c)
    out += s(m.client_id, compact=c) + s(m.client_host, compact=c)
    if version >= 1:
        out += i32(m.rebalance_timeout)
    out += i32(m.session_timeout) + b(m.subscription, compact=c) + b(m.assignment, compact=c)
    return out + (TAGS if c else b"")


def group_value_bytes(version: int) -> bytes:
    g, c = GROUP, version >= 4
    out = i16(version) + s(g.protocol_type, compact=c) + i32(g.generation)
    out += s(g.protocol, compact=c) + s(g.leader, compact=c)
    if version >= 2:
        out += i64(g.current_state_timestamp)
    out += bytes([len(g.members) + 1]) if c else i32(len(g.members))
    out += b"".join(member_bytes(m, version) for m in g.members)
    return out + (TAGS if c else b"")


def test_group_value_written_as_v3() -> None:
    assert encode_group_value(GROUP) == group_value_bytes(3)
    empty = GroupValue("consumer", 0, None, None, -1, [])
    assert encode_group_value(empty) == i16(3) + s("consumer") + i32(0) + s(None) + s(None) + i64(-1) + i32(0)
    assert decode_group_value(encode_group_value(empty)) == empty


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_read_at_every_version(version: int) -> None:
    got = decode_group_value(group_value_bytes(version))
    assert (got.protocol_type, got.generation, got.protocol, got.leader) == ("consumer", 12, "range", "m-1")
    assert got.current_state_timestamp == (GROUP.current_state_timestamp if version >= 2 else -1)
    for ours, theirs in zip(got.members, MEMBERS, strict=True):
        assert ours.group_instance_id == (theirs.group_instance_id if version >= 3 else None)
        assert ours.rebalance_timeout == (theirs.rebalance_timeout if version >= 1 else -1)
        assert (ours.member_id, ours.client_id, ours.client_host, ours.session_timeout) == (
            theirs.member_id,
            theirs.client_id,
            theirs.client_host,
            theirs.session_timeout,
        )
        assert (ours.subscription, ours.assignment) == (theirs.subscription, theirs.assignment)


def test_group_value_errors() -> None:
    with pytest.raises(CorruptOffsetsRecordError, match="unsupported version"):
        decode_group_value(i16(-1) + group_value_bytes(3)[2:])
    with pytest.raises(CorruptOffsetsRecordError):
        decode_group_value(group_value_bytes(3)[:-3])
    assert issubclass(CorruptOffsetsRecordError, ValueError)  # what the coordinator's loader skips
