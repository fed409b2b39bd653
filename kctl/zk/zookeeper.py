"""The ZooKeeper registry: cluster metadata in ZooKeeper, in Apache Kafka's layout (kazoo).

``ZooKeeperRegistry`` is the composition of the parts of kctl.zk.registry on one ZooKeeper session
(kctl.zk.zookeeper_session), each part a class of its own that reaches ZooKeeper only through that
session:

- ``ZooKeeperBrokers`` (here): the cluster id, the ephemeral broker registrations, Kafka's
  controller election and kctl's controlled shutdown requests (/kctl/controlled_shutdown/<id>);
- kctl.zk.zookeeper_topics: topics and partition states, with the controller's fenced writes;
- kctl.zk.zookeeper_configs: topic config overrides and dynamic broker configs;
- kctl.zk.admin_requests: the admin znodes (reassignments, preferred and unclean elections);
- kctl.zk.security_store, kctl.zk.quota_store: SCRAM credentials and ACLs, client quotas;
- kctl.zk.zookeeper_watches: the watches that turn other processes' changes into listener
  notifications.

What each znode holds is kctl.zk.znodes' business.

- The connect string is Kafka's ``zookeeper.connect``: ``host:port[,host:port...][/chroot]``. A
  missing chroot path is created at start, as Kafka does.
- A broker id registered by another session — a previous run killed with SIGKILL, whose session
  has not expired yet — is waited for (``wait_for_stale_registration``, bounded by the session
  timeout plus a margin) before the broker registers; never deleted.
- Every operation needs a connected session; while the connection is down (kazoo SUSPENDED) or
  after close, operations raise RegistryUnavailableError at once instead of waiting.
- When the session expires (kazoo LOST), ZooKeeper has deleted our ephemeral znodes; when kazoo
  has a new session, the broker registrations made through this registry are created again and
  listeners hear every reason. Controllership is not re-taken: the CONTROLLER notification lets
  the broker run for it again, as Kafka's brokers do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kctl.common.time_histogram import TimeHistogram
from kctl.zk.admin_requests import ZooKeeperAdminRequests
from kctl.zk.model import (
    BrokerIdInUseError,
    BrokerRegistration,
    ControllerFence,
    PartitionState,
    PartitionStateUpdate,
    RegistryError,
    TopicRecord,
    encode_uuid,
    random_kafka_uuid,
)
from kctl.zk.quota_store import QuotaStore, ZooKeeperQuotaStore
from kctl.zk.registry import (
    ADMIN,
    BROKERS,
    CONTROLLER,
    PARTITIONS,
    REASONS,
    SESSION,
    TOPICS,
    AdminRequests,
    ClusterMembership,
    Registry,
)
from kctl.zk.security_store import SecurityStore, ZooKeeperSecurityStore
from kctl.zk.znodes import (
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ControlledShutdownBrokerZNode,
    ControlledShutdownZNode,
    ControllerEpochZNode,
    ControllerZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    OfflineReplicasBrokerZNode,
    OfflineReplicasZNode,
    UncleanRestartBrokerZNode,
    UncleanRestartZNode,
    UnreachableLeadersZNode,
    UnreachableLeaderZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_configs import ZooKeeperConfigs
from kctl.zk.zookeeper_session import (
    DEFAULT_SESSION_TIMEOUT_MS,
    ZooKeeperPart,
    ZooKeeperSession,
    collect,
    split_connect,
)
from kctl.zk.zookeeper_topics import ZooKeeperTopics
from kctl.zk.zookeeper_watches import ZooKeeperWatches

__all__ = ["DEFAULT_SESSION_TIMEOUT_MS", "ZooKeeperBrokers", "ZooKeeperRegistry", "split_connect"]

log = logging.getLogger("kctl.zk.zookeeper")

_RETRIES = 10
STALE_REGISTRATION_MARGIN_S = 5.0
"""Waited for a stale registration beyond the session timeout: ZooKeeper expires sessions on its
tick (2 s by default), so a session may outlive its timeout by that much."""


class ZooKeeperRegistry(Registry):
    """Cluster metadata in ZooKeeper at ``connect`` (Kafka's ``zookeeper.connect``): one session,
    shared by the parts this registry is made of."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__()
        self._session = ZooKeeperSession(
            connect,
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
            notify=self._notify,
            on_reconnect=self._after_reconnect,
        )
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = self._session.connection_timeout_ms
        self._brokers = ZooKeeperBrokers(self._session)
        self._topics = ZooKeeperTopics(self._session)
        self._configs = ZooKeeperConfigs(self._session)
        self._admin_requests = ZooKeeperAdminRequests(self._session)
        self._security_store = ZooKeeperSecurityStore(self._session)
        self._quota_store = ZooKeeperQuotaStore(self._session)
        self._watches = ZooKeeperWatches(self._session)

    # -- the other parts ---------------------------------------------------------------------------
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
    @property
    def kazoo_client(self) -> KazooClient:
        """The underlying KazooClient (for tests)."""
        return self._session.kazoo

    def start(self) -> None:
        if not self._session.start():
            return
        try:
            with self._session.guard("create the top-level paths"):
                client = self._session.client()
                for path in PERSISTENT_PATHS:
                    client.ensure_path(path)
            self._watches.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._brokers.forget()
        self._watches.clear()
        self._session.close()

    def session_state(self) -> str:
        return self._session.state

    def _after_reconnect(self, new_session: bool) -> None:
        """Set the topic and partition-state watches again (kazoo dropped them with the connection)
        and, in a new session, register again what this registry had registered. Listeners then
        hear that anything may have changed meanwhile (with a new session: the controller too, as
        ours, if any, went with the old session)."""
        registered = self._brokers.register_again() if new_session else True
        try:
            self._watches.arm_again()
        except RegistryError:
            log.warning("could not set the watches again; they will be on the next reconnection")
        if new_session and registered:
            self._session.restored()  # only once registered again
        for reason in (*REASONS, SESSION) if new_session else (TOPICS, PARTITIONS, SESSION):
            self._notify(reason)

    # -- ClusterMembership: ZooKeeperBrokers -------------------------------------------------------
    def cluster_id(self) -> str:
        return self._brokers.cluster_id()

    def register_broker(self, reg: BrokerRegistration) -> None:
        self._brokers.register_broker(reg)

    def wait_for_stale_registration(self, broker_id: int, timeout_s: float | None = None) -> None:
        self._brokers.wait_for_stale_registration(broker_id, timeout_s)

    def unregister_broker(self, broker_id: int) -> None:
        self._brokers.unregister_broker(broker_id)

    def live_brokers(self) -> list[BrokerRegistration]:
        return self._brokers.live_brokers()

    def try_become_controller(self, broker_id: int) -> bool:
        return self._brokers.try_become_controller(broker_id)

    def controller_fence(self) -> ControllerFence | None:
        return self._brokers.controller_fence()

    def resign_controller(self) -> None:
        self._brokers.resign_controller()

    def controller_id(self) -> int | None:
        return self._brokers.controller_id()

    def controller_epoch(self) -> int:
        return self._brokers.controller_epoch()

    def request_controlled_shutdown(self, broker_id: int) -> None:
        self._brokers.request_controlled_shutdown(broker_id)

    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]:
        return self._brokers.controlled_shutdown_requests()

    def answer_controlled_shutdown(self, broker_id: int, remaining_partitions: int) -> None:
        self._brokers.answer_controlled_shutdown(broker_id, remaining_partitions)

    def announce_unclean_restart(self, broker_id: int) -> None:
        self._brokers.announce_unclean_restart(broker_id)

    def unclean_restarts(self) -> set[int]:
        return self._brokers.unclean_restarts()

    def finish_unclean_restart(self, broker_id: int) -> None:
        self._brokers.finish_unclean_restart(broker_id)

    def report_offline_replicas(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        self._brokers.report_offline_replicas(broker_id, partitions)

    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        return self._brokers.offline_replicas()

    def finish_log_dir_events(self) -> None:
        self._brokers.finish_log_dir_events()

    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None:
        self._brokers.report_unreachable_leader(broker_id, leader_id, unreachable)

    def unreachable_leaders(self) -> dict[int, set[int]]:
        return self._brokers.unreachable_leaders()

    # -- TopicStore: ZooKeeperTopics ---------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicRecord:
        return self._topics.create_topic(name, assignment, configs, topic_id)

    def create_topics(
        self, topics: Sequence[tuple[str, dict[int, tuple[int, ...]], dict[str, str]]]
    ) -> list[TopicRecord | RegistryError]:
        return self._topics.create_topics(topics)

    def delete_topic(self, name: str) -> None:
        self._topics.delete_topic(name)

    def delete_topics(self, names: Sequence[str]) -> list[RegistryError | None]:
        return self._topics.delete_topics(names)

    def add_partitions(self, name: str, new_assignment: dict[int, tuple[int, ...]]) -> TopicRecord:
        return self._topics.add_partitions(name, new_assignment)

    def topics(self) -> dict[str, TopicRecord]:
        return self._topics.topics()

    def get_topic(self, name: str) -> TopicRecord | None:
        return self._topics.get_topic(name)

    def set_topic_assignment(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        adding_replicas: dict[int, tuple[int, ...]],
        removing_replicas: dict[int, tuple[int, ...]],
        fence: ControllerFence,
    ) -> TopicRecord:
        return self._topics.set_topic_assignment(name, assignment, adding_replicas, removing_replicas, fence)

    def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        *,
        expected_partition_epoch: int | None = None,
    ) -> PartitionState:
        return self._topics.set_partition_state(
            topic, partition, state, expected_partition_epoch=expected_partition_epoch
        )

    def set_partition_states(
        self, updates: list[PartitionStateUpdate], fence: ControllerFence
    ) -> dict[tuple[str, int], PartitionState]:
        return self._topics.set_partition_states(updates, fence)

    def alter_partition_states(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], PartitionState | RegistryError]:
        return self._topics.alter_partition_states(updates)

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        return self._topics.partition_states(topic)

    @property
    def request_latency(self) -> TimeHistogram:
        """How long this registry's ZooKeeper operations took (kctl.common.time_histogram)."""
        return self._session.request_latency

    def partition_states_of(
        self, topics: Mapping[str, TopicRecord], deleted: set[str] | None = None
    ) -> dict[tuple[str, int], PartitionState]:
        return self._topics.partition_states_of(topics, deleted)

    # -- ConfigStore: ZooKeeperConfigs -------------------------------------------------------------
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._configs.set_topic_configs(name, configs)

    def broker_configs(self, entity: str) -> dict[str, str]:
        return self._configs.broker_configs(entity)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        self._configs.set_broker_configs(entity, configs)


class ZooKeeperBrokers(ZooKeeperPart, ClusterMembership):
    """The cluster id, the live brokers, the controller and the controlled shutdown requests: the
    session-bound facts (registrations, controllership and shutdown requests are ephemeral znodes
    of the session)."""

    def __init__(self, session: ZooKeeperSession) -> None:
        super().__init__(session)
        self._lock = threading.RLock()
        self._cluster_id: str | None = None
        self._registrations: dict[int, BrokerRegistration] = {}

    def forget(self) -> None:
        """Forget the registrations (the registry is closing: they go with the session)."""
        with self._lock:
            self._registrations.clear()

    def register_again(self) -> bool:
        """In a new session: register again what this registry had registered (ZooKeeper deleted it
        with the old session). False when some registration could not be made."""
        registered = True
        with self._lock:
            registrations = list(self._registrations.values())
        for registration in registrations:
            try:
                self._create_broker_znode(registration)
                log.info("re-registered broker %d after session expiry", registration.broker_id)
            except RegistryError:
                log.exception("could not re-register broker %d", registration.broker_id)
                registered = False
        return registered

    # -- cluster -----------------------------------------------------------------------------------
    def cluster_id(self) -> str:
        if self._cluster_id is not None:
            return self._cluster_id
        client = self._zk_client()
        with self._zk("read or create the cluster id"):
            try:
                data, _ = client.get(ClusterIdZNode.path)
                cluster_id = ClusterIdZNode.decode(data)
            except NoNodeError:
                cluster_id = encode_uuid(random_kafka_uuid())
                try:
                    client.create(ClusterIdZNode.path, ClusterIdZNode.encode(cluster_id), makepath=True)
                except NodeExistsError:  # another broker won the race
                    data, _ = client.get(ClusterIdZNode.path)
                    cluster_id = ClusterIdZNode.decode(data)
        self._cluster_id = cluster_id
        return cluster_id

    # -- brokers -----------------------------------------------------------------------------------
    def register_broker(self, reg: BrokerRegistration) -> None:
        self._create_broker_znode(reg)
        with self._lock:
            self._registrations[reg.broker_id] = reg
        self._notify(BROKERS)

    def wait_for_stale_registration(self, broker_id: int, timeout_s: float | None = None) -> None:
        """Wait until no other session holds /brokers/ids/<broker_id>: after a kill -9 the dead
        process's registration stays until its session expires. Logs once whom it waits for and for
        how long at most (``timeout_s``, by default the session timeout plus
        STALE_REGISTRATION_MARGIN_S: the dead broker's session had the same timeout and began
        before this call). Never deletes the node. Raises BrokerIdInUseError when it is still held
        at the deadline (another broker runs with this id)."""
        if timeout_s is None:
            timeout_s = self._session.session_timeout_ms / 1000 + STALE_REGISTRATION_MARGIN_S
        client = self._zk_client()
        path = BrokerIdZNode.path(broker_id)
        started = time.monotonic()
        waited_for: set[int] = set()
        with self._zk(f"wait for the registration of broker {broker_id} to go"):
            while True:
                gone = threading.Event()
                stat = client.exists(path, watch=lambda _event, done=gone: done.set())
                if stat is None or stat.ephemeralOwner in (0, self._session_id):
                    if waited_for:
                        log.info(
                            "the stale registration of broker %d went after %.1f s; registering",
                            broker_id,
                            time.monotonic() - started,
                        )
                    return
                owner = stat.ephemeralOwner
                remaining = started + timeout_s - time.monotonic()
                if remaining <= 0:
                    raise BrokerIdInUseError(
                        f"Broker id {broker_id} is already registered at {path} by another session "
                        f"(0x{owner:x}), still after waiting {timeout_s:.0f} s for it to expire; is "
                        "another broker running with this broker.id?"
                    )
                if owner not in waited_for:
                    waited_for.add(owner)
                    log.info(
                        "broker id %d is registered at %s by another session (0x%x), as a broker "
                        "killed without a clean stop leaves it: waiting up to %.0f s for that session "
                        "to expire before registering",
                        broker_id,
                        path,
                        owner,
                        remaining,
                    )
                gone.wait(min(remaining, 1.0))  # the watch, or a look again every second

    def _create_broker_znode(self, reg: BrokerRegistration) -> None:
        """Kafka's checked ephemeral create: a znode left by this very session is ours to update;
        one owned by another session means the broker id is taken."""
        client = self._zk_client()
        path = BrokerIdZNode.path(reg.broker_id)
        data = BrokerIdZNode.encode(reg)
        with self._zk(f"register broker {reg.broker_id}"):
            for _ in range(_RETRIES):
                try:
                    client.create(path, data, ephemeral=True)
                    return
                except NodeExistsError:
                    pass
                try:
                    _, stat = client.get(path)
                except NoNodeError:
                    continue  # its owner just went away: try again
                if stat.ephemeralOwner != self._session_id:
                    raise BrokerIdInUseError(
                        f"Broker id {reg.broker_id} is already registered at {path} by another "
                        f"session (0x{stat.ephemeralOwner:x}); is another broker running with "
                        "this broker.id?"
                    )
                try:
                    client.set(path, data, version=stat.version)
                    return
                except (BadVersionError, NoNodeError):
                    continue
        raise RegistryError(f"could not register broker {reg.broker_id}: {path} kept changing")

    def unregister_broker(self, broker_id: int) -> None:
        with self._lock:
            if self._registrations.pop(broker_id, None) is None:
                return
        client = self._zk_client()
        path = BrokerIdZNode.path(broker_id)
        with self._zk(f"unregister broker {broker_id}"):
            try:
                _, stat = client.get(path)
                if stat.ephemeralOwner == self._session_id:
                    client.delete(path, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass
        self._notify(BROKERS)

    def live_brokers(self) -> list[BrokerRegistration]:
        client = self._zk_client()
        with self._zk("list the live brokers"):
            ids = sorted(int(child) for child in client.get_children(BrokerIdsZNode.path) if child.isdigit())
            results = collect([client.get_async(BrokerIdZNode.path(i)) for i in ids], self._op_timeout)
        brokers = []
        for broker_id, result in zip(ids, results, strict=True):
            if result is None:
                continue  # went away meanwhile
            try:
                brokers.append(BrokerIdZNode.decode(broker_id, result[0]))
            except ZNodeDecodeError as error:
                log.warning("ignoring a broker registration kctl cannot read: %s", error)
        return brokers

    # -- controller --------------------------------------------------------------------------------
    def try_become_controller(self, broker_id: int) -> bool:
        """Kafka's election: whoever creates the ephemeral /controller first is the controller; it
        bumps /controller_epoch in the same multi-op, conditional on the epoch it read."""
        client = self._zk_client()
        with self._zk(f"elect broker {broker_id} as controller"):
            for _ in range(_RETRIES):
                try:
                    data, stat = client.get(ControllerZNode.path)
                    owner = ControllerZNode.decode(data)
                    ours = stat.ephemeralOwner == self._session_id and owner == broker_id
                    if ours and self._fence is None:
                        epoch, epoch_version = self._read_controller_epoch(client)
                        self._fence = ControllerFence(epoch, epoch_version)
                    return ours
                except NoNodeError:
                    pass
                epoch, epoch_version = self._read_controller_epoch(client)
                transaction = client.transaction()
                transaction.create(ControllerZNode.path, ControllerZNode.encode(broker_id), ephemeral=True)
                transaction.set_data(
                    ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch + 1), version=epoch_version
                )
                results = transaction.commit()
                if not any(isinstance(r, Exception) for r in results):
                    self._fence = ControllerFence(epoch + 1, results[1].version)
                    log.info("broker %d is the controller (epoch %d)", broker_id, epoch + 1)
                    self._notify(CONTROLLER)
                    return True
                # NodeExists: another broker won; BadVersion: the epoch moved. Look again.
        return False

    @staticmethod
    def _read_controller_epoch(client: KazooClient) -> tuple[int, int]:
        """(epoch, znode version), creating /controller_epoch with 0 when it does not exist."""
        while True:
            try:
                data, stat = client.get(ControllerEpochZNode.path)
                return ControllerEpochZNode.decode(data), stat.version
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    client.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))

    def controller_fence(self) -> ControllerFence | None:
        return self._fence

    def resign_controller(self) -> None:
        self._fence = None
        client = self._zk_client()
        with self._zk("resign as controller"):
            try:
                _, stat = client.get(ControllerZNode.path)
                if stat.ephemeralOwner != self._session_id:
                    return
                client.delete(ControllerZNode.path, version=stat.version)
            except (NoNodeError, BadVersionError):
                return
        self._notify(CONTROLLER)

    def controller_id(self) -> int | None:
        client = self._zk_client()
        with self._zk("read the controller"):
            try:
                data, _ = client.get(ControllerZNode.path)
            except NoNodeError:
                return None
        return ControllerZNode.decode(data)

    def controller_epoch(self) -> int:
        client = self._zk_client()
        with self._zk("read the controller epoch"):
            try:
                data, _ = client.get(ControllerEpochZNode.path)
            except NoNodeError:
                return 0
        return ControllerEpochZNode.decode(data)

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

    def announce_unclean_restart(self, broker_id: int) -> None:
        client = self._zk_client()
        path = UncleanRestartBrokerZNode.path(broker_id)
        with self._zk(f"announce the unclean restart of broker {broker_id}"):
            with contextlib.suppress(NoNodeError):
                client.delete(path)  # a previous run's, whose session has not expired yet
            client.create(path, b"", ephemeral=True, makepath=True)
        self._notify(ADMIN)

    def unclean_restarts(self) -> set[int]:
        client = self._zk_client()
        with self._zk("read the unclean restart announcements"):
            return {int(c) for c in client.get_children(UncleanRestartZNode.path) if c.isdigit()}

    def finish_unclean_restart(self, broker_id: int) -> None:
        client = self._zk_client()
        with self._zk(f"finish the unclean restart of broker {broker_id}"), contextlib.suppress(NoNodeError):
            client.delete(UncleanRestartBrokerZNode.path(broker_id))

    def report_offline_replicas(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        client = self._zk_client()
        path = OfflineReplicasBrokerZNode.path(broker_id)
        data = OfflineReplicasBrokerZNode.encode(partitions)
        with self._zk(f"report the offline replicas of broker {broker_id}"):
            try:
                client.set(path, data)
            except NoNodeError:
                client.create(path, data, ephemeral=True, makepath=True)
            event = LogDirEventNotificationSequenceZNode
            client.create(event.create_path(), event.encode(broker_id), sequence=True, makepath=True)
        self._notify(ADMIN)

    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        client = self._zk_client()
        with self._zk("read the offline replicas"):
            ids = sorted(int(c) for c in client.get_children(OfflineReplicasZNode.path) if c.isdigit())
            reads = [client.get_async(OfflineReplicasBrokerZNode.path(i)) for i in ids]
            results = collect(reads, self._op_timeout)
        offline: dict[int, set[tuple[str, int]]] = {}
        for broker_id, result in zip(ids, results, strict=True):
            if result is not None:
                try:
                    offline[broker_id] = OfflineReplicasBrokerZNode.decode(broker_id, result[0])
                except ZNodeDecodeError as error:
                    log.warning("ignoring offline replicas kctl cannot read: %s", error)
        return offline

    def finish_log_dir_events(self) -> None:
        client = self._zk_client()
        with self._zk("delete the log dir event notifications"):
            for name in client.get_children(LogDirEventNotificationZNode.path):
                with contextlib.suppress(NoNodeError):
                    client.delete(f"{LogDirEventNotificationZNode.path}/{name}")

    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None:
        client = self._zk_client()
        path = UnreachableLeaderZNode.path(broker_id, leader_id)
        what = "report" if unreachable else "withdraw the report of"
        with self._zk(f"{what} leader {leader_id} unreachable from broker {broker_id}"):
            if unreachable:
                with contextlib.suppress(NodeExistsError):
                    client.create(path, b"", ephemeral=True, makepath=True)
            else:
                with contextlib.suppress(NoNodeError):
                    client.delete(path)
        self._notify(ADMIN)

    def unreachable_leaders(self) -> dict[int, set[int]]:
        client = self._zk_client()
        with self._zk("read the unreachable leader reports"):
            children = client.get_children(UnreachableLeadersZNode.path)
        reports: dict[int, set[int]] = {}
        for child in children:
            parsed = UnreachableLeaderZNode.parse(child)
            if parsed is not None:
                reports.setdefault(parsed[0], set()).add(parsed[1])
        return reports

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
