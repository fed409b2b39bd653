"""Admin requests to the controller through znodes (docs/architecture.md, cluster design decision 8):
their encoding in Kafka's JSON formats and the functions that read and write them with a kazoo client.

::

    /admin/reassign_partitions        {"version":1,"partitions":[{"topic":"t","partition":0,
                                        "replicas":[2,3]}]}         (Kafka's ReassignPartitionsZNode)
    /admin/preferred_replica_election {"version":1,"partitions":[{"topic":"t","partition":0}]}
                                                                     (Kafka's PreferredReplicaElectionZNode)
    /kctl/elect_leaders               {"version":1,"election_type":"unclean",
                                        "partitions":[{"topic":"t","partition":0}]}   (kctl's own)

Whoever asks (the AlterPartitionReassignments / ElectLeaders handlers, or Kafka's own ZooKeeper-mode
tools) writes the znode; the controller watches it, executes the request and deletes the znode (or
rewrites it without the entries it finished). Writers *merge* into an existing znode with a
conditional write on its version, so two requests never overwrite each other. ``/kctl/elect_leaders``
is kctl's: unclean elections have no znode in Kafka (its controller took them over an RPC); the
controller elects, for each listed partition without a leader, the first live replica (ISR := [it]),
whatever ``unclean.leader.election.enable`` says, then deletes the znode. ``election_type`` is
``"unclean"`` (``"preferred"`` is accepted too and means the same as the Kafka znode).

An ongoing reassignment is visible in the topic znode (``adding_replicas``/``removing_replicas``,
Kafka's TopicZNode v2+); `ongoing_reassignments` reads both places, as ListPartitionReassignments
answers.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from kctl.zk.model import RegistryError
from kctl.zk.registry import ADMIN, AdminRequests
from kctl.zk.znodes import PreferredReplicaElectionZNode, ReassignPartitionsZNode, ZNodeDecodeError
from kctl.zk.zookeeper_session import ZooKeeperPart

log = logging.getLogger("kctl.zk.zookeeper")

REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ELECT_LEADERS_PATH = "/kctl/elect_leaders"
ELECTION_TYPES = ("preferred", "unclean")

TopicPartitionKey = tuple[str, int]


class AdminRequestDecodeError(RegistryError):
    """An admin znode whose data is not in the expected format."""


def _loads(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        return {"version": 1, "partitions": []}
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdminRequestDecodeError(f"{path} is not JSON: {error}") from None
    if not isinstance(value, dict) or not isinstance(value.get("partitions", []), list):
        raise AdminRequestDecodeError(f"{path} has no partition list: {value!r}")
    return value


def _dumps(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _key(entry: Mapping[str, Any], path: str) -> TopicPartitionKey:
    try:
        return str(entry["topic"]), int(entry["partition"])
    except (KeyError, TypeError, ValueError):
        raise AdminRequestDecodeError(f"{path}: bad partition entry {entry!r}") from None


# -- encode / decode ------------------------------------------------------------------------------
def encode_reassignment(reassignment: Mapping[TopicPartitionKey, Iterable[int]]) -> bytes:
    """/admin/reassign_partitions: target replicas by partition, in Kafka's format."""
    partitions = [
        {"topic": topic, "partition": partition, "replicas": [int(r) for r in replicas]}
        for (topic, partition), replicas in sorted(reassignment.items())
    ]
    return _dumps({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes | None) -> dict[TopicPartitionKey, tuple[int, ...]]:
    value = _loads(REASSIGN_PARTITIONS_PATH, data)
    result: dict[TopicPartitionKey, tuple[int, ...]] = {}
    for entry in value.get("partitions", []):
        replicas = entry.get("replicas") if isinstance(entry, dict) else None
        if not isinstance(replicas, list):
            raise AdminRequestDecodeError(f"{REASSIGN_PARTITIONS_PATH}: no replicas in {entry!r}")
        result[_key(entry, REASSIGN_PARTITIONS_PATH)] = tuple(int(r) for r in replicas)
    return result


def encode_election(partitions: Iterable[TopicPartitionKey], election_type: str | None = None) -> bytes:
    """/admin/preferred_replica_election (``election_type`` None) or /kctl/elect_leaders."""
    value: dict[str, Any] = {"version": 1}
    if election_type is not None:
        if election_type not in ELECTION_TYPES:
            raise ValueError(f"election type {election_type!r}: one of {', '.join(ELECTION_TYPES)}")
        value["election_type"] = election_type
    value["partitions"] = [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]
    return _dumps(value)


def decode_election(
    data: bytes | None, path: str = PREFERRED_REPLICA_ELECTION_PATH
) -> tuple[str, set[TopicPartitionKey]]:
    """(election type, partitions) of an election znode; the Kafka znode's type is "preferred"."""
    value = _loads(path, data)
    election_type = str(value.get("election_type", "preferred"))
    if election_type not in ELECTION_TYPES:
        raise AdminRequestDecodeError(f"{path}: unknown election_type {election_type!r}")
    return election_type, {_key(e, path) for e in value.get("partitions", [])}


def decode_topic_reassignment(
    data: bytes | None,
) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """The ``adding_replicas`` and ``removing_replicas`` of a topic znode (Kafka's TopicZNode v2+),
    partition -> broker ids; empty for older versions."""
    try:
        value = json.loads(data or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdminRequestDecodeError(f"topic znode is not JSON: {error}") from None

    def field(name: str) -> dict[int, tuple[int, ...]]:
        raw = value.get(name) or {}
        return {int(p): tuple(int(r) for r in rs) for p, rs in raw.items() if rs}

    return field("adding_replicas"), field("removing_replicas")


# -- kazoo operations -------------------------------------------------------------------------------
def _update(client: Any, path: str, change: Any, attempts: int = 20) -> bytes | None:
    """Read ``path``, apply ``change(data or None) -> new data or None (delete)`` and write it back
    conditionally on the version read (create when absent), retrying on a concurrent change."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    for _ in range(attempts):
        try:
            data, stat = client.get(path)
        except NoNodeError:
            data, stat = None, None
        new = change(data)
        try:
            if new is None:
                if stat is not None:
                    client.delete(path, version=stat.version)
            elif stat is None:
                client.create(path, new, makepath=True)
            else:
                client.set(path, new, version=stat.version)
            return new
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
    raise RegistryError(f"{path} kept changing under {attempts} attempts to update it")


def request_reassignment(client: Any, reassignment: Mapping[TopicPartitionKey, Iterable[int]]) -> None:
    """Add target replica lists to /admin/reassign_partitions (an entry for the same partition is
    replaced)."""
    targets = {key: tuple(replicas) for key, replicas in reassignment.items()}

    def change(data: bytes | None) -> bytes:
        return encode_reassignment({**decode_reassignment(data), **targets})

    _update(client, REASSIGN_PARTITIONS_PATH, change)


def withdraw_reassignment(client: Any, partitions: Iterable[TopicPartitionKey]) -> set[TopicPartitionKey]:
    """Remove entries from /admin/reassign_partitions (deleting it when empty); returns the
    partitions that had one."""
    wanted = set(partitions)
    removed: set[TopicPartitionKey] = set()

    def change(data: bytes | None) -> bytes | None:
        current = decode_reassignment(data)
        removed.clear()
        removed.update(wanted & set(current))
        rest = {k: v for k, v in current.items() if k not in wanted}
        if data is None:
            return None
        return encode_reassignment(rest) if rest else None

    _update(client, REASSIGN_PARTITIONS_PATH, change)
    return removed


def pending_reassignments(client: Any) -> dict[TopicPartitionKey, tuple[int, ...]]:
    """The entries of /admin/reassign_partitions (requested, not finished)."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(REASSIGN_PARTITIONS_PATH)
    except NoNodeError:
        return {}
    return decode_reassignment(data)


@dataclass(frozen=True)
class OngoingReassignment:
    """A partition being reassigned: its replicas now (``replicas``: old and new together while it
    runs), the replicas being added and those being removed."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def topic_reassignment(
    client: Any, topic: str
) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """(adding_replicas, removing_replicas) of a topic's znode; empty when it has none."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(f"/brokers/topics/{topic}")
    except NoNodeError:
        return {}, {}
    return decode_topic_reassignment(data)


def ongoing_reassignments(
    client: Any, assignments: Mapping[str, Mapping[int, tuple[int, ...]]]
) -> dict[TopicPartitionKey, OngoingReassignment]:
    """Every partition being reassigned: those the controller has started (adding/removing replicas in
    the topic znode) and those still only requested in /admin/reassign_partitions (reported as Kafka
    does: replicas = current + target, adding = target - current, removing = current - target).
    ``assignments``: each topic's current replica assignment (topic -> partition -> replicas)."""
    result: dict[TopicPartitionKey, OngoingReassignment] = {}
    for (topic, partition), target in pending_reassignments(client).items():
        current = tuple(assignments.get(topic, {}).get(partition, ()))
        adding = tuple(r for r in target if r not in current)
        removing = tuple(r for r in current if r not in target)
        replicas = tuple(dict.fromkeys([*target, *current]))
        result[topic, partition] = OngoingReassignment(topic, partition, replicas, adding, removing)
    for topic, current_assignment in assignments.items():
        adding_map, removing_map = topic_reassignment(client, topic)
        for partition in sorted(set(adding_map) | set(removing_map)):
            result[topic, partition] = OngoingReassignment(
                topic,
                partition,
                tuple(current_assignment.get(partition, ())),
                adding_map.get(partition, ()),
                removing_map.get(partition, ()),
            )
    return result


def request_preferred_election(client: Any, partitions: Iterable[TopicPartitionKey]) -> None:
    """Add partitions to /admin/preferred_replica_election."""
    wanted = set(partitions)

    def change(data: bytes | None) -> bytes:
        _, current = decode_election(data)
        return encode_election(current | wanted)

    _update(client, PREFERRED_REPLICA_ELECTION_PATH, change)


def request_unclean_election(client: Any, partitions: Iterable[TopicPartitionKey]) -> None:
    """Add partitions to /kctl/elect_leaders (election_type "unclean")."""
    wanted = set(partitions)

    def change(data: bytes | None) -> bytes:
        _, current = decode_election(data, ELECT_LEADERS_PATH)
        return encode_election(current | wanted, "unclean")

    _update(client, ELECT_LEADERS_PATH, change)


def pending_unclean_elections(client: Any) -> set[TopicPartitionKey]:
    """The partitions listed in /kctl/elect_leaders (empty when there is none)."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get(ELECT_LEADERS_PATH)
    except NoNodeError:
        return set()
    return decode_election(data, ELECT_LEADERS_PATH)[1]


def withdraw_unclean_elections(client: Any, partitions: Iterable[TopicPartitionKey]) -> None:
    """Remove handled partitions from /kctl/elect_leaders (deleting it when none is left); a
    request added meanwhile stays. A znode that does not decode is deleted."""
    handled = set(partitions)

    def change(data: bytes | None) -> bytes | None:
        if data is None:
            return None
        try:
            _, current = decode_election(data, ELECT_LEADERS_PATH)
        except AdminRequestDecodeError:
            return None
        rest = current - handled
        return encode_election(rest, "unclean") if rest else None

    _update(client, ELECT_LEADERS_PATH, change)


def request_election(client: Any, election_type: str, partitions: Iterable[TopicPartitionKey]) -> None:
    """Preferred: /admin/preferred_replica_election; unclean: /kctl/elect_leaders."""
    if election_type == "preferred":
        request_preferred_election(client, partitions)
    elif election_type == "unclean":
        request_unclean_election(client, partitions)
    else:
        raise ValueError(f"election type {election_type!r}: one of {', '.join(ELECTION_TYPES)}")


class ZooKeeperAdminRequests(ZooKeeperPart, AdminRequests):
    """The controller's side of the admin znodes, on the registry's shared session."""

    # -- admin requests ----------------------------------------------------------------------------
    def _read_admin(self, path: str) -> bytes | None:
        client = self._zk_client()
        with self._zk(f"read {path}"):
            try:
                data, _ = client.get(path)
            except NoNodeError:
                return None
        return data

    def _write_admin(self, path: str, data: bytes | None) -> None:
        client = self._zk_client()
        with self._zk(f"write {path}"):
            if data is None:
                with contextlib.suppress(NoNodeError):
                    client.delete(path)
            else:
                try:
                    client.set(path, data)
                except NoNodeError:
                    client.create(path, data, makepath=True)
        self._notify(ADMIN)

    def reassignment_requests(self) -> dict[tuple[str, int], tuple[int, ...]]:
        data = self._read_admin(ReassignPartitionsZNode.path)
        if data is None:
            return {}
        try:
            return ReassignPartitionsZNode.decode(data)
        except ZNodeDecodeError as error:
            log.warning("ignoring a reassignment request kctl cannot read: %s", error)
            return {}

    def set_reassignment_requests(self, requests: dict[tuple[str, int], tuple[int, ...]]) -> None:
        data = ReassignPartitionsZNode.encode(requests) if requests else None
        self._write_admin(ReassignPartitionsZNode.path, data)

    def preferred_election_requests(self) -> set[tuple[str, int]] | None:
        data = self._read_admin(PreferredReplicaElectionZNode.path)
        if data is None:
            return None
        try:
            return PreferredReplicaElectionZNode.decode(data)
        except ZNodeDecodeError as error:
            log.warning("ignoring a preferred election request kctl cannot read: %s", error)
            return set()

    def set_preferred_election_requests(self, partitions: set[tuple[str, int]] | None) -> None:
        self._write_admin(
            PreferredReplicaElectionZNode.path,
            None if partitions is None else PreferredReplicaElectionZNode.encode(partitions),
        )

    def unclean_election_requests(self) -> set[tuple[str, int]]:
        client = self._zk_client()
        with self._zk(f"read {ELECT_LEADERS_PATH}"):
            try:
                return pending_unclean_elections(client)
            except AdminRequestDecodeError as error:
                log.warning("deleting an unclean election request kctl cannot read: %s", error)
                withdraw_unclean_elections(client, ())
                return set()

    def finish_unclean_election_requests(self, partitions: set[tuple[str, int]]) -> None:
        client = self._zk_client()
        with self._zk(f"update {ELECT_LEADERS_PATH}"):
            withdraw_unclean_elections(client, partitions)
