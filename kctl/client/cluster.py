"""The cluster client: bootstrap, cluster metadata, a connection per broker, leader and controller
lookup, and retries with backoff under a deadline. The producer, consumer and admin clients build on it.

::

    cluster = ClusterClient("127.0.0.1:9092", {"client.id": "tool"})
    metadata = cluster.refresh_metadata(["orders"])
    leader = cluster.leader_for(TopicPartition("orders", 0))
    response = cluster.request(leader, ApiKey.LIST_OFFSETS, body)
    cluster.close()

Bootstrap: the addresses are tried in order until one connects (and answers ApiVersions); after
the first Metadata response the brokers it lists are used, the bootstrap addresses only again when no
listed broker can be reached.

Retries (``retry``): an operation is repeated while it fails with a retriable error — a lost or
refused connection, a timeout, or a broker error Kafka marks retriable (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, NOT_CONTROLLER, REQUEST_TIMED_OUT, ...) — waiting ``retry.backoff.ms``,
doubling up to ``retry.backoff.max.ms`` (with jitter), until the deadline (``default.api.timeout.ms``
unless given); then the last error is raised. Each retry marks the metadata stale, so the next
leader or controller lookup asks the cluster again. UNKNOWN_TOPIC_OR_PARTITION is retried only when
the caller says so (``retry_codes``), e.g. right after creating the topic.

Brokers that do not answer. The client remembers each broker whose connection was refused or
timed out, or whose request went unanswered (``not_answering``), until it answers again. A broker
killed while it leads partitions stays in the cluster metadata until its ZooKeeper session expires
(``zookeeper.session.timeout.ms``, 18 s by default), so every retry is sent to it again and is
refused again, until the deadline; its partitions may then have no leader and no replica to elect.
With ``give_up_after`` set (the admin client sets ``request.timeout.ms``), a broker silent that long
is given up: ``connection`` raises ``BrokerNotAnsweringError`` (not retriable; no new connection is
tried for another ``give_up_after``), the retry engines stop retrying what waits on it, and
``offline`` says when a partition without a leader has no replica left to elect. Without it
(producers, consumers) nothing changes: they retry until their deadlines.

Not thread-safe beyond what ``BrokerConnection`` offers: the pool and metadata are guarded by a lock,
but operations of one ``ClusterClient`` from several threads interleave their retries.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kctl.client.config import ClientConfig, coerce_config
from kctl.client.connection import BrokerConnection, format_address, parse_bootstrap
from kctl.client.errors import (
    BrokerNotAnsweringError,
    BrokerResponseError,
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kctl.client.types import BrokerInfo, ClusterMetadata, PartitionMetadata, TopicMetadata
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.typed import ApiRequest

log = logging.getLogger(__name__)

T = TypeVar("T")

NOT_RETRIED_BY_DEFAULT = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
"""Retriable in Kafka's table, but usually final for an operator: retried only when asked."""
RETRIABLE_CODES = frozenset(int(c) for c in ErrorCode if c.retriable) - NOT_RETRIED_BY_DEFAULT
"""Broker error codes ``retry`` retries by default."""

R = TypeVar("R")


class Deadline:
    """A point in (monotonic) time by which an operation must finish."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (0 when past)."""
        return max(self.at - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def timeout(self, cap: float) -> float:
        """``cap`` or what is left, whichever is smaller (at least a millisecond)."""
        return max(min(cap, self.remaining()), 0.001)


def is_retriable(error: BaseException, retry_codes: Collection[int] = ()) -> bool:
    """Whether ``retry`` tries again after ``error``."""
    if isinstance(error, BrokerResponseError):
        return error.code in RETRIABLE_CODES or error.code in retry_codes
    if isinstance(error, KafkaConnectionError | KafkaTimeoutError):
        return error.retriable
    return False


def metadata_from_response(response: Any) -> ClusterMetadata:
    """A ``ClusterMetadata`` from a decoded MetadataResponse."""
    brokers = {
        b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in response.brokers
    }
    topics: dict[str, TopicMetadata] = {}
    for t in response.topics:
        if t.name is None:
            continue
        partitions = tuple(
            sorted(
                (
                    PartitionMetadata(
                        topic=t.name,
                        partition=p.partition_index,
                        leader=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes),
                        offline_replicas=tuple(p.offline_replicas),
                        error_code=p.error_code,
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
        )
        topic_id = t.topic_id if t.topic_id is not None and t.topic_id.int else None
        topics[t.name] = TopicMetadata(t.name, topic_id, bool(t.is_internal), partitions, t.error_code)
    return ClusterMetadata(response.cluster_id, response.controller_id, brokers, topics)


@dataclasses.dataclass
class _Silence:
    """A broker that has not answered since ``since`` (when the first failed attempt began); the
    last failed attempt ended at ``last``, with ``reason``."""

    since: float
    last: float
    reason: str


class ClusterClient:
    """Connections to the brokers of one cluster, and what the cluster's metadata says about them.

    ``config``: a ``ClientConfig``, Kafka client properties (``{"client.id": ...}``) or None;
    ``overrides`` are ``ClientConfig`` field names (``client_id="tool"``) and win."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        config: ClientConfig | Mapping[str, str] | None = None,
        *,
        retry_bootstrap: bool = False,
        **overrides: Any,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.config = coerce_config(config, **overrides)
        self._lock = threading.RLock()
        self._nodes: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._metadata = ClusterMetadata(None, -1, {}, {})
        self._metadata_at = float("-inf")
        self._stale = True
        self._closed = False
        self._bootstrapped = False
        self.retry_bootstrap = retry_bootstrap
        """Whether ``retry`` retries when no broker has answered yet (a cluster still starting);
        by default that fails at once, as an operator's tool should."""
        self.give_up_after: float | None = None
        """Seconds a broker may go without answering before operations stop waiting for it
        (``BrokerNotAnsweringError``); None: retry it until the deadline (see the module docstring)."""
        self._silent: dict[int, _Silence] = {}

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        servers = ",".join(format_address(h, p) for h, p in self.bootstrap)
        return f"<ClusterClient {servers} {len(self._nodes)} connections>"

    def close(self) -> None:
        """Close every connection. The client cannot be used afterwards."""
        with self._lock:
            self._closed = True
            for conn in self._nodes.values():
                conn.close()
            self._nodes.clear()
            if self._bootstrap_conn is not None:
                self._bootstrap_conn.close()
                self._bootstrap_conn = None

    # ------------------------------------------------------------------------------ connections

    def _open(self, host: str, port: int, node_id: int | None, deadline: Deadline | None) -> BrokerConnection:
        if self._closed:
            raise KafkaConnectionError("the client is closed", host=host, port=port)
        connect_timeout = self.config.connect_timeout
        if deadline is not None:
            connect_timeout = deadline.timeout(connect_timeout)
        conn = BrokerConnection(
            host,
            port,
            client_id=self.config.client_id,
            timeout=self.config.request_timeout,
            connect_timeout=connect_timeout,
            node_id=node_id,
            send_buffer_bytes=self.config.send_buffer_bytes,
            receive_buffer_bytes=self.config.receive_buffer_bytes,
            security=self.config.security,
        )
        self._bootstrapped = True
        return conn

    def connection(self, node_id: int, *, deadline: Deadline | None = None) -> BrokerConnection:
        """The connection to broker ``node_id`` (opened if needed; metadata refreshed if the broker
        is not known yet). Raises ``KafkaConnectionError`` if it cannot be reached, and
        ``BrokerNotAnsweringError`` once it has been given up (``give_up_after``).

        A new connection is opened outside the client's lock (unless the caller holds it): a broker
        whose connects hear nothing (a host cut off) keeps only its own callers waiting, up to the
        connect timeout, not every other request of the client."""
        with self._lock:
            conn = self._nodes.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            broker = self._metadata.broker(node_id)
            if broker is None:
                self.refresh_metadata([], deadline=deadline)
                broker = self._metadata.broker(node_id)
            if broker is None:
                if self.given_up(node_id):
                    raise self._not_answering(node_id, "and is no longer in the cluster metadata")
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            silence = self._silent.get(node_id)
            if silence is not None and self.given_up(node_id):
                assert self.give_up_after is not None
                if time.monotonic() - silence.last < self.give_up_after:
                    raise self._not_answering(node_id)  # not dialed again so soon
            conn = self._adopt_bootstrap(broker)
            if conn is not None:
                return self._install(node_id, conn)
        started = time.monotonic()
        try:
            conn = self._open(broker.host, broker.port, node_id, deadline)
        except (KafkaConnectionError, KafkaTimeoutError) as error:
            self.broker_failed(node_id, error, started=started)
            if self.given_up(node_id):
                raise self._not_answering(node_id) from error
            raise
        with self._lock:
            return self._install(node_id, conn)

    def _install(self, node_id: int, conn: BrokerConnection) -> BrokerConnection:
        """Keep ``conn`` as the connection to ``node_id`` (lock held), unless another thread opened
        one meanwhile: then that one (``conn`` is closed)."""
        existing = self._nodes.get(node_id)
        if self._closed or (existing is not None and not existing.closed and existing is not conn):
            conn.close()
            if self._closed:
                raise KafkaConnectionError("the client is closed", host=conn.host, port=conn.port)
            assert existing is not None
            return existing
        self._silent.pop(node_id, None)
        self._nodes[node_id] = conn
        return conn

    def is_connected(self, node_id: int) -> bool:
        """Whether a connection to broker ``node_id`` is open (a request to it goes at once)."""
        return self.open_connection(node_id) is not None

    def open_connection(self, node_id: int) -> BrokerConnection | None:
        """The open connection to broker ``node_id``, None when there is none (never connects)."""
        conn = self._nodes.get(node_id)
        return conn if conn is not None and not conn.closed else None

    def broker_failed(self, node_id: int, error: BaseException, *, started: float | None = None) -> None:
        """Note that broker ``node_id`` did not answer an attempt begun at ``started`` (default:
        now): a refused or timed-out connection, an unanswered or broken request."""
        now = time.monotonic()
        with self._lock:
            silence = self._silent.get(node_id)
            if silence is None:
                self._silent[node_id] = _Silence(started if started is not None else now, now, str(error))
            else:
                silence.last, silence.reason = now, str(error)

    def given_up(self, node_id: int) -> bool:
        """Whether operations stop waiting for broker ``node_id``: it has not answered for
        ``give_up_after`` seconds (never when ``give_up_after`` is None)."""
        silence = self._silent.get(node_id)
        limit = self.give_up_after
        return limit is not None and silence is not None and silence.last - silence.since >= limit

    def not_answering(self) -> dict[int, str]:
        """The brokers whose last attempt failed, by id, with why (the last error)."""
        with self._lock:
            return {node_id: s.reason for node_id, s in sorted(self._silent.items())}

    def offline(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` has no leader (in the cached metadata) and none of its replicas could be
        elected: each is gone from the cluster metadata or given up. Always False without
        ``give_up_after`` (such a client waits for the broker to come back)."""
        if self.give_up_after is None:
            return False
        topic = self._metadata.topic(tp.topic)
        part = topic.partition(tp.partition) if topic is not None else None
        if part is None or part.leader >= 0:
            return False
        brokers = self._metadata.brokers
        return all(r not in brokers or self.given_up(r) for r in part.replicas)

    def _not_answering(self, node_id: int, more: str = "") -> BrokerNotAnsweringError:
        silence = self._silent[node_id]
        broker = self._metadata.broker(node_id)
        where = f" ({format_address(broker.host, broker.port)})" if broker is not None else ""
        span = silence.last - silence.since
        return BrokerNotAnsweringError(
            f"broker {node_id}{where} has not answered for {span:.1f}s{' ' + more if more else ''}: "
            f"{silence.reason}",
            node_id=node_id,
            host=broker.host if broker is not None else None,
            port=broker.port if broker is not None else None,
        )

    def _adopt_bootstrap(self, broker: BrokerInfo) -> BrokerConnection | None:
        conn = self._bootstrap_conn
        if conn is not None and not conn.closed and (conn.host, conn.port) == (broker.host, broker.port):
            self._bootstrap_conn = None
            conn.node_id = broker.node_id
            return conn
        return None

    def any_connection(self, *, deadline: Deadline | None = None) -> BrokerConnection:
        """A connection to some broker: an open one if there is one, else the first known broker or
        bootstrap address that answers."""
        with self._lock:
            for conn in [*self._nodes.values(), self._bootstrap_conn]:
                if conn is not None and not conn.closed:
                    return conn
            errors: list[str] = []
            refused: KafkaAuthenticationError | None = None
            # brokers that answered last time first: a broker killed stays in the metadata a while
            brokers = sorted(self._metadata.brokers.values(), key=lambda b: b.node_id in self._silent)
            for broker in brokers:
                try:
                    return self.connection(broker.node_id, deadline=deadline)
                except KafkaAuthenticationError as error:
                    refused = refused or error
                except KafkaError as error:
                    errors.append(str(error))
                if deadline is not None and deadline.expired:
                    break
            for host, port in self.bootstrap:
                try:
                    self._bootstrap_conn = self._open(host, port, None, deadline)
                    return self._bootstrap_conn
                except KafkaAuthenticationError as error:
                    refused = refused or error
                except KafkaError as error:
                    errors.append(str(error))
                if deadline is not None and deadline.expired:
                    break
            if refused is not None:
                raise refused  # a broker answered and refused the credentials: not "unreachable"
            servers = ", ".join(format_address(h, p) for h, p in self.bootstrap)
            detail = "; ".join(dict.fromkeys(errors)) or "no address to try"
            failed = KafkaConnectionError(f"cannot reach any broker (bootstrap servers {servers}): {detail}")
            if not self._bootstrapped and not self.retry_bootstrap:
                failed.retriable = False  # never reached the cluster: fail now rather than at the deadline
            if brokers and all(self.given_up(b.node_id) for b in brokers):
                failed.retriable = False  # every broker known has been given up
            raise failed

    def connections(self) -> dict[int, BrokerConnection]:
        """The open connections by broker id (bootstrap-only connections are not listed)."""
        with self._lock:
            return {n: c for n, c in self._nodes.items() if not c.closed}

    # ------------------------------------------------------------------------------ requests

    def request(
        self,
        node_id: int | None,
        api_key: int,
        body: ApiRequest[R],
        version: int | None = None,
        *,
        deadline: Deadline | None = None,
    ) -> R:
        """Send one request to broker ``node_id`` (any broker when None) and return the response.

        The wait is ``request.timeout.ms``, or less when ``deadline`` is nearer."""
        conn = (
            self.connection(node_id, deadline=deadline)
            if node_id is not None
            else self.any_connection(deadline=deadline)
        )
        timeout = deadline.timeout(self.config.request_timeout) if deadline else self.config.request_timeout
        started = time.monotonic()
        try:
            return conn.request(api_key, body, version, timeout=timeout)
        except (KafkaConnectionError, KafkaTimeoutError) as error:
            if conn.node_id is not None:
                self.broker_failed(conn.node_id, error, started=started)
            raise

    def request_controller(
        self,
        api_key: int,
        body: ApiRequest[R],
        version: int | None = None,
        *,
        deadline: Deadline | None = None,
    ) -> R:
        """Send one request to the controller (looked up in the metadata)."""
        return self.request(self.controller_id(deadline=deadline), api_key, body, version, deadline=deadline)

    # ------------------------------------------------------------------------------ metadata

    @property
    def metadata(self) -> ClusterMetadata:
        """The cached metadata (all topics the client has seen), possibly stale or empty."""
        return self._metadata

    def mark_stale(self) -> None:
        """Make the next leader or controller lookup refresh the metadata first."""
        self._stale = True

    def _needs_refresh(self) -> bool:
        age_ms = (time.monotonic() - self._metadata_at) * 1000
        return self._stale or age_ms >= self.config.metadata_max_age_ms

    def refresh_metadata(
        self,
        topics: Iterable[str] | None = None,
        *,
        allow_auto_create: bool = False,
        deadline: Deadline | None = None,
    ) -> ClusterMetadata:
        """Ask a broker for metadata about ``topics`` (None: every topic; []: brokers only).

        Returns what the response says (requested topics, errors included); the cache merges it
        (topics the broker does not know are dropped from the cache)."""
        names = None if topics is None else list(dict.fromkeys(topics))
        body = MetadataRequest(
            topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=allow_auto_create,
        )
        with self._lock:
            conn = self.any_connection(deadline=deadline)
            timeout = (
                deadline.timeout(self.config.request_timeout) if deadline else self.config.request_timeout
            )
            version = conn.version_for(ApiKey.METADATA)
            if version == 0 and body.topics is None:
                body.topics = []  # v0: an empty list means every topic (and no list means none)
            response = conn.request(ApiKey.METADATA, body, version, timeout=timeout)
            fresh = metadata_from_response(response)
            self._merge(fresh, full=names is None)
            return fresh

    def _merge(self, fresh: ClusterMetadata, *, full: bool) -> None:
        if full:
            topics = {
                n: t for n, t in fresh.topics.items() if t.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            }
        else:
            topics = dict(self._metadata.topics)
            for name, topic in fresh.topics.items():
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    topics.pop(name, None)
                else:
                    topics[name] = topic
        before = self._metadata.brokers
        self._metadata = ClusterMetadata(fresh.cluster_id, fresh.controller_id, fresh.brokers, topics)
        self._metadata_at = time.monotonic()
        self._stale = False
        # connections to brokers that left the cluster, or moved, are closed
        for node_id, conn in list(self._nodes.items()):
            broker = fresh.brokers.get(node_id)
            if broker is None or (broker.host, broker.port) != (conn.host, conn.port):
                conn.close()
                del self._nodes[node_id]
        for node_id, broker in fresh.brokers.items():
            old = before.get(node_id)
            moved = old is not None and (old.host, old.port) != (broker.host, broker.port)
            if moved and node_id in self._silent:
                del self._silent[node_id]  # at a new address: not the broker that was silent

    def topic_metadata(self, topic: str, *, deadline: Deadline | None = None) -> TopicMetadata:
        """A topic's metadata (from the cache unless stale); raises ``BrokerResponseError`` with the
        topic's error (UNKNOWN_TOPIC_OR_PARTITION, ...) if it has one."""
        with self._lock:
            cached = self._metadata.topic(topic)
            if cached is None or self._needs_refresh():
                cached = self.refresh_metadata([topic], deadline=deadline).topic(topic)
            if cached is None:
                raise BrokerResponseError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} is not in the metadata"
                )
            if cached.error_code:
                raise BrokerResponseError(cached.error_code, context=f"topic {topic!r}")
            return cached

    def leader_for(self, tp: TopicPartition, *, deadline: Deadline | None = None) -> int:
        """The broker id of the leader of ``tp``; raises LEADER_NOT_AVAILABLE (retriable) when it has
        none, UNKNOWN_TOPIC_OR_PARTITION when the topic or partition does not exist."""
        with self._lock:
            topic = self.topic_metadata(tp.topic, deadline=deadline)
            part = topic.partition(tp.partition)
            if part is None or part.leader < 0:
                fresh = self.refresh_metadata([tp.topic], deadline=deadline).topic(tp.topic)
                if fresh is None or fresh.error_code:
                    code = fresh.error_code if fresh is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    raise BrokerResponseError(code, context=f"topic {tp.topic!r}")
                part = fresh.partition(tp.partition)
            if part is None:
                raise BrokerResponseError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {tp.topic!r} has no partition {tp.partition}",
                )
            if part.leader < 0:
                raise BrokerResponseError(
                    part.error_code or ErrorCode.LEADER_NOT_AVAILABLE, context=f"partition {tp}"
                )
            return part.leader

    def controller_id(self, *, deadline: Deadline | None = None) -> int:
        """The controller's broker id (metadata refreshed when stale or when none is known)."""
        with self._lock:
            if self._needs_refresh() or self._metadata.controller_id < 0:
                self.refresh_metadata([], deadline=deadline)
            controller = self._metadata.controller_id
            if controller < 0:
                raise BrokerResponseError(ErrorCode.NOT_CONTROLLER, "the cluster names no controller")
            return controller

    def cluster_id(self, *, deadline: Deadline | None = None) -> str | None:
        if self._needs_refresh():
            self.refresh_metadata([], deadline=deadline)
        return self._metadata.cluster_id

    def wait_for_topics(
        self, topics: Iterable[str], *, timeout: float | None = None, leaders: bool = True
    ) -> dict[str, TopicMetadata]:
        """Wait until every topic is in the metadata (and, with ``leaders``, every partition has a
        leader); returns their metadata. Raises ``KafkaTimeoutError`` at the deadline."""
        names = list(dict.fromkeys(topics))
        deadline = Deadline(timeout if timeout is not None else self.config.default_api_timeout)

        def check() -> dict[str, TopicMetadata]:
            fresh = self.refresh_metadata(names, deadline=deadline)
            for name in names:
                topic = fresh.topic(name)
                if topic is None:
                    raise BrokerResponseError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"topic {name!r}")
                if topic.error_code:
                    raise BrokerResponseError(topic.error_code, context=f"topic {name!r}")
                if leaders and (not topic.partitions or any(p.leader < 0 for p in topic.partitions)):
                    raise BrokerResponseError(ErrorCode.LEADER_NOT_AVAILABLE, context=f"topic {name!r}")
            return {name: fresh.topics[name] for name in names}

        try:
            return self.retry(check, deadline=deadline, retry_codes={ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
        except BrokerResponseError as error:
            raise KafkaTimeoutError(f"topics not ready after {deadline.seconds:g}s: {error}") from error

    # ------------------------------------------------------------------------------ retries

    def deadline(self, timeout: float | None = None) -> Deadline:
        """A deadline ``timeout`` seconds from now (default ``default.api.timeout.ms``)."""
        return Deadline(timeout if timeout is not None else self.config.default_api_timeout)

    def retry(
        self,
        operation: Callable[[], T],
        *,
        deadline: Deadline | None = None,
        retry_codes: Collection[int] = (),
        description: str = "",
    ) -> T:
        """Run ``operation`` until it succeeds, fails with an error that is not retriable, or the
        deadline passes (then its last error is raised). ``retry_codes``: more broker error codes to
        retry (e.g. UNKNOWN_TOPIC_OR_PARTITION right after a create)."""
        deadline = deadline if deadline is not None else self.deadline()
        backoff = self.config.retry_backoff_ms / 1000.0
        backoff_max = self.config.retry_backoff_max_ms / 1000.0
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except KafkaError as error:
                if not is_retriable(error, retry_codes):
                    raise
                wait = backoff * random.uniform(0.8, 1.2)
                if deadline.remaining() <= wait:
                    raise
                log.debug(
                    "%s attempt %d failed (%s); retrying in %.3fs",
                    description or "operation",
                    attempt,
                    error,
                    wait,
                )
                self.mark_stale()
                time.sleep(wait)
                backoff = min(backoff * 2, backoff_max)
