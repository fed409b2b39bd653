"""The ZooKeeper registry: cluster metadata in ZooKeeper, in Apache Kafka's layout (kazoo).

This module owns the conversation with ZooKeeper: the session, the ephemeral broker registration
and controller election, and the watches that turn other processes' changes into listener
notifications. The reads and writes of topics, configs and partition states are in
kctl.zk.zookeeper_topics, the controller's fenced writes in kctl.zk.zookeeper_controller (both
mixins of ZooKeeperRegistry). What each znode holds is kctl.zk.znodes' business.

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
- Watches: children of /brokers/ids ("brokers") and /brokers/topics ("topics"), the data of each
  /brokers/topics/<topic> ("topics": partitions added), of /controller ("controller"), of each
  partition state znode ("partitions"), and the children of /config/changes ("configs"; Kafka's
  config change notifications, which set_topic_configs writes and purges after 15 minutes).
- Topic deletion is done directly (the topic's znodes, its partition states, its config overrides,
  and any /admin/delete_topics marker), not by marking the topic and waiting for a controller.
- A topic without a topic id (written by Kafka before 2.8, or by hand) gets one on first read, as
  Kafka's controller assigns them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from kctl.zk import admin_requests
from kctl.zk.model import (
    BrokerIdInUseError,
    BrokerRegistration,
    ControllerFence,
    RegistryError,
    RegistryUnavailableError,
    encode_uuid,
    random_kafka_uuid,
)
from kctl.zk.registry import (
    ADMIN,
    BROKERS,
    CONFIGS,
    CONTROLLER,
    PARTITIONS,
    REASONS,
    SESSION,
    SESSION_CONNECTED,
    SESSION_EXPIRED,
    SESSION_SUSPENDED,
    TOPICS,
    Registry,
)
from kctl.zk.znodes import (
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ControlledShutdownZNode,
    ControllerEpochZNode,
    ControllerZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_controller import ControllerOpsMixin
from kctl.zk.zookeeper_topics import TopicOpsMixin, collect

__all__ = ["DEFAULT_SESSION_TIMEOUT_MS", "ZooKeeperRegistry", "split_connect"]

log = logging.getLogger("kctl.zk.zookeeper")

DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms
_UNAVAILABLE = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)
RECONNECT_MAX_DELAY_S = 1.0
_RETRIES = 10
STALE_REGISTRATION_MARGIN_S = 5.0
"""Waited for a stale registration beyond the session timeout: ZooKeeper expires sessions on its
tick (2 s by default), so a session may outlive its timeout by that much."""


def split_connect(connect: str) -> tuple[str, str]:
    """Kafka's ``zookeeper.connect`` -> (``host:port,...``, chroot or "")."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"{connect!r} names no ZooKeeper host")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot



class ZooKeeperRegistry(ControllerOpsMixin, TopicOpsMixin, Registry):
    """Cluster metadata in ZooKeeper at ``connect`` (Kafka's ``zookeeper.connect``)."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__()
        self.connect = connect
        self._hosts, self._chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = (
            session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        )
        self._op_timeout = max(session_timeout_ms, self.connection_timeout_ms) / 1000
        self._lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._client: KazooClient | None = None
        self._closed = False
        self._session_lost = False
        self._disconnected = False
        self._session_state = SESSION_CONNECTED
        self._cluster_id: str | None = None
        self._registrations: dict[int, BrokerRegistration] = {}
        self._fence: ControllerFence | None = None
        self._shutdown_requests: set[int] = set()
        # topic (or topic partition) -> (generation token, its one-shot watch function)
        self._topic_watches: dict[str, tuple[object, Callable[[WatchedEvent], None]]] = {}
        self._state_watches: dict[tuple[str, int], tuple[object, Callable[[WatchedEvent], None]]] = {}
        self._watches: list[object] = []
        self._topics_watched = False
        self._config_changes_watched = False
        self._last_config_change = -1

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def kazoo_client(self) -> KazooClient:
        """The underlying KazooClient (for tools and tests)."""
        if self._client is None:
            raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is not started")
        return self._client

    def start(self) -> None:
        with self._start_lock:  # not self._lock, which is never held across a ZooKeeper call
            if self._client is not None:
                return
            if self._closed:
                raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is closed")
            if self._chroot:
                self._create_chroot()
            client = self._new_client(self.connect)
            self._connect(client)
            self._client = client
            client.add_listener(self._on_state_change)
        try:
            with self._zk("create the top-level paths"):
                for path in PERSISTENT_PATHS:
                    client.ensure_path(path)
            self._start_watches()
        except BaseException:
            self.close()
            raise

    def _new_client(self, hosts: str) -> KazooClient:
        """A kazoo client that never gives up reconnecting and tries at least every second (kazoo's
        default backoff grows to an hour), so a broker is back soon after ZooKeeper is."""
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_MAX_DELAY_S)
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000, connection_retry=retry)

    def _connect(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            raise RegistryUnavailableError(
                f"could not connect to ZooKeeper at {self._hosts} within "
                f"{self.connection_timeout_ms} ms (zookeeper.connect={self.connect})"
            ) from None

    def _create_chroot(self) -> None:
        bootstrap = self._new_client(self._hosts)
        self._connect(bootstrap)
        try:
            with self._zk(f"create the chroot {self._chroot}"):
                bootstrap.ensure_path(self._chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._closed = True
            self._registrations.clear()
            self._topic_watches.clear()
            self._state_watches.clear()
            self._watches.clear()
        if client is not None:
            client.remove_listener(self._on_state_change)
            with contextlib.suppress(KazooException):
                client.stop()  # ends the session: ZooKeeper deletes our ephemeral znodes now
            client.close()

    def _zk_client(self) -> KazooClient:
        client = self._client
        if client is None:
            state = "closed" if self._closed else "not started"
            raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is {state}")
        if not client.connected:
            raise RegistryUnavailableError(
                f"not connected to ZooKeeper at {self.connect} (connection state {client.state}); "
                "retry when the connection is back"
            )
        return client

    @contextlib.contextmanager
    def _zk(self, action: str) -> Iterator[None]:
        """Turn kazoo's connection errors into RegistryUnavailableError, naming what failed."""
        try:
            yield
        except _UNAVAILABLE as error:
            raise RegistryUnavailableError(
                f"ZooKeeper at {self.connect} unavailable while trying to {action}: "
                f"{type(error).__name__} {error}".rstrip()
            ) from error
        except RegistryError:
            raise
        except KazooException as error:
            raise RegistryError(f"ZooKeeper error while trying to {action}: {error!r}") from error

    @property
    def _session_id(self) -> int:
        client = self._zk_client()
        return client.client_id[0] if client.client_id else 0

    # -- session -----------------------------------------------------------------------------------
    def _on_state_change(self, state: str) -> None:
        """kazoo's connection thread: never block here."""
        client = self._client
        if client is None or self._closed:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session to %s expired", self.connect)
            self._session_lost = self._disconnected = True
            self._session_state = SESSION_EXPIRED
            self._fence = None
            # Our broker registrations and controllership went with the session.
            client.handler.spawn(self._notify, CONTROLLER)
            client.handler.spawn(self._notify, SESSION)
        elif state == KazooState.SUSPENDED:
            log.warning("connection to ZooKeeper at %s suspended", self.connect)
            self._disconnected = True
            if self._session_state != SESSION_EXPIRED:
                self._session_state = SESSION_SUSPENDED
            client.handler.spawn(self._notify, SESSION)
        elif state == KazooState.CONNECTED and self._disconnected:
            new_session, self._session_lost, self._disconnected = self._session_lost, False, False
            log.info(
                "connection to ZooKeeper at %s is back (%s)",
                self.connect,
                "a new session" if new_session else "the same session",
            )
            if not new_session and self._session_state != SESSION_EXPIRED:
                self._session_state = SESSION_CONNECTED
            client.handler.spawn(self._after_reconnect, new_session)

    def session_state(self) -> str:
        return self._session_state

    def _after_reconnect(self, new_session: bool) -> None:
        """Set the topic and partition-state watches again (kazoo dropped them with the connection)
        and, in a new session, register again what this registry had registered. Listeners then
        hear that anything may have changed meanwhile (with a new session: the controller too, as
        ours, if any, went with the old session)."""
        registered = True
        if new_session:
            with self._lock:
                registrations = list(self._registrations.values())
            for registration in registrations:
                try:
                    self._create_broker_znode(registration)
                    log.info("re-registered broker %d after session expiry", registration.broker_id)
                except RegistryError:
                    log.exception("could not re-register broker %d", registration.broker_id)
                    registered = False
        try:
            with self._lock:
                topics = list(self._topic_watches)
                keys = list(self._state_watches)
            self._arm_now(topics, keys)
        except RegistryError:
            log.warning("could not set the watches again; they will be on the next reconnection")
        if new_session and registered:
            self._session_state = SESSION_CONNECTED  # only once registered again
        for reason in (*REASONS, SESSION) if new_session else (TOPICS, PARTITIONS, SESSION):
            self._notify(reason)

    # -- watches -----------------------------------------------------------------------------------
    # /brokers/ids, /brokers/topics, /controller and /config/changes use kazoo's watch recipes. The
    # many topic and partition-state znodes use plain one-shot ZooKeeper watches, set again after
    # each event and, all at once, after a reconnection: no thread or blocking call per znode.
    # Watch set-up is not a change; only later events are announced to listeners.
    def _start_watches(self) -> None:
        client = self._zk_client()
        watches = [
            ChildrenWatch(client, BrokerIdsZNode.path, self._children_watcher(BROKERS)),
            ChildrenWatch(client, TopicsZNode.path, self._on_topics),
            DataWatch(client, ControllerZNode.path, self._controller_watcher()),
            ChildrenWatch(client, ConfigEntityChangeNotificationZNode.path, self._on_config_changes),
            DataWatch(client, ReassignPartitionsZNode.path, self._data_watcher(ADMIN)),
            DataWatch(client, PreferredReplicaElectionZNode.path, self._data_watcher(ADMIN)),
            DataWatch(client, admin_requests.ELECT_LEADERS_PATH, self._data_watcher(ADMIN)),
            ChildrenWatch(client, ControlledShutdownZNode.path, self._children_watcher(ADMIN)),
        ]
        with self._lock:
            self._watches = watches
            topics = list(self._topic_watches)
        self._arm_now(topics, [])

    def _children_watcher(self, reason: str) -> Callable[[list[str]], bool | None]:
        first = [True]

        def watcher(children: list[str]) -> bool | None:
            if self._closed:
                return False
            if first[0]:
                first[0] = False
            else:
                self._notify(reason)
            return None

        return watcher

    def _controller_watcher(self) -> Callable[[bytes | None, ZnodeStat | None, Any], bool | None]:
        return self._data_watcher(CONTROLLER)

    def _data_watcher(self, reason: str) -> Callable[[bytes | None, ZnodeStat | None, Any], bool | None]:
        first = [True]

        def watcher(data: bytes | None, stat: ZnodeStat | None, event: Any = None) -> bool | None:
            if self._closed:
                return False
            if first[0]:
                first[0] = False
            else:
                self._notify(reason)
            return None

        return watcher

    def _on_topics(self, children: list[str]) -> bool | None:
        """/brokers/topics changed: watch the new topics' znodes, forget the deleted ones. (The
        first call comes from start(), which then sets the topics' watches itself.)"""
        if self._closed or self._client is None:
            return False
        new: list[str] = []
        with self._lock:  # never held across a ZooKeeper call: those may wait out a disconnection
            first, self._topics_watched = not self._topics_watched, True
            known = set(self._topic_watches)
            for topic in set(children) - known:
                token = object()
                self._topic_watches[topic] = (token, self._topic_watcher(topic, token))
                new.append(topic)
            for topic in known - set(children):
                self._forget_topic(topic)
        if not first:
            for topic in new:
                self._arm_topic(topic)
            self._notify(TOPICS)
        return None

    def _forget_topic(self, topic: str, token: object | None = None) -> None:
        """Stop watching ``topic`` (only if its watches are ``token``'s generation, if given)."""
        with self._lock:
            entry = self._topic_watches.get(topic)
            if entry is None or (token is not None and entry[0] is not token):
                return
            del self._topic_watches[topic]
            for key in [k for k in self._state_watches if k[0] == topic]:
                del self._state_watches[key]

    def _topic_watcher(self, topic: str, token: object) -> Callable[[WatchedEvent], None]:
        """The one-shot watch on /brokers/topics/<topic> (partitions added)."""

        def watcher(event: WatchedEvent) -> None:
            entry = self._topic_watches.get(topic)
            if self._closed or entry is None or entry[0] is not token or event.type == EventType.NONE:
                return  # NONE: the connection dropped; _after_reconnect sets the watch again
            if event.type == EventType.DELETED:
                self._forget_topic(topic, token)
            else:
                self._arm_topic(topic)
            self._notify(TOPICS)

        return watcher

    def _state_watcher(self, key: tuple[str, int], token: object) -> Callable[[WatchedEvent], None]:
        """The one-shot watch on a partition state znode (which may not exist yet)."""

        def watcher(event: WatchedEvent) -> None:
            entry = self._state_watches.get(key)
            if self._closed or entry is None or entry[0] is not token or event.type == EventType.NONE:
                return
            self._arm_state(key)
            self._notify(PARTITIONS)

        return watcher

    def _arm_topic(self, topic: str, *, follow: bool = True) -> Any:
        """Read /brokers/topics/<topic> with a watch; with ``follow``, its partitions' states get
        watched when the data arrives (else the caller does it). Returns kazoo's async result (None
        if there is nothing to watch)."""
        client = self._client
        with self._lock:
            entry = self._topic_watches.get(topic)
        if client is None or self._closed or entry is None:
            return None
        token, watcher = entry
        result = client.get_async(TopicZNode.path(topic), watch=watcher)
        if follow:
            result.rawlink(lambda done: self._on_topic_data(topic, token, done))
        return result

    def _arm_state(self, key: tuple[str, int]) -> Any:
        client = self._client
        with self._lock:
            entry = self._state_watches.get(key)
        if client is None or self._closed or entry is None:
            return None
        return client.exists_async(TopicPartitionStateZNode.path(*key), watch=entry[1])

    def _on_topic_data(self, topic: str, token: object, result: Any) -> list[Any]:
        """A topic znode was read: watch the states of partitions not watched yet. Returns the
        async results of the new watches (for _arm_now to wait for)."""
        if self._closed:
            return []
        if not result.successful():
            if isinstance(result.exception, NoNodeError):
                self._forget_topic(topic, token)
            return []  # a connection error: _after_reconnect sets the watches again
        try:
            _, assignment = TopicZNode.decode(topic, result.value[0])
        except ZNodeDecodeError:
            log.warning("ignoring malformed topic znode %s", TopicZNode.path(topic))
            return []
        new: list[tuple[str, int]] = []
        with self._lock:
            entry = self._topic_watches.get(topic)
            if entry is None or entry[0] is not token:
                return []
            for partition in assignment:
                key = (topic, partition)
                if key not in self._state_watches:
                    self._state_watches[key] = (token, self._state_watcher(key, token))
                    new.append(key)
        return [r for r in (self._arm_state(key) for key in new) if r is not None]

    def _arm_now(self, topics: list[str], keys: list[tuple[str, int]]) -> None:
        """Set the watches of ``topics`` (and their partition states) and of ``keys``, and wait
        until ZooKeeper has them all: no change after this returns goes unnoticed."""
        pending = [r for r in (self._arm_state(key) for key in keys) if r is not None]
        reads = []
        for topic in topics:
            with self._lock:
                entry = self._topic_watches.get(topic)
            result = self._arm_topic(topic, follow=False)
            if entry is not None and result is not None:
                reads.append((topic, entry[0], result))
        with self._zk("watch the topics"):
            for topic, token, result in reads:
                with contextlib.suppress(NoNodeError):
                    result.get(timeout=self._op_timeout)
                pending += self._on_topic_data(topic, token, result)
            collect(pending, self._op_timeout)

    def _on_config_changes(self, children: list[str]) -> bool | None:
        """A new /config/changes/config_change_<seq>: some entity's configs changed."""
        if self._closed:
            return False
        numbers = [ConfigEntityChangeNotificationSequenceZNode.sequence_number(c) for c in children]
        newest = max((n for n in numbers if n is not None), default=-1)
        with self._lock:
            first, self._config_changes_watched = not self._config_changes_watched, True
            changed = newest > self._last_config_change
            self._last_config_change = max(newest, self._last_config_change)
        if changed and not first:
            self._notify(CONFIGS)
        return None

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
        how long at most: ``timeout_s``, by default the session timeout plus
        STALE_REGISTRATION_MARGIN_S (the dead broker's session had the same timeout, and began its
        last one before this call). Never deletes the node. Raises BrokerIdInUseError when it is
        still held at the deadline (another broker runs with this id)."""
        bound = timeout_s
        if bound is None:
            bound = self.session_timeout_ms / 1000 + STALE_REGISTRATION_MARGIN_S
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
                remaining = started + bound - time.monotonic()
                if remaining <= 0:
                    raise BrokerIdInUseError(
                        f"Broker id {broker_id} is already registered at {path} by another session "
                        f"(0x{owner:x}), still after waiting {bound:.0f} s for it to expire; is "
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
