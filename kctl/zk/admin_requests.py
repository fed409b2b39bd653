"""Admin requests to the controller in ZooKeeper: the ZooKeeper registry's AdminRequests
(kctl.zk.registry; the embedded registry keeps its own in memory, kctl.zk.embedded), on the
registry's shared session (kctl.zk.zookeeper_session).

::

    /admin/reassign_partitions        target replicas by partition   (Kafka's ReassignPartitionsZNode)
    /admin/preferred_replica_election partitions to lead again from
                                      their preferred replica        (Kafka's PreferredReplicaElectionZNode)
    /kctl/elect_leaders               partitions to elect uncleanly  (kctl's own)

The bytes are kctl.zk.znodes' (one definition per znode). Whoever asks (the
AlterPartitionReassignments / ElectLeaders handlers, or Kafka's own ZooKeeper-mode tools) writes the
znode; the controller watches it, executes the request and deletes the znode (or rewrites it
without the entries it finished). Requests *merge* into an existing znode with a conditional write
on its version, so two requests never overwrite each other.

An ongoing reassignment is visible in two places: requested in /admin/reassign_partitions, and
started in the topic znode (``adding_replicas``/``removing_replicas``, Kafka's TopicZNode v2+);
kctl.zk.model's ``describe_ongoing`` combines them as ListPartitionReassignments answers.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kctl.zk.model import OngoingReassignment, RegistryError, describe_ongoing
from kctl.zk.registry import ADMIN, ELECTION_TYPES, PREFERRED, UNCLEAN, AdminRequests
from kctl.zk.znodes import (
    ElectLeadersZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_session import ZooKeeperPart, collect

__all__ = ["ZooKeeperAdminRequests"]

log = logging.getLogger("kctl.zk.zookeeper")

Key = tuple[str, int]
Replicas = dict[int, tuple[int, ...]]
_UPDATE_ATTEMPTS = 20


class ZooKeeperAdminRequests(ZooKeeperPart, AdminRequests):
    """The admin znodes, read and written on the registry's shared session."""

    # -- plumbing ----------------------------------------------------------------------------------
    def _read(self, path: str) -> bytes | None:
        client = self._zk_client()
        with self._zk(f"read {path}"):
            try:
                data, _ = client.get(path)
            except NoNodeError:
                return None
        return data

    def _write(self, path: str, data: bytes | None) -> None:
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

    def _update(self, path: str, change: Callable[[bytes | None], bytes | None]) -> None:
        """Read ``path``, apply ``change(data or None) -> new data or None (delete)`` and write it
        back conditionally on the version read (create when absent), retrying on a concurrent
        change. Listeners hear ADMIN when something was written."""
        client = self._zk_client()
        with self._zk(f"update {path}"):
            for _ in range(_UPDATE_ATTEMPTS):
                try:
                    data, stat = client.get(path)
                except NoNodeError:
                    data, stat = None, None
                new = change(data)
                try:
                    if new is None:
                        if stat is None:
                            return
                        client.delete(path, version=stat.version)
                    elif stat is None:
                        client.create(path, new, makepath=True)
                    else:
                        client.set(path, new, version=stat.version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                break
            else:
                raise RegistryError(f"{path} kept changing under {_UPDATE_ATTEMPTS} attempts to update it")
        self._notify(ADMIN)

    # -- reassignments -----------------------------------------------------------------------------
    def reassignment_requests(self) -> dict[Key, tuple[int, ...]]:
        data = self._read(ReassignPartitionsZNode.path)
        if data is None:
            return {}
        try:
            return ReassignPartitionsZNode.decode(data)
        except ZNodeDecodeError as error:
            log.warning("ignoring a reassignment request kctl cannot read: %s", error)
            return {}

    def set_reassignment_requests(self, requests: dict[Key, tuple[int, ...]]) -> None:
        data = ReassignPartitionsZNode.encode(requests) if requests else None
        self._write(ReassignPartitionsZNode.path, data)

    def request_reassignments(self, targets: Mapping[Key, Iterable[int]]) -> dict[Key, str]:
        wanted = {key: tuple(replicas) for key, replicas in targets.items()}

        def change(data: bytes | None) -> bytes:
            return ReassignPartitionsZNode.encode({**ReassignPartitionsZNode.decode(data), **wanted})

        if wanted:
            self._update(ReassignPartitionsZNode.path, change)
        return {}

    def withdraw_reassignments(self, partitions: Iterable[Key]) -> set[Key]:
        wanted = set(partitions)
        removed: set[Key] = set()

        def change(data: bytes | None) -> bytes | None:
            current = ReassignPartitionsZNode.decode(data)
            removed.clear()
            removed.update(wanted & set(current))
            rest = {k: v for k, v in current.items() if k not in wanted}
            return ReassignPartitionsZNode.encode(rest) if data is not None and rest else None

        self._update(ReassignPartitionsZNode.path, change)
        return removed

    def ongoing_reassignments(
        self, assignments: Mapping[str, Mapping[int, tuple[int, ...]]]
    ) -> dict[Key, OngoingReassignment]:
        requested = ReassignPartitionsZNode.decode(self._read(ReassignPartitionsZNode.path))
        topics = list(assignments)
        client = self._zk_client()
        with self._zk("read the topics' reassignments"):
            results = collect([client.get_async(TopicZNode.path(t)) for t in topics], self._op_timeout)
        started: dict[str, tuple[Replicas, Replicas, Replicas]] = {}
        for topic, result in zip(topics, results, strict=True):
            if result is None:
                continue  # deleted meanwhile
            try:
                _, replicas = TopicZNode.decode(topic, result[0])
                started[topic] = (replicas, *TopicZNode.decode_reassignment(topic, result[0]))
            except ZNodeDecodeError as error:
                log.warning("ignoring the reassignment of a topic kctl cannot read: %s", error)
        return describe_ongoing(requested, started, assignments)

    # -- elections ---------------------------------------------------------------------------------
    def request_elections(self, election_type: str, partitions: Iterable[Key]) -> dict[Key, str]:
        wanted = set(partitions)
        znode: type[PreferredReplicaElectionZNode | ElectLeadersZNode]
        if election_type == PREFERRED:
            znode = PreferredReplicaElectionZNode
        elif election_type == UNCLEAN:
            znode = ElectLeadersZNode
        else:
            raise ValueError(f"election type {election_type!r}: one of {', '.join(ELECTION_TYPES)}")

        def change(data: bytes | None) -> bytes:
            return znode.encode(znode.decode(data) | wanted)

        if wanted:  # (a preferred election request without partitions would ask for all of them)
            self._update(znode.path, change)
        return {}

    def preferred_election_requests(self) -> set[Key] | None:
        data = self._read(PreferredReplicaElectionZNode.path)
        if data is None:
            return None
        try:
            return PreferredReplicaElectionZNode.decode(data)
        except ZNodeDecodeError as error:
            log.warning("ignoring a preferred election request kctl cannot read: %s", error)
            return set()

    def set_preferred_election_requests(self, partitions: set[Key] | None) -> None:
        self._write(
            PreferredReplicaElectionZNode.path,
            None if partitions is None else PreferredReplicaElectionZNode.encode(partitions),
        )

    def unclean_election_requests(self) -> set[Key]:
        data = self._read(ElectLeadersZNode.path)
        try:
            return ElectLeadersZNode.decode(data)
        except ZNodeDecodeError as error:
            log.warning("deleting an unclean election request kctl cannot read: %s", error)
            self.finish_unclean_election_requests(set())
            return set()

    def finish_unclean_election_requests(self, partitions: set[Key]) -> None:
        """Remove the handled ``partitions`` (a request added meanwhile stays); a znode that does
        not decode is deleted."""

        def change(data: bytes | None) -> bytes | None:
            if data is None:
                return None
            try:
                rest = ElectLeadersZNode.decode(data) - partitions
            except ZNodeDecodeError:
                return None
            return ElectLeadersZNode.encode(rest) if rest else None

        self._update(ElectLeadersZNode.path, change)
