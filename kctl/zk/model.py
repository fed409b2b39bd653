"""The cluster metadata the registry holds, as immutable values, and the registry's errors.

This module owns the vocabulary shared by both registry backends (embedded and ZooKeeper) and by
their callers: a broker's registration, a topic's replica assignment, topic id and config
overrides, a partition's leader/ISR state, an ongoing reassignment, Kafka's identifier encodings
(cluster id and topic id as 22-character URL-safe base64 without padding), and the validation of
topic names and replica assignments that Kafka's admin code applies before anything is written.
It has no I/O.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "ControllerFence",
    "ControllerMovedError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidTopicError",
    "OngoingReassignment",
    "PartitionState",
    "PartitionStateConflictError",
    "PartitionStateUpdate",
    "RegistryError",
    "RegistryUnavailableError",
    "TopicExistsError",
    "TopicRecord",
    "UnknownTopicError",
    "check_topic_collisions",
    "decode_uuid",
    "describe_ongoing",
    "encode_uuid",
    "parse_endpoint",
    "random_kafka_uuid",
    "validate_new_partitions",
    "validate_replica_assignment",
    "validate_topic_name",
]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_ENDPOINT = re.compile(r"^(?P<listener>[^:/]*)://\[?(?P<host>[0-9a-zA-Z\-%._:]*?)\]?:(?P<port>-?[0-9]+)$")


# -- errors ---------------------------------------------------------------------------------------
class RegistryError(Exception):
    """Base class of every error the registry raises."""


class TopicExistsError(RegistryError):
    """create_topic for a name that already has a topic (Kafka's TOPIC_ALREADY_EXISTS)."""


class UnknownTopicError(RegistryError):
    """An operation on a topic or partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION)."""


class InvalidTopicError(RegistryError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


class InvalidReplicaAssignmentError(RegistryError):
    """A replica assignment Kafka would refuse (INVALID_REPLICA_ASSIGNMENT)."""


class InvalidPartitionsError(RegistryError):
    """add_partitions with partition numbers that do not extend the topic (INVALID_PARTITIONS)."""


class PartitionStateConflictError(RegistryError):
    """A conditional partition-state write whose expected partition epoch is stale."""


class ControllerMovedError(RegistryError):
    """A fenced write by a controller that is no longer the controller: /controller_epoch has moved
    on since it won (Kafka's ControllerMovedException). The writer must stop acting as controller."""


class BrokerIdInUseError(RegistryError):
    """Another live session has already registered this broker id."""


class RegistryUnavailableError(RegistryError):
    """The metadata store cannot be reached (ZooKeeper connection lost, registry closed)."""


# -- identifiers ----------------------------------------------------------------------------------
def encode_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 big-endian bytes in URL-safe base64, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def decode_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; raises ValueError unless ``text`` encodes exactly 16 bytes."""
    if len(text) > 24:
        raise ValueError(f"{text[:24]!r}... is too long to be a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as error:
        raise ValueError(f"{text!r} is not URL-safe base64") from error
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, not the 16 of a UUID")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A random (version 4) UUID as Kafka's ``Uuid.randomUuid`` picks them: never the reserved
    all-zero or ``...01`` values, and never one whose string form starts with ``-`` (it would read
    as a command-line option)."""
    reserved = {uuid.UUID(int=0), uuid.UUID(int=1)}
    while True:
        value = uuid.uuid4()
        if value not in reserved and not encode_uuid(value).startswith("-"):
            return value


# -- values ---------------------------------------------------------------------------------------
def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """Split a listener endpoint such as ``PLAINTEXT://127.0.0.1:9092`` (or ``SSL://[::1]:9093``)
    into (listener name, host, port)."""
    match = _ENDPOINT.match(endpoint)
    if match is None:
        raise ValueError(f"{endpoint!r} is not a listener endpoint like PLAINTEXT://host:port")
    return match["listener"], match["host"], int(match["port"])


def _format_endpoint(listener: str, host: str, port: int) -> str:
    return f"{listener}://[{host}]:{port}" if ":" in host else f"{listener}://{host}:{port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as it registers itself: id, the host/port older clients use, its rack, and its
    advertised listener endpoints (``LISTENER_NAME://host:port``). With no listeners given, the one
    listener is ``PLAINTEXT://host:port``."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.listeners:
            object.__setattr__(self, "listeners", (_format_endpoint("PLAINTEXT", self.host, self.port),))
        else:
            object.__setattr__(self, "listeners", tuple(self.listeners))
            for endpoint in self.listeners:
                parse_endpoint(endpoint)

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """Listener name -> security protocol, as Kafka's ``listener_security_protocol_map``: a
        listener named after a protocol uses it; any other name is taken to be PLAINTEXT."""
        names = [parse_endpoint(endpoint)[0] for endpoint in self.listeners]
        return {name: name if name in _SECURITY_PROTOCOLS else "PLAINTEXT" for name in names}


@dataclass(frozen=True)
class PartitionState:
    """A partition's leadership, as the controller records it: the leader broker id (-1: none), the
    leader epoch, the in-sync replica set, the epoch of the controller that wrote it, the partition
    epoch, which the registry assigns and bumps on every write (ZooKeeper: the state znode's
    version), and the eligible leader replicas (KIP-966's ELR): replicas that left the ISR while it
    was below ``min.insync.replicas`` — the high watermark stands still then, so each holds every
    record below it and may lead without losing an acknowledged write."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        object.__setattr__(self, "elr", tuple(self.elr))


@dataclass(frozen=True)
class ControllerFence:
    """What a controller saw when it won: its controller epoch and the znode version of
    /controller_epoch (ZooKeeper) it bumped. Fenced writes check that version is still current."""

    epoch: int
    epoch_zk_version: int


@dataclass(frozen=True)
class PartitionStateUpdate:
    """One write of a fenced batch: the new state of ``topic``-``partition``, written only if the
    stored state is still at ``expected_partition_epoch`` (-1: only if there is none yet)."""

    topic: str
    partition: int
    state: PartitionState
    expected_partition_epoch: int


@dataclass(frozen=True)
class TopicRecord:
    """A topic: its name, topic id, replica assignment (partition -> replica broker ids, the first
    being the preferred leader), its config overrides (only the keys set for this topic) and, for
    partitions being reassigned, the replicas being added and removed (Kafka's ``adding_replicas``
    and ``removing_replicas``: during a reassignment ``assignment`` holds the union of both sets)."""

    name: str
    topic_id: uuid.UUID
    assignment: dict[int, tuple[int, ...]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    adding_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignment", {int(p): tuple(r) for p, r in sorted(self.assignment.items())})
        object.__setattr__(self, "configs", dict(self.configs))
        for name in ("adding_replicas", "removing_replicas"):
            value = {int(p): tuple(r) for p, r in sorted(getattr(self, name).items()) if r}
            object.__setattr__(self, name, value)

    @property
    def partitions(self) -> int:
        """The number of partitions."""
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        """The number of replicas of partition 0 (Kafka keeps it equal across partitions)."""
        return len(self.assignment[0]) if 0 in self.assignment else 0


@dataclass(frozen=True)
class OngoingReassignment:
    """A partition being reassigned, as ListPartitionReassignments reports it: its replicas now
    (``replicas``: old and new together while it runs), the replicas being added and those being
    removed."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def describe_ongoing(
    requested: Mapping[tuple[str, int], tuple[int, ...]],
    started: Mapping[str, tuple[Mapping[int, tuple[int, ...]], ...]],
    assignments: Mapping[str, Mapping[int, tuple[int, ...]]],
) -> dict[tuple[str, int], OngoingReassignment]:
    """The ongoing reassignments of the topics in ``assignments`` (each topic's replicas as the
    caller knows them): those ``requested`` (target replicas by partition; reported as Kafka does:
    replicas = target + current, adding = target - current, removing = current - target) and
    those the controller has ``started``, which win (topic -> (replicas, adding_replicas,
    removing_replicas) as the topic holds them)."""
    result: dict[tuple[str, int], OngoingReassignment] = {}
    for (topic, partition), target in requested.items():
        current = tuple(assignments.get(topic, {}).get(partition, ()))
        adding = tuple(r for r in target if r not in current)
        removing = tuple(r for r in current if r not in target)
        replicas = tuple(dict.fromkeys([*target, *current]))
        result[topic, partition] = OngoingReassignment(topic, partition, replicas, adding, removing)
    for topic, current_assignment in assignments.items():
        if topic not in started:
            continue
        stored, adding_map, removing_map = started[topic]
        for partition in sorted(set(adding_map) | set(removing_map)):
            result[topic, partition] = OngoingReassignment(
                topic,
                partition,
                tuple(stored.get(partition, current_assignment.get(partition, ()))),
                tuple(adding_map.get(partition, ())),
                tuple(removing_map.get(partition, ())),
            )
    return result


# -- validation -----------------------------------------------------------------------------------
def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


def check_topic_collisions(name: str, existing: Iterable[str]) -> None:
    """Kafka refuses a topic whose name differs from an existing one only in '.' versus '_'
    (their metric names would be the same)."""
    if "." not in name and "_" not in name:
        return
    key = name.replace(".", "_")
    colliding = sorted(t for t in existing if t != name and t.replace(".", "_") == key)
    if colliding:
        raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")


def _check_replicas(partition: int, replicas: tuple[int, ...], replication_factor: int) -> None:
    if not replicas:
        raise InvalidReplicaAssignmentError(f"Partition {partition} has no replicas")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(
            f"Duplicate replica assignment found for partition {partition}: {list(replicas)}"
        )
    if any(replica < 0 for replica in replicas):
        raise InvalidReplicaAssignmentError(
            f"Partition {partition} has a negative broker id: {list(replicas)}"
        )
    if len(replicas) != replication_factor:
        raise InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas "
            f"(partition {partition} has {len(replicas)}, expected {replication_factor})"
        )


def validate_replica_assignment(
    assignment: Mapping[int, tuple[int, ...]],
) -> dict[int, tuple[int, ...]]:
    """A new topic's assignment, normalized: partitions numbered 0..n-1, each with the same number
    of distinct, non-negative broker ids."""
    normalized = {int(p): tuple(int(b) for b in r) for p, r in assignment.items()}
    if not normalized:
        raise InvalidReplicaAssignmentError("A topic needs at least one partition")
    if sorted(normalized) != list(range(len(normalized))):
        raise InvalidReplicaAssignmentError(
            f"Partitions should be a consecutive 0-based integer sequence, got {sorted(normalized)}"
        )
    replication_factor = len(normalized[0])
    for partition, replicas in sorted(normalized.items()):
        _check_replicas(partition, replicas, replication_factor)
    return dict(sorted(normalized.items()))


def validate_new_partitions(
    existing: Mapping[int, tuple[int, ...]], new_assignment: Mapping[int, tuple[int, ...]]
) -> dict[int, tuple[int, ...]]:
    """The partitions add_partitions may add, normalized: only new numbers, contiguous after the
    existing ones, with the topic's replication factor."""
    normalized = {int(p): tuple(int(b) for b in r) for p, r in new_assignment.items()}
    if not normalized:
        raise InvalidPartitionsError("No new partitions given")
    start = len(existing)
    expected = list(range(start, start + len(normalized)))
    if sorted(normalized) != expected:
        raise InvalidPartitionsError(
            f"New partitions must be numbered {expected[0]}..{expected[-1]} (the topic has {start} "
            f"partitions), got {sorted(normalized)}"
        )
    replication_factor = len(existing[0]) if 0 in existing else len(normalized[start])
    for partition, replicas in sorted(normalized.items()):
        try:
            _check_replicas(partition, replicas, replication_factor)
        except InvalidReplicaAssignmentError as error:
            if len(replicas) == replication_factor:
                raise
            raise InvalidReplicaAssignmentError(
                f"Inconsistent replication factor between partitions: partition {partition} has "
                f"{len(replicas)} replicas, the topic has {replication_factor}"
            ) from error
    return dict(sorted(normalized.items()))
