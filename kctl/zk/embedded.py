"""The embedded registry: cluster metadata for a one-broker cluster with no ZooKeeper.

It owns ``<metadata_dir>/cluster-metadata.json`` — the cluster id, the controller epoch and the
topics (topic id, replica assignment, config overrides, partition states) — as one JSON document
with a ``"version"`` field, loaded at start and rewritten atomically after every change (temporary
file, fsync, rename, fsync of the directory). Broker registrations and controllership are kept in
memory only: they are ephemeral, as in ZooKeeper, and a restarted broker registers again. So are the
requests to the controller (kctl.zk.embedded_admin_requests: a cluster of one refuses to move
replicas or elect leaders). Its security and quota stores are ``security.json`` and ``client-quotas.json`` in
the same directory (kctl.zk.security_store, kctl.zk.quota_store).

``write_batch()`` groups the writes a thread makes in a block into one rewrite at its end (a
CreateTopics of thousands of partitions is one write, not one per slice of partition states); if
that write fails, the metadata in memory goes back to what it was before the block.

``<metadata_dir>/cluster-metadata.lock`` is held (flock) while the registry is open, so that two
processes cannot write the same metadata. Thread-safe; listeners are called synchronously after
each change, on the thread that made it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kctl.common.atomic_file import replace_file
from kctl.zk.embedded_admin_requests import EmbeddedAdminRequests
from kctl.zk.model import (
    BrokerRegistration,
    ControllerFence,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryError,
    RegistryUnavailableError,
    TopicExistsError,
    TopicRecord,
    UnknownTopicError,
    check_topic_collisions,
    decode_uuid,
    encode_uuid,
    random_kafka_uuid,
    validate_new_partitions,
    validate_replica_assignment,
    validate_topic_name,
)
from kctl.zk.quota_store import FileQuotaStore, QuotaStore
from kctl.zk.registry import (
    ADMIN,
    BROKERS,
    CONFIGS,
    CONTROLLER,
    PARTITIONS,
    TOPICS,
    AdminRequests,
    Registry,
)
from kctl.zk.security_store import FileSecurityStore, SecurityStore

__all__ = [
    "FORMAT_VERSION",
    "LOCK_FILE_NAME",
    "METADATA_FILE_NAME",
    "EmbeddedAdminRequests",
    "EmbeddedRegistry",
]

METADATA_FILE_NAME = "cluster-metadata.json"
LOCK_FILE_NAME = "cluster-metadata.lock"
FORMAT_VERSION = 1
BROKER_CONFIGS_FILE_NAME = "broker-configs.json"


class _Topic:
    """A topic as the embedded registry keeps it (mutable, under the registry's lock)."""

    def __init__(
        self,
        topic_id: uuid.UUID,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str],
        states: dict[int, PartitionState] | None = None,
    ) -> None:
        self.topic_id = topic_id
        self.assignment = assignment
        self.configs = configs
        self.states: dict[int, PartitionState] = states or {}
        self.adding_replicas: dict[int, tuple[int, ...]] = {}
        self.removing_replicas: dict[int, tuple[int, ...]] = {}

    def copy(self) -> _Topic:
        topic = _Topic(self.topic_id, dict(self.assignment), dict(self.configs), dict(self.states))
        topic.adding_replicas = dict(self.adding_replicas)
        topic.removing_replicas = dict(self.removing_replicas)
        return topic

    def record(self, name: str) -> TopicRecord:
        return TopicRecord(
            name,
            self.topic_id,
            dict(self.assignment),
            dict(self.configs),
            dict(self.adding_replicas),
            dict(self.removing_replicas),
        )


class EmbeddedRegistry(Registry):
    """Cluster metadata in ``<metadata_dir>/cluster-metadata.json``, for a cluster of one broker."""

    def __init__(self, metadata_dir: Path, *, fsync: bool = True) -> None:
        super().__init__()
        self.metadata_dir = Path(metadata_dir)
        self.path = self.metadata_dir / METADATA_FILE_NAME
        self._fsync = fsync
        self._lock = threading.RLock()
        self._started = False
        self._lock_fd: int | None = None
        self._cluster_id: str | None = None
        self._controller_epoch = 0
        self._topics: dict[str, _Topic] = {}
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller: int | None = None
        self._admin_requests = EmbeddedAdminRequests(self._open, self.get_topic, self._notify)
        self._security_store = FileSecurityStore(self.metadata_dir)
        self._quota_store = FileQuotaStore(self.metadata_dir)
        self._shutdowns: dict[int, tuple[str, int]] = {}
        self._unclean_restarts: set[int] = set()  # in memory: a cluster of one has no other replica
        self._unreachable: dict[int, set[int]] = {}  # follower -> leaders it reports (in memory)
        self._offline: dict[int, set[tuple[str, int]]] = {}  # in memory, as the ephemeral znodes
        self._batch = threading.local()  # depth and dirty flag of this thread's write_batch
        self.writes = 0  # rewrites of the file since start (what a test of batching counts)

    @property
    def admin_requests(self) -> AdminRequests:
        return self._admin_requests

    @property
    def security_store(self) -> SecurityStore:
        return self._security_store

    @property
    def quota_store(self) -> QuotaStore:
        return self._quota_store

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self.metadata_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = self._acquire_lock()
            try:
                self._load()
            except BaseException:
                self._release_lock()
                raise
            self._started = True

    def close(self) -> None:
        with self._lock:
            if not self._started:
                return
            self._started = False
            had_brokers = bool(self._brokers)
            had_controller = self._controller is not None
            self._brokers.clear()
            self._controller = None
            self._shutdowns.clear()
            self._unclean_restarts.clear()
            self._offline.clear()
            self._unreachable.clear()
            self._release_lock()
        if had_brokers:
            self._notify(BROKERS)
        if had_controller:
            self._notify(CONTROLLER)

    def _acquire_lock(self) -> int:
        path = self.metadata_dir / LOCK_FILE_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RegistryError(
                    f"{self.path} is in use by another registry (another broker on this data directory?)"
                ) from None
            raise
        return fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextlib.contextmanager
    def _open(self) -> Iterator[None]:
        """Hold the lock of a started registry."""
        with self._lock:
            if not self._started:
                raise RegistryUnavailableError(f"the embedded registry at {self.path} is not started")
            yield

    # -- persistence -------------------------------------------------------------------------------
    def _load(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.with_name(self.path.name + ".tmp").unlink()  # an interrupted write
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            document = json.loads(text)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            version = document.get("version")
            if version != FORMAT_VERSION:
                raise RegistryError(
                    f"{self.path}: unsupported metadata format version {version!r} "
                    f"(this kctl reads version {FORMAT_VERSION})"
                )
            self._cluster_id = document.get("cluster_id")
            self._controller_epoch = int(document.get("controller_epoch", 0))
            self._topics = {
                name: self._topic_from_json(entry) for name, entry in document.get("topics", {}).items()
            }
        except RegistryError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise RegistryError(f"{self.path}: corrupt cluster metadata: {error}") from error

    @staticmethod
    def _topic_from_json(entry: dict[str, Any]) -> _Topic:
        states = {
            int(p): PartitionState(
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                isr=tuple(s["isr"]),
                controller_epoch=s["controller_epoch"],
                partition_epoch=s["partition_epoch"],
                elr=tuple(s.get("elr", ())),
            )
            for p, s in entry.get("partition_states", {}).items()
        }
        return _Topic(
            topic_id=decode_uuid(entry["topic_id"]),
            assignment={int(p): tuple(r) for p, r in sorted(entry["partitions"].items(), key=_int_key)},
            configs={str(k): str(v) for k, v in entry.get("configs", {}).items()},
            states=states,
        )

    def _document(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "controller_epoch": self._controller_epoch,
            "topics": {
                name: {
                    "topic_id": encode_uuid(topic.topic_id),
                    "partitions": {str(p): list(r) for p, r in sorted(topic.assignment.items())},
                    "configs": dict(sorted(topic.configs.items())),
                    "partition_states": {
                        str(p): {
                            "leader": s.leader,
                            "leader_epoch": s.leader_epoch,
                            "isr": list(s.isr),
                            "controller_epoch": s.controller_epoch,
                            "partition_epoch": s.partition_epoch,
                            **({"elr": list(s.elr)} if s.elr else {}),
                        }
                        for p, s in sorted(topic.states.items())
                    },
                }
                for name, topic in sorted(self._topics.items())
            },
        }

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        batch = self._batch
        if getattr(batch, "depth", 0):
            batch.depth += 1
            try:
                yield
            finally:
                batch.depth -= 1
            return
        with self._open():
            before = (
                self._cluster_id,
                self._controller_epoch,
                {n: t.copy() for n, t in self._topics.items()},
            )
        batch.depth, batch.dirty = 1, False
        try:
            yield
        finally:
            batch.depth = 0
            if batch.dirty:
                self._save_batch(before)

    def _save_batch(self, before: tuple[str | None, int, dict[str, _Topic]]) -> None:
        """The write at the end of a batch (whether the block ended well or not: what it changed in
        memory is stored); if the write fails, the state from before the block is back, and the
        listeners (which heard of each change as it was made in memory) hear of that too."""
        try:
            with self._open():
                try:
                    self._save()
                except BaseException:
                    self._cluster_id, self._controller_epoch, self._topics = before
                    raise
        except BaseException:
            self._notify(TOPICS)
            self._notify(PARTITIONS)
            raise

    def _save(self) -> None:
        """Write the document atomically: a reader (or a crash) sees the old or the new one."""
        if getattr(self._batch, "depth", 0):
            self._batch.dirty = True  # written once, at the end of the batch
            return
        self.writes += 1
        data = json.dumps(self._document(), indent=2).encode("utf-8") + b"\n"
        replace_file(self.path, data, fsync=self._fsync)

    # -- cluster -----------------------------------------------------------------------------------
    def cluster_id(self) -> str:
        with self._open():
            if self._cluster_id is None:
                self._cluster_id = encode_uuid(random_kafka_uuid())
                self._save()
            return self._cluster_id

    # -- brokers -----------------------------------------------------------------------------------
    def register_broker(self, reg: BrokerRegistration) -> None:
        with self._open():
            self._brokers[reg.broker_id] = reg
        self._notify(BROKERS)

    def wait_for_stale_registration(self, broker_id: int, timeout_s: float | None = None) -> None:
        """Nothing to wait for: registrations live in this process's memory."""

    def unregister_broker(self, broker_id: int) -> None:
        with self._open():
            if self._brokers.pop(broker_id, None) is None:
                return
        self._notify(BROKERS)

    def live_brokers(self) -> list[BrokerRegistration]:
        with self._open():
            return [self._brokers[b] for b in sorted(self._brokers)]

    # -- controller --------------------------------------------------------------------------------
    def try_become_controller(self, broker_id: int) -> bool:
        with self._open():
            if self._controller is not None:
                return self._controller == broker_id
            self._controller_epoch += 1
            self._save()
            self._controller = broker_id
        self._notify(CONTROLLER)
        return True

    def controller_fence(self) -> ControllerFence | None:
        with self._open():
            return None if self._controller is None else ControllerFence(self._controller_epoch, 0)

    def _check_fence(self, fence: ControllerFence) -> None:
        if self._controller is None or fence.epoch != self._controller_epoch:
            raise ControllerMovedError(f"controller epoch {fence.epoch} is no longer current")

    def resign_controller(self) -> None:
        with self._open():
            if self._controller is None:
                return
            self._controller = None
        self._notify(CONTROLLER)

    def controller_id(self) -> int | None:
        with self._open():
            return self._controller

    def controller_epoch(self) -> int:
        with self._open():
            return self._controller_epoch

    # -- topics ------------------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicRecord:
        validate_topic_name(name)
        normalized = validate_replica_assignment(assignment)
        with self._open():
            if name in self._topics:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            check_topic_collisions(name, self._topics)
            topic = _Topic(topic_id or random_kafka_uuid(), normalized, dict(configs))
            self._topics[name] = topic
            try:
                self._save()
            except BaseException:
                del self._topics[name]
                raise
            record = topic.record(name)
        self._notify(TOPICS)
        return record

    def delete_topic(self, name: str) -> None:
        with self._open():
            topic = self._topics.pop(name, None)
            if topic is None:
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            try:
                self._save()
            except BaseException:
                self._topics[name] = topic
                raise
        self._notify(TOPICS)

    def add_partitions(self, name: str, new_assignment: dict[int, tuple[int, ...]]) -> TopicRecord:
        with self._open():
            topic = self._topic(name)
            added = validate_new_partitions(topic.assignment, new_assignment)
            previous = topic.assignment
            topic.assignment = {**previous, **added}
            try:
                self._save()
            except BaseException:
                topic.assignment = previous
                raise
            record = topic.record(name)
        self._notify(TOPICS)
        return record

    def topics(self) -> dict[str, TopicRecord]:
        with self._open():
            return {name: self._topics[name].record(name) for name in sorted(self._topics)}

    def get_topic(self, name: str) -> TopicRecord | None:
        with self._open():
            topic = self._topics.get(name)
            return None if topic is None else topic.record(name)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        with self._open():
            topic = self._topic(name)
            previous = topic.configs
            topic.configs = {str(k): str(v) for k, v in configs.items()}
            try:
                self._save()
            except BaseException:
                topic.configs = previous
                raise
        self._notify(CONFIGS)

    # -- dynamic broker configs: <metadata_dir>/broker-configs.json {"version":1,"brokers":{entity:{..}}}
    @property
    def _broker_configs_path(self) -> Path:
        return self.metadata_dir / BROKER_CONFIGS_FILE_NAME

    def _read_broker_configs(self) -> dict[str, dict[str, str]]:
        try:
            document = json.loads(self._broker_configs_path.read_text(encoding="utf-8"))
            brokers = document["brokers"]
            return {str(e): {str(k): str(v) for k, v in c.items()} for e, c in brokers.items()}
        except FileNotFoundError:
            return {}
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise RegistryError(f"{self._broker_configs_path}: corrupt broker configs: {error}") from error

    def broker_configs(self, entity: str) -> dict[str, str]:
        with self._open():
            return dict(self._read_broker_configs().get(entity, {}))

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        with self._open():
            brokers = self._read_broker_configs()
            if configs:
                brokers[entity] = {str(k): str(v) for k, v in configs.items()}
            else:
                brokers.pop(entity, None)
            data = json.dumps({"version": 1, "brokers": brokers}, indent=2, sort_keys=True).encode() + b"\n"
            replace_file(self._broker_configs_path, data, fsync=self._fsync)
        self._notify(CONFIGS)

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        return topic

    # -- partition state ---------------------------------------------------------------------------
    def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        *,
        expected_partition_epoch: int | None = None,
    ) -> PartitionState:
        with self._open():
            entry = self._topic(topic)
            if partition not in entry.assignment:
                raise UnknownTopicError(f"Partition {topic}-{partition} does not exist.")
            current = entry.states.get(partition)
            current_epoch = -1 if current is None else current.partition_epoch
            if expected_partition_epoch is not None and expected_partition_epoch != current_epoch:
                raise PartitionStateConflictError(
                    f"Partition {topic}-{partition} is at partition epoch {current_epoch}, "
                    f"not {expected_partition_epoch}"
                )
            stored = dataclasses.replace(state, partition_epoch=current_epoch + 1)
            entry.states[partition] = stored
            try:
                self._save()
            except BaseException:
                if current is None:
                    del entry.states[partition]
                else:
                    entry.states[partition] = current
                raise
        self._notify(PARTITIONS)
        return stored

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        with self._open():
            return dict(sorted(self._topic(topic).states.items()))

    def set_partition_states(
        self, updates: list[PartitionStateUpdate], fence: ControllerFence
    ) -> dict[tuple[str, int], PartitionState]:
        with self._open():
            self._check_fence(fence)
            for update in updates:
                entry = self._topic(update.topic)
                if update.partition not in entry.assignment:
                    raise UnknownTopicError(f"Partition {update.topic}-{update.partition} does not exist.")
                current = entry.states.get(update.partition)
                current_epoch = -1 if current is None else current.partition_epoch
                if update.expected_partition_epoch != current_epoch:
                    raise PartitionStateConflictError(
                        f"Partition {update.topic}-{update.partition} is at partition epoch "
                        f"{current_epoch}, not {update.expected_partition_epoch}"
                    )
            previous = {
                (u.topic, u.partition): self._topics[u.topic].states.get(u.partition) for u in updates
            }
            stored: dict[tuple[str, int], PartitionState] = {}
            for update in updates:
                state = update.state
                stored[(update.topic, update.partition)] = self._topics[update.topic].states[
                    update.partition
                ] = dataclasses.replace(state, partition_epoch=update.expected_partition_epoch + 1)
            try:
                self._save()
            except BaseException:
                for (topic, partition), old in previous.items():
                    if old is None:
                        self._topics[topic].states.pop(partition, None)
                    else:
                        self._topics[topic].states[partition] = old
                raise
        if updates:
            self._notify(PARTITIONS)
        return stored

    def alter_partition_states(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], PartitionState | RegistryError]:
        outcome: dict[tuple[str, int], PartitionState | RegistryError] = {}
        with self._open():
            previous: dict[tuple[str, int], PartitionState] = {}
            for update in updates:
                key, where = (update.topic, update.partition), f"{update.topic}-{update.partition}"
                entry = self._topics.get(update.topic)
                current = None if entry is None else entry.states.get(update.partition)
                if entry is None or current is None or update.partition not in entry.assignment:
                    outcome[key] = UnknownTopicError(f"Partition {where} does not exist.")
                    continue
                if current.partition_epoch != update.expected_partition_epoch:
                    outcome[key] = PartitionStateConflictError(
                        f"Partition {where} is at partition epoch {current.partition_epoch}, "
                        f"not {update.expected_partition_epoch}"
                    )
                    continue
                previous.setdefault(key, current)
                state = update.state
                outcome[key] = entry.states[update.partition] = dataclasses.replace(
                    state, partition_epoch=current.partition_epoch + 1
                )
            if previous:
                try:
                    self._save()
                except BaseException:
                    for (topic, partition), old in previous.items():
                        self._topics[topic].states[partition] = old
                    raise
        if previous:
            self._notify(PARTITIONS)
        return outcome

    # -- reassignment ------------------------------------------------------------------------------
    def set_topic_assignment(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        adding_replicas: dict[int, tuple[int, ...]],
        removing_replicas: dict[int, tuple[int, ...]],
        fence: ControllerFence,
    ) -> TopicRecord:
        with self._open():
            self._check_fence(fence)
            topic = self._topic(name)
            if sorted(assignment) != sorted(topic.assignment):
                raise RegistryError(f"{name}: a reassignment cannot change the partitions")
            previous = topic.assignment
            topic.assignment = {p: tuple(r) for p, r in sorted(assignment.items())}
            try:
                self._save()
            except BaseException:
                topic.assignment = previous
                raise
            topic.adding_replicas = {p: tuple(r) for p, r in adding_replicas.items() if r}
            topic.removing_replicas = {p: tuple(r) for p, r in removing_replicas.items() if r}
            record = topic.record(name)
        self._notify(TOPICS)
        return record

    # -- controlled shutdown -----------------------------------------------------------------------
    def request_controlled_shutdown(self, broker_id: int) -> None:
        with self._open():
            self._shutdowns[broker_id] = ("requested", -1)
        self._notify(ADMIN)

    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]:
        with self._open():
            return dict(self._shutdowns)

    def answer_controlled_shutdown(self, broker_id: int, remaining_partitions: int) -> None:
        with self._open():
            if broker_id in self._shutdowns:
                self._shutdowns[broker_id] = ("done", remaining_partitions)

    def announce_unclean_restart(self, broker_id: int) -> None:
        with self._open():
            self._unclean_restarts.add(broker_id)
        self._notify(ADMIN)

    def unclean_restarts(self) -> set[int]:
        with self._open():
            return set(self._unclean_restarts)

    def finish_unclean_restart(self, broker_id: int) -> None:
        with self._open():
            self._unclean_restarts.discard(broker_id)

    def report_offline_replicas(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        with self._open():
            self._offline[broker_id] = set(partitions)
        self._notify(ADMIN)

    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        with self._open():
            return {b: set(ps) for b, ps in self._offline.items() if b in self._brokers}

    def finish_log_dir_events(self) -> None:
        """Nothing to delete: the embedded registry keeps no notifications."""

    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None:
        with self._open():
            leaders = self._unreachable.setdefault(broker_id, set())
            if unreachable:
                leaders.add(leader_id)
            else:
                leaders.discard(leader_id)
        self._notify(ADMIN)

    def unreachable_leaders(self) -> dict[int, set[int]]:
        with self._open():
            return {b: set(ls) for b, ls in self._unreachable.items() if ls and b in self._brokers}


def _int_key(item: tuple[str, Any]) -> int:
    return int(item[0])
