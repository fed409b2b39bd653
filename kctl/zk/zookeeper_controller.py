"""The ZooKeeper registry's controller operations (a mixin of kctl.zk.zookeeper.ZooKeeperRegistry):
the fenced writes of partition states and topic assignments (one multi-op behind a check of
/controller_epoch's version, Kafka's ``checkControllerAndUpdate``), the admin request znodes
(/admin/reassign_partitions, /admin/preferred_replica_election) and kctl's controlled shutdown
requests (/kctl/controlled_shutdown/<id>). The session, watches and everything else are in
kctl.zk.zookeeper."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from kctl.zk import admin_requests
from kctl.zk.model import (
    ControllerFence,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryError,
    TopicRecord,
    UnknownTopicError,
    random_kafka_uuid,
)
from kctl.zk.registry import ADMIN, PARTITIONS, TOPICS
from kctl.zk.znodes import (
    ControlledShutdownBrokerZNode,
    ControlledShutdownZNode,
    ControllerEpochZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_topics import collect

__all__ = ["ControllerOpsMixin"]

log = logging.getLogger("kctl.zk.zookeeper")

_RETRIES = 10



class ControllerOpsMixin:
    """What ZooKeeperRegistry provides to these methods."""

    _fence: ControllerFence | None
    _op_timeout: float
    _lock: threading.RLock
    _zk_client: Callable[[], KazooClient]
    _zk: Callable[[str], contextlib.AbstractContextManager[None]]
    _notify: Callable[[str], None]
    _read_configs: Callable[[KazooClient, str], dict[str, str]]

    if TYPE_CHECKING:

        @property
        def _session_id(self) -> int: ...

    # -- fenced controller writes ------------------------------------------------------------------
    def _fenced_commit(self, client: KazooClient, fence: ControllerFence, ops: list[Any]) -> list[Any]:
        """Commit ``ops`` (functions adding operations to a transaction) behind a check of
        /controller_epoch's version. Raises ControllerMovedError when that check fails; returns
        the results of ``ops`` otherwise (some may be exceptions: the caller decides)."""
        transaction = client.transaction()
        transaction.check(ControllerEpochZNode.path, fence.epoch_zk_version)
        for op in ops:
            op(transaction)
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            self._fence = None if self._fence == fence else self._fence
            raise ControllerMovedError(
                f"controller epoch {fence.epoch} is no longer current (/controller_epoch moved on "
                f"from version {fence.epoch_zk_version}): another broker is the controller"
            )
        return results[1:]

    def set_partition_states(
        self, updates: list[PartitionStateUpdate], fence: ControllerFence
    ) -> dict[tuple[str, int], PartitionState]:
        if not updates:
            return {}
        client = self._zk_client()
        with self._zk(f"write {len(updates)} partition state(s)"):
            for update in updates:
                if update.expected_partition_epoch < 0:
                    for parent in (
                        TopicPartitionsZNode.path(update.topic),
                        TopicPartitionZNode.path(update.topic, update.partition),
                    ):
                        try:
                            client.create(parent)
                        except NodeExistsError:
                            pass
                        except NoNodeError:
                            raise UnknownTopicError(f"Topic '{update.topic}' does not exist.") from None
            ops: list[Any] = []
            for update in updates:
                path = TopicPartitionStateZNode.path(update.topic, update.partition)
                data = TopicPartitionStateZNode.encode(update.state)
                if update.expected_partition_epoch < 0:
                    ops.append(lambda t, path=path, data=data: t.create(path, data))
                else:
                    ops.append(
                        lambda t, path=path, data=data, v=update.expected_partition_epoch: t.set_data(
                            path, data, version=v
                        )
                    )
            results = self._fenced_commit(client, fence, ops)
        failed = [(u, r) for u, r in zip(updates, results, strict=True) if isinstance(r, Exception)]
        # the op that failed; the others report being rolled back (before it) or not run (after it)
        real = [(u, r) for u, r in failed if not isinstance(r, (RolledBackError, RuntimeInconsistency))]
        if real:
            update, error = real[0]
            where = f"{update.topic}-{update.partition}"
            if isinstance(error, NoNodeError) and update.expected_partition_epoch < 0:
                raise UnknownTopicError(f"Partition {where} does not exist.")
            raise PartitionStateConflictError(
                f"Partition {where} is not at partition epoch {update.expected_partition_epoch} "
                f"({type(error).__name__})"
            )
        stored: dict[tuple[str, int], PartitionState] = {}
        for update, result in zip(updates, results, strict=True):
            version = 0 if update.expected_partition_epoch < 0 else result.version
            state = update.state
            stored[(update.topic, update.partition)] = PartitionState(
                state.leader, state.leader_epoch, state.isr, state.controller_epoch, version
            )
        self._notify(PARTITIONS)
        return stored

    def set_topic_assignment(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        adding_replicas: dict[int, tuple[int, ...]],
        removing_replicas: dict[int, tuple[int, ...]],
        fence: ControllerFence,
    ) -> TopicRecord:
        client = self._zk_client()
        path = TopicZNode.path(name)
        with self._zk(f"reassign replicas of topic {name}"):
            for _ in range(_RETRIES):
                try:
                    data, stat = client.get(path)
                except NoNodeError:
                    raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
                topic_id, current = TopicZNode.decode(name, data)
                if sorted(current) != sorted(assignment):
                    raise RegistryError(f"{name}: a reassignment cannot change the partitions")
                topic_id = topic_id or random_kafka_uuid()
                encoded = TopicZNode.encode(topic_id, assignment, adding_replicas, removing_replicas)
                (result,) = self._fenced_commit(
                    client, fence, [lambda t, e=encoded, v=stat.version: t.set_data(path, e, version=v)]
                )
                if isinstance(result, NoNodeError):
                    raise UnknownTopicError(f"Topic '{name}' does not exist.")
                if not isinstance(result, Exception):
                    break
            else:
                raise RegistryError(f"could not reassign {name}: {path} kept changing")
            configs = self._read_configs(client, name)
        self._notify(TOPICS)
        return TopicRecord(name, topic_id, assignment, configs, adding_replicas, removing_replicas)

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
        with self._zk(f"read {admin_requests.ELECT_LEADERS_PATH}"):
            try:
                return admin_requests.pending_unclean_elections(client)
            except admin_requests.AdminRequestDecodeError as error:
                log.warning("deleting an unclean election request kctl cannot read: %s", error)
                admin_requests.withdraw_unclean_elections(client, ())
                return set()

    def finish_unclean_election_requests(self, partitions: set[tuple[str, int]]) -> None:
        client = self._zk_client()
        with self._zk(f"update {admin_requests.ELECT_LEADERS_PATH}"):
            admin_requests.withdraw_unclean_elections(client, partitions)

    # -- controlled shutdown -----------------------------------------------------------------------
    def request_controlled_shutdown(self, broker_id: int) -> None:
        client = self._zk_client()
        path = ControlledShutdownBrokerZNode.path(broker_id)
        data = ControlledShutdownBrokerZNode.encode(ControlledShutdownBrokerZNode.REQUESTED)
        with self._zk(f"request the controlled shutdown of broker {broker_id}"):
            with contextlib.suppress(NoNodeError):
                _, stat = client.get(path)
                if stat.ephemeralOwner == self._session_id:
                    client.delete(path)  # a retry: ask again
            client.create(path, data, ephemeral=True, makepath=True)
        self._notify(ADMIN)

    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]:
        client = self._zk_client()
        with self._zk("read the controlled shutdown requests"):
            ids = sorted(int(c) for c in client.get_children(ControlledShutdownZNode.path) if c.isdigit())
            results = collect(
                [client.get_async(ControlledShutdownBrokerZNode.path(i)) for i in ids], self._op_timeout
            )
        requests: dict[int, tuple[str, int]] = {}
        for broker_id, result in zip(ids, results, strict=True):
            if result is None:
                continue
            try:
                requests[broker_id] = ControlledShutdownBrokerZNode.decode(broker_id, result[0])
            except ZNodeDecodeError as error:
                log.warning("ignoring a controlled shutdown request kctl cannot read: %s", error)
        return requests

    def answer_controlled_shutdown(self, broker_id: int, remaining_partitions: int) -> None:
        client = self._zk_client()
        path = ControlledShutdownBrokerZNode.path(broker_id)
        data = ControlledShutdownBrokerZNode.encode(ControlledShutdownBrokerZNode.DONE, remaining_partitions)
        action = f"answer the controlled shutdown of broker {broker_id}"
        with self._zk(action), contextlib.suppress(NoNodeError):
            client.set(path, data)
