"""The ``consumer`` embedded protocol of Kafka's classic group protocol: what a consumer puts in its
JoinGroup metadata (``Subscription``) and what the leader hands back through SyncGroup
(``Assignment``), byte for byte as Kafka's ConsumerProtocol writes them — so kctl consumers share
groups with the Java client, librdkafka (confluent-kafka, kcat) and kafka-python.

The layouts are the data schemas of ``kctl.protocol.messages.consumer_protocol``
(ConsumerProtocolSubscription / ConsumerProtocolAssignment v0-3, StickyAssignorUserData), encoded
and decoded by the shared protocol codec; this module gives them the client's shape (frozen
dataclasses of ``TopicPartition`` tuples, topics and partitions written sorted) and its error,
``ConsumerProtocolError``.

As Kafka's clients do, a decoder meets a newer version by reading the fields it knows and ignoring
what follows (versions only ever append fields); a writer may stop before the fields Kafka marks
ignorable; bytes that end early inside a field are an error.

Also here: the user data the sticky assignors exchange (``StickyUserData``: the previous assignment
and generation, Kafka's ``StickyAssignorUserData`` v1; cooperative-sticky: the generation alone).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable
from typing import Any

from kctl.common.topic_partition import TopicPartition
from kctl.protocol.data import DataSchema
from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError
from kctl.protocol.messages.consumer_protocol import (
    ASSIGNMENT,
    PROTOCOL_TYPE,
    STICKY_ASSIGNOR_USER_DATA,
    SUBSCRIPTION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ConsumerProtocolTopicPartition,
    StickyAssignorUserData,
)

__all__ = [
    "LATEST_VERSION",
    "PROTOCOL_TYPE",
    "Assignment",
    "ConsumerProtocolError",
    "StickyUserData",
    "Subscription",
    "decode_generation",
    "encode_generation",
    "group_by_topic",
]

LATEST_VERSION = SUBSCRIPTION.max_version
"""The highest Subscription/Assignment version kctl writes and fully reads."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """Subscription or assignment bytes that do not parse."""


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}``, topics and partitions sorted (how kctl writes them)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _to_wire(partitions: Iterable[TopicPartition]) -> list[Any]:
    return [ConsumerProtocolTopicPartition(topic, ps) for topic, ps in group_by_topic(partitions).items()]


def _from_wire(topics: list[Any]) -> tuple[TopicPartition, ...]:
    """Flattened in the order read (a topic listed twice: its partitions together, where it first
    appeared)."""
    by_topic: dict[str, list[int]] = {}
    for entry in topics:
        by_topic.setdefault(entry.topic, []).extend(entry.partitions)
    return tuple(TopicPartition(topic, p) for topic, parts in by_topic.items() for p in parts)


def _check_version(version: int, what: str) -> int:
    """The version to write: negative ones are refused; above the newest, the newest (as Kafka's
    ConsumerProtocol does)."""
    if version < 0:
        raise ConsumerProtocolError(f"{what}: unsupported version {version}")
    return min(version, LATEST_VERSION)


def _encode(schema: DataSchema, obj: Any, version: int, what: str) -> bytes:
    try:
        return schema.encode(obj, _check_version(version, what))
    except ProtocolEncodeError as error:
        raise ConsumerProtocolError(f"{what}: {error}") from None


def _decode(schema: DataSchema, data: bytes | bytearray | memoryview) -> tuple[int, Any]:
    try:
        return schema.decode(data, allow_trailing=True)  # Kafka's readers never look past the end
    except ProtocolDecodeError as error:
        raise ConsumerProtocolError(str(error)) from None


# ----------------------------------------------------------------------------------------- subscription


@dataclasses.dataclass(frozen=True)
class Subscription:
    """A member's JoinGroup metadata under the ``consumer`` protocol.

    ``owned_partitions`` (v1+) are the partitions the member holds now (cooperative rebalancing and
    the sticky assignors use them); ``generation_id`` (v2+) the generation they were assigned in
    (-1: unknown); ``rack_id`` (v3+) the member's ``client.rack``."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = LATEST_VERSION

    def encode(self, version: int | None = None) -> bytes:
        """The bytes of this subscription at ``version`` (default: its own); fields the version does
        not have are left out."""
        wire = ConsumerProtocolSubscription(
            list(self.topics),
            self.user_data,
            _to_wire(self.owned_partitions),
            self.generation_id,
            self.rack_id,
        )
        return _encode(SUBSCRIPTION, wire, self.version if version is None else version, "subscription")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Subscription:
        """Parse a subscription; a version above 3 is read as v3 (trailing bytes ignored)."""
        version, wire = _decode(SUBSCRIPTION, data)
        return cls(
            tuple(wire.topics),
            wire.user_data,
            _from_wire(wire.owned_partitions),
            wire.generation_id,
            wire.rack_id,
            version,
        )


# ----------------------------------------------------------------------------------------- assignment


@dataclasses.dataclass(frozen=True)
class Assignment:
    """What the leader assigned to one member (SyncGroup's ``assignment`` bytes)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = LATEST_VERSION

    def encode(self, version: int | None = None) -> bytes:
        wire = ConsumerProtocolAssignment(_to_wire(self.partitions), self.user_data)
        return _encode(ASSIGNMENT, wire, self.version if version is None else version, "assignment")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Assignment:
        """Parse an assignment. Empty bytes (what the coordinator hands a member the leader left
        out, or a member of a group that has not synced) are an empty assignment."""
        if not data:
            return cls(())
        version, wire = _decode(ASSIGNMENT, data)
        return cls(_from_wire(wire.assigned_partitions), wire.user_data, version)


# ----------------------------------------------------------------------------------------- assignor user data


@dataclasses.dataclass(frozen=True)
class StickyUserData:
    """Kafka's ``StickyAssignorUserData`` (v1): the member's previous assignment and the generation
    it was made in (-1 when the v0 layout, without generation, was read)."""

    partitions: tuple[TopicPartition, ...]
    generation: int = -1

    def encode(self) -> bytes:
        wire = StickyAssignorUserData(_to_wire(self.partitions), self.generation)
        return STICKY_ASSIGNOR_USER_DATA.encode_body(wire, 1)

    @classmethod
    def decode(cls, data: bytes) -> StickyUserData:
        """Parse Kafka's layout (no version prefix); failing that, the layout kafka-python 3 writes
        (an int16 version first). Either way the generation is read when present."""
        try:
            return cls._decode(data, 0)
        except ProtocolDecodeError as error:
            if len(data) >= 2 and _I16.unpack_from(data)[0] >= 0:
                try:
                    return cls._decode(data, 2)
                except ProtocolDecodeError:
                    pass
            raise ConsumerProtocolError(f"sticky assignor user data: {error}") from None

    @classmethod
    def _decode(cls, data: bytes, pos: int) -> StickyUserData:
        wire = STICKY_ASSIGNOR_USER_DATA.decode_body(data, 1, pos)
        return cls(_from_wire(wire.previous_assignment), wire.generation)


def encode_generation(generation: int) -> bytes:
    """The cooperative-sticky assignor's user data: the generation alone (int32)."""
    return _I32.pack(generation)


def decode_generation(data: bytes | None) -> int:
    """The generation in cooperative-sticky user data, -1 when absent or unreadable."""
    if not data or len(data) < 4:
        return -1
    return _I32.unpack_from(data)[0]
