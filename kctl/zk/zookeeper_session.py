"""One ZooKeeper session, shared by the parts of the ZooKeeper registry (kctl.zk.zookeeper).

This module owns the plumbing of the conversation with ZooKeeper, and knows no znode:

- the kazoo client: Kafka's ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``), the
  chroot created at start when it is missing (as Kafka does), and a reconnection that never gives
  up and tries at least every second;
- the session's state: connected, suspended (the connection is down, the session may still be
  alive) or expired (ZooKeeper deleted the session's ephemeral znodes), and what dies with the
  session: the controller fence won in it;
- the rule that every registry operation needs a connected session: while the connection is down
  or after close, ``client()`` raises RegistryUnavailableError at once instead of waiting, and
  ``guard()`` turns kazoo's errors into RegistryUnavailableError / RegistryError naming what failed;
- ``ZooKeeperPart``: the base of each part of the registry (brokers and controller, topics,
  configs, admin requests, watches, the security and quota stores), its one way to the session.

Listeners hear SESSION when the state changes, and CONTROLLER when the session expired (our
controllership went with it); after a reconnection the registry's ``on_reconnect`` hook runs on
kazoo's thread (``new_session``: whether the old session expired meanwhile).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import Callback, ZnodeStat
from kazoo.retry import KazooRetry

from kctl.common.time_histogram import TimeHistogram
from kctl.zk.model import (
    ControllerFence,
    PartitionState,
    RegistryError,
    RegistryUnavailableError,
    TopicRecord,
)
from kctl.zk.registry import (
    CONTROLLER,
    SESSION,
    SESSION_CONNECTED,
    SESSION_EXPIRED,
    SESSION_SUSPENDED,
)
from kctl.zk.watched_reads import WatchedReads

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_MS",
    "RECONNECT_MAX_DELAY_S",
    "ZooKeeperPart",
    "ZooKeeperSession",
    "collect",
    "handshake_hosts",
    "split_connect",
]

log = logging.getLogger("kctl.zk.zookeeper")

DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms
RECONNECT_MAX_DELAY_S = 1.0
HANDSHAKE_SHARE = 3
"""kazoo waits up to the session timeout divided by the servers listed for a server to answer its
connect request. `handshake_hosts` lists every server at least this often, so a server that
accepts a connection but never answers it (ZooKeeper 3.8.0 leaves one hanging that arrives while it
is still loading its data) costs a third of the session before the next try, which then finds the
session alive, instead of the whole session."""
_UNAVAILABLE = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)


def split_connect(connect: str) -> tuple[str, str]:
    """Kafka's ``zookeeper.connect`` -> (``host:port,...``, chroot or "")."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"{connect!r} names no ZooKeeper host")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


def handshake_hosts(connect: str) -> str:
    """``host:port,...[/chroot]`` with each server repeated until at least `HANDSHAKE_SHARE` are
    listed (the chroot, if any, kept at the end)."""
    hosts, slash, chroot = connect.partition("/")
    servers = [server.strip() for server in hosts.split(",") if server.strip()]
    repeat = -(-HANDSHAKE_SHARE // len(servers)) if servers else 1
    return ",".join(servers * repeat) + slash + chroot


def collect(results: Sequence[IAsyncResult], timeout: float) -> list[tuple[bytes, ZnodeStat] | None]:
    """The (data, stat) of kazoo's asynchronous reads (``get_async``: pipelined), None for a znode
    that does not exist."""
    out: list[tuple[bytes, ZnodeStat] | None] = []
    for result in results:
        try:
            out.append(result.get(timeout=timeout))
        except NoNodeError:
            out.append(None)
    return out


def _ignore(_: object) -> None:
    return None


class ZooKeeperSession:
    """A session to the ZooKeeper ensemble at ``connect`` (Kafka's ``zookeeper.connect``).
    ``notify(reason)`` tells the registry's listeners; ``on_reconnect(new_session)`` is called on
    kazoo's thread once the connection is back after a suspension or an expiry."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        notify: Callable[[str], None] = _ignore,
        on_reconnect: Callable[[bool], None] = _ignore,
    ) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = (
            session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        )
        #: how long one operation (or one pipelined batch) may wait for ZooKeeper
        self.op_timeout = max(session_timeout_ms, self.connection_timeout_ms) / 1000
        #: how long the registry's operations took (the broker's ZooKeeperRequestLatencyMs metric)
        self.request_latency = TimeHistogram()
        #: partition states read under their watches (kctl.zk.watched_reads): disarmed with the connection
        self.watched_states: WatchedReads[tuple[str, int], PartitionState | None] = WatchedReads()
        #: topic records (topic znode and config overrides) read under the topic znodes' watches
        self.watched_topics: WatchedReads[str, TopicRecord] = WatchedReads()
        self.notify = notify
        self._on_reconnect = on_reconnect
        self._start_lock = threading.Lock()
        self._lock = threading.Lock()
        self._client: KazooClient | None = None
        self._watch_thread: int | None = None  # the thread kazoo runs watch callbacks on
        self.closed = False
        self._session_lost = False
        self._disconnected = False
        self.state = SESSION_CONNECTED
        #: the controllership won in this session (kctl.zk.zookeeper), None once it is lost
        self.fence: ControllerFence | None = None

    @classmethod
    def plain(cls, connect: str, *, timeout: float) -> ZooKeeperSession:
        """A started session for a tool (``kctl user``): kazoo's own reconnection policy, and a
        chroot that must exist. Raises kazoo's timeout error when ZooKeeper cannot be reached."""
        session = cls(connect, session_timeout_ms=int(timeout * 1000))
        client = KazooClient(hosts=connect, timeout=timeout)
        client.start(timeout=timeout)
        session._client = client
        return session

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> bool:
        """Connect, creating the chroot first when it is missing. Returns False when the session
        was started already. Raises RegistryUnavailableError when ZooKeeper cannot be reached
        within ``connection_timeout_ms``, or after close."""
        with self._start_lock:  # never held across anything but the connection itself
            if self._client is not None:
                return False
            if self.closed:
                raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is closed")
            if self.chroot:
                self._create_chroot()
            client = self._new_client(self.chroot)
            self._connect(client)
            self._client = client
            client.add_listener(self._on_state_change)
            client.handler.dispatch_callback(Callback("watch", self._note_watch_thread, ()))
        return True

    def _note_watch_thread(self) -> None:
        self._watch_thread = threading.get_ident()

    def settle_watches(self, client: KazooClient, *, after_round_trip: bool = False) -> None:
        """Run the watch callbacks of every event ZooKeeper sent before now (kctl.zk.watched_reads:
        a kept read is true only once the watches that fired before the read have disarmed their
        keys). ZooKeeper sends a session's watch events before its later answers, and kazoo runs
        watch callbacks in order on one thread: after a round trip (one here unless
        ``after_round_trip``), a marker queued behind them has run once they all have. A no-op on
        that thread itself (it runs them in order anyway)."""
        if threading.get_ident() == self._watch_thread:
            return
        if not after_round_trip:
            client.exists("/")
        settled = threading.Event()
        client.handler.dispatch_callback(Callback("watch", settled.set, ()))
        if not settled.wait(self.op_timeout):
            raise RegistryUnavailableError("ZooKeeper's watch callbacks did not run in time")

    def _new_client(self, chroot: str) -> KazooClient:
        """A kazoo client that never gives up reconnecting and tries at least every second (kazoo's
        default backoff grows to an hour), so a broker is back soon after ZooKeeper is, and that
        gives up on a server's unanswered handshake after a third of the session (`HANDSHAKE_SHARE`)."""
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_MAX_DELAY_S)
        hosts = handshake_hosts(self.hosts + chroot)
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000, connection_retry=retry)

    def _connect(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            raise RegistryUnavailableError(
                f"could not connect to ZooKeeper at {self.hosts} within "
                f"{self.connection_timeout_ms} ms (zookeeper.connect={self.connect})"
            ) from None

    def _create_chroot(self) -> None:
        bootstrap = self._new_client("")
        self._connect(bootstrap)
        try:
            with self.guard(f"create the chroot {self.chroot}"):
                bootstrap.ensure_path(self.chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def close(self) -> None:
        """End the session: ZooKeeper deletes its ephemeral znodes now. Idempotent."""
        with self._lock:
            client, self._client = self._client, None
            self.closed = True
        self.watched_states.disarm_all()
        self.watched_topics.disarm_all()
        if client is not None:
            client.remove_listener(self._on_state_change)
            with contextlib.suppress(KazooException):
                client.stop()
            client.close()

    # -- access ------------------------------------------------------------------------------------
    def client(self) -> KazooClient:
        """The client, for an operation: RegistryUnavailableError unless started and connected."""
        client = self._client
        if client is None:
            state = "closed" if self.closed else "not started"
            raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is {state}")
        if not client.connected:
            raise RegistryUnavailableError(
                f"not connected to ZooKeeper at {self.connect} (connection state {client.state}); "
                "retry when the connection is back"
            )
        return client

    @property
    def kazoo(self) -> KazooClient:
        """The client whatever the connection's state (kazoo's watch recipes, the stores' own
        error handling, tests); RegistryUnavailableError unless started."""
        if self._client is None:
            raise RegistryUnavailableError(f"the ZooKeeper registry for {self.connect} is not started")
        return self._client

    @property
    def current(self) -> KazooClient | None:
        """The client, or None when not started or closed (for callbacks on kazoo's thread)."""
        return None if self.closed else self._client

    @contextlib.contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Turn kazoo's connection errors into RegistryUnavailableError, naming what failed; time the
        operation into ``request_latency`` (one registry operation: one ZooKeeper request, or one
        pipelined batch of them)."""
        started = time.perf_counter()
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
        finally:
            self.request_latency.observe(time.perf_counter() - started)

    @property
    def session_id(self) -> int:
        client = self.client()
        return client.client_id[0] if client.client_id else 0

    # -- session state -----------------------------------------------------------------------------
    def _on_state_change(self, state: str) -> None:
        """kazoo's connection thread: never block here."""
        client = self._client
        if client is None or self.closed:
            return
        if state != KazooState.CONNECTED:
            self.watched_states.disarm_all()  # the watches went with the connection
            self.watched_topics.disarm_all()
        if state == KazooState.LOST:
            log.warning("ZooKeeper session to %s expired", self.connect)
            self._session_lost = self._disconnected = True
            self.state = SESSION_EXPIRED
            self.fence = None
            # Our broker registrations and controllership went with the session.
            client.handler.spawn(self.notify, CONTROLLER)
            client.handler.spawn(self.notify, SESSION)
        elif state == KazooState.SUSPENDED:
            log.warning("connection to ZooKeeper at %s suspended", self.connect)
            self._disconnected = True
            if self.state != SESSION_EXPIRED:
                self.state = SESSION_SUSPENDED
            client.handler.spawn(self.notify, SESSION)
        elif state == KazooState.CONNECTED and self._disconnected:
            new_session, self._session_lost, self._disconnected = self._session_lost, False, False
            log.info(
                "connection to ZooKeeper at %s is back (%s)",
                self.connect,
                "a new session" if new_session else "the same session",
            )
            if not new_session and self.state != SESSION_EXPIRED:
                self.state = SESSION_CONNECTED
            client.handler.spawn(self._on_reconnect, new_session)

    def restored(self) -> None:
        """A new session has everything the expired one had (the registrations made again)."""
        self.state = SESSION_CONNECTED


class ZooKeeperPart:
    """The base of a part of the ZooKeeper registry: its way to the shared session."""

    def __init__(self, session: ZooKeeperSession) -> None:
        self._session = session

    def _zk_client(self) -> KazooClient:
        return self._session.client()

    def _zk(self, action: str) -> contextlib.AbstractContextManager[None]:
        return self._session.guard(action)

    def _notify(self, reason: str) -> None:
        self._session.notify(reason)

    @property
    def _op_timeout(self) -> float:
        return self._session.op_timeout

    @property
    def _session_id(self) -> int:
        return self._session.session_id

    @property
    def _fence(self) -> ControllerFence | None:
        return self._session.fence

    @_fence.setter
    def _fence(self, fence: ControllerFence | None) -> None:
        self._session.fence = fence
