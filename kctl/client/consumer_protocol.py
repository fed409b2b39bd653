"""The ``consumer`` embedded protocol of Kafka's classic group protocol: what a consumer puts in its
JoinGroup metadata (``Subscription``) and what the leader hands back through SyncGroup
(``Assignment``), byte for byte as Kafka's ConsumerProtocol writes them — so kctl consumers share
groups with the Java client, librdkafka (confluent-kafka, kcat) and kafka-python.

Layouts (big-endian, no tagged fields; strings are int16-length UTF-8, bytes int32-length with -1
for null, arrays int32-counted)::

    Subscription  v0: version int16, topics [string], user_data nullable bytes
                  v1: + owned_partitions [topic string, partitions [int32]]
                  v2: + generation_id int32
                  v3: + rack_id nullable string
    Assignment v0-3: version int16, assigned_partitions [topic string, partitions [int32]],
                     user_data nullable bytes

As Kafka's clients do, a decoder meets a newer version by reading the fields it knows and ignoring
what follows (versions only ever append fields); bytes that end early in a field of the version the
writer claims are an error (``ConsumerProtocolError``).

Also here: the user data the sticky assignors exchange (``StickyUserData``: the previous assignment
and generation, Kafka's ``StickyAssignorUserData`` v1; cooperative-sticky: the generation alone).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Mapping

from kctl.client.types import TopicPartition

PROTOCOL_TYPE = "consumer"
"""The JoinGroup ``protocol_type`` of consumer groups."""
LATEST_VERSION = 3
"""The highest Subscription/Assignment version kctl writes and fully reads."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """Subscription or assignment bytes that do not parse."""


# ----------------------------------------------------------------------------------------- reader/writer


class _Reader:
    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError(
                f"{self.what}: {field} needs {n} bytes at position {self.pos}, {self.remaining} left"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int16(self, field: str) -> int:
        return _I16.unpack(self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return _I32.unpack(self._take(4, field))[0]

    def string(self, field: str, *, nullable: bool = False) -> str | None:
        size = self.int16(field)
        if size < 0:
            if nullable:
                return None
            raise ConsumerProtocolError(f"{self.what}: {field} is null")
        try:
            return self._take(size, field).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ConsumerProtocolError(f"{self.what}: {field} is not UTF-8: {error}") from None

    def nullable_bytes(self, field: str) -> bytes | None:
        size = self.int32(field)
        if size < 0:
            return None
        return self._take(size, field)

    def count(self, field: str, item_size: int) -> int:
        n = self.int32(field)
        if n < 0:
            return 0  # a null array reads as empty, as Kafka's readers do
        if n * item_size > self.remaining:
            raise ConsumerProtocolError(
                f"{self.what}: {field} claims {n} items, only {self.remaining} bytes left"
            )
        return n

    def partitions(self, field: str) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count(field, 6)):
            topic = self.string(f"{field} topic")
            assert topic is not None
            n = self.count(f"{field} partitions", 4)
            out.setdefault(topic, []).extend(
                struct.unpack(f">{n}i", self._take(4 * n, f"{field} partitions")) if n else ()
            )
        return out


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self.parts.append(_I16.pack(value))

    def int32(self, value: int) -> None:
        self.parts.append(_I32.pack(value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string too long for the consumer protocol: {len(data)} bytes")
        self.int16(len(data))
        self.parts.append(data)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self.parts.append(bytes(value))

    def partitions(self, by_topic: Mapping[str, Iterable[int]]) -> None:
        self.int32(len(by_topic))
        for topic, partitions in by_topic.items():
            self.string(topic)
            items = list(partitions)
            self.int32(len(items))
            if items:
                self.parts.append(struct.pack(f">{len(items)}i", *items))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}``, topics and partitions sorted (how kctl writes them)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _flatten(by_topic: Mapping[str, Iterable[int]]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, p) for topic, parts in by_topic.items() for p in parts)


def _check_version(version: int, what: str) -> None:
    if version < 0:
        raise ConsumerProtocolError(f"{what}: unsupported version {version}")


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
        version = self.version if version is None else version
        _check_version(version, "subscription")
        w = _Writer()
        w.int16(version)
        w.int32(len(self.topics))
        for topic in self.topics:
            w.string(topic)
        w.nullable_bytes(self.user_data)
        if version >= 1:
            w.partitions(group_by_topic(self.owned_partitions))
        if version >= 2:
            w.int32(self.generation_id)
        if version >= 3:
            w.string(self.rack_id)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Subscription:
        """Parse a subscription; a version above 3 is read as v3 (trailing bytes ignored)."""
        r = _Reader(data, "subscription")
        version = r.int16("version")
        _check_version(version, "subscription")
        topics = []
        for _ in range(r.count("topics", 2)):
            topic = r.string("topic")
            assert topic is not None
            topics.append(topic)
        user_data = r.nullable_bytes("user_data")
        owned: tuple[TopicPartition, ...] = ()
        generation, rack = -1, None
        # Kafka marks the v1+ fields ignorable: some writers claim a version but stop early
        if version >= 1 and r.remaining:
            owned = _flatten(r.partitions("owned_partitions"))
        if version >= 2 and r.remaining:
            generation = r.int32("generation_id")
        if version >= 3 and r.remaining:
            rack = r.string("rack_id", nullable=True)
        return cls(tuple(topics), user_data, owned, generation, rack, version)


# ----------------------------------------------------------------------------------------- assignment


@dataclasses.dataclass(frozen=True)
class Assignment:
    """What the leader assigned to one member (SyncGroup's ``assignment`` bytes)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = LATEST_VERSION

    def encode(self, version: int | None = None) -> bytes:
        version = self.version if version is None else version
        _check_version(version, "assignment")
        w = _Writer()
        w.int16(version)
        w.partitions(group_by_topic(self.partitions))
        w.nullable_bytes(self.user_data)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Assignment:
        """Parse an assignment. Empty bytes (what the coordinator hands a member the leader left
        out, or a member of a group that has not synced) are an empty assignment."""
        if not data:
            return cls(())
        r = _Reader(data, "assignment")
        version = r.int16("version")
        _check_version(version, "assignment")
        partitions = _flatten(r.partitions("assigned_partitions"))
        user_data = r.nullable_bytes("user_data") if r.remaining else None
        return cls(partitions, user_data, version)


# ----------------------------------------------------------------------------------------- assignor user data


@dataclasses.dataclass(frozen=True)
class StickyUserData:
    """Kafka's ``StickyAssignorUserData`` (v1): the member's previous assignment and the generation
    it was made in (-1 when the v0 layout, without generation, was read)."""

    partitions: tuple[TopicPartition, ...]
    generation: int = -1

    def encode(self) -> bytes:
        w = _Writer()
        w.partitions(group_by_topic(self.partitions))
        w.int32(self.generation)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> StickyUserData:
        """Parse Kafka's layout (no version prefix); failing that, the layout kafka-python 3 writes
        (an int16 version 1 first)."""
        try:
            return cls._decode(data, prefixed=False)
        except ConsumerProtocolError as error:
            try:
                return cls._decode(data, prefixed=True)
            except ConsumerProtocolError:
                raise error from None

    @classmethod
    def _decode(cls, data: bytes, *, prefixed: bool) -> StickyUserData:
        r = _Reader(data, "sticky assignor user data")
        if prefixed and r.int16("version") < 0:
            raise ConsumerProtocolError("sticky assignor user data: negative version")
        partitions = _flatten(r.partitions("previous_assignment"))
        generation = r.int32("generation") if r.remaining >= 4 else -1
        if r.remaining:
            raise ConsumerProtocolError(f"sticky assignor user data: {r.remaining} bytes too many")
        return cls(partitions, generation)


def encode_generation(generation: int) -> bytes:
    """The cooperative-sticky assignor's user data: the generation alone (int32)."""
    return _I32.pack(generation)


def decode_generation(data: bytes | None) -> int:
    """The generation in cooperative-sticky user data, -1 when absent or unreadable."""
    if not data or len(data) < 4:
        return -1
    return _I32.unpack_from(data)[0]
