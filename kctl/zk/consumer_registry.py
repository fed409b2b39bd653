"""The ZooKeeper consumers' registry, live: a small kazoo session that registers consumers, claims and
releases partition ownership, stores offsets under ``/consumers`` (formats in
kctl.zk.consumer_znodes), reads the brokers' topics, and arms the one-shot watches a ZooKeeper-mode
consumer rebalances on.

It is independent of the broker's registry (kctl.zk.zookeeper): a consumer is a client of the
cluster, with a session (and so ephemeral nodes) of its own. Every method is synchronous; watch
callbacks and the session listener run on kazoo's thread and must return quickly.

::

    with ConsumerRegistry("127.0.0.1:2181/kafka", session_timeout_ms=6000) as zk:
        zk.register("billing", "host:1234", ConsumerRegistration({"orders": 1}))
        if zk.claim("billing", "orders", 0, "host:1234"):
            zk.commit_offset("billing", "orders", 0, 42)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError

from kctl.zk.consumer_znodes import (
    ConsumerGroupZNode,
    ConsumerIdsZNode,
    ConsumerIdZNode,
    ConsumerOffsetsZNode,
    ConsumerOffsetZNode,
    ConsumerOwnersZNode,
    ConsumerOwnerZNode,
    ConsumerRegistration,
    ConsumersZNode,
    ConsumerZNodeDecodeError,
)
from kctl.zk.model import RegistryUnavailableError, parse_endpoint
from kctl.zk.znodes import BrokerIdsZNode, BrokerIdZNode, TopicsZNode, TopicZNode, ZNodeDecodeError
from kctl.zk.zookeeper_session import handshake_hosts

__all__ = ["ConsumerGroupStore", "ConsumerRegistry", "Watch"]

log = logging.getLogger("kctl.zk.consumers")
kazoo_log = logging.getLogger("kctl.zk.consumers.kazoo")
"""kazoo's own messages (each dropped connection, each retry): quiet unless asked for, since the
registry reports what matters itself (RegistryUnavailableError, a lost session)."""
if kazoo_log.level == logging.NOTSET:
    kazoo_log.setLevel(logging.CRITICAL)

Watch = Callable[[object], None]
"""A one-shot watch callback (kazoo passes a WatchedEvent)."""


class ConsumerGroupStore(Protocol):
    """What the seeds' ZooKeeper consumer groups keep in ZooKeeper (``/consumers/<group>``): the
    consumers' registrations, partition ownership and committed offsets, with the brokers' topics
    the consumers rebalance on. ConsumerRegistry is the one implementation (a session of its own:
    a consumer is a client of the cluster, not part of the broker's registry)."""

    def register(self, group: str, consumer_id: str, registration: ConsumerRegistration) -> None: ...
    def unregister(self, group: str, consumer_id: str) -> None: ...
    def consumers(self, group: str, watch: Watch | None = None) -> dict[str, ConsumerRegistration]: ...
    def broker_ids(self, watch: Watch | None = None) -> list[int]: ...
    def topic_names(self, watch: Watch | None = None) -> list[str]: ...
    def partitions(self, topic: str, watch: Watch | None = None) -> list[int]: ...
    def owner(self, group: str, topic: str, partition: int) -> str | None: ...
    def owners(self, group: str) -> dict[tuple[str, int], str]: ...
    def claim(self, group: str, topic: str, partition: int, consumer_id: str) -> bool: ...
    def release(self, group: str, topic: str, partition: int, consumer_id: str) -> None: ...
    def committed_offset(self, group: str, topic: str, partition: int) -> int | None: ...
    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]: ...
    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None: ...
    def delete_offset(self, group: str, topic: str, partition: int) -> bool: ...
    def groups(self) -> list[str]: ...
    def group_exists(self, group: str) -> bool: ...
    def delete_group(self, group: str) -> None: ...


class ConsumerRegistry(ConsumerGroupStore):
    """A kazoo session on ``connect`` (``host:port[,...][/chroot]``) for the consumers' registry.
    ``on_session_lost`` is called (on kazoo's thread) when the session expires: every ephemeral
    node this registry made is gone, and so are its watches."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 6_000,
        connection_timeout_ms: int = 6_000,
        on_session_lost: Callable[[], None] | None = None,
    ) -> None:
        self.connect = connect.strip()
        self.connection_timeout_ms = connection_timeout_ms
        self._client = KazooClient(  # each server listed thrice: see handshake_hosts
            hosts=handshake_hosts(self.connect), timeout=session_timeout_ms / 1000.0, logger=kazoo_log
        )
        self._on_session_lost = on_session_lost
        self._client.add_listener(self._state_changed)
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Self:
        try:
            self._client.start(timeout=self.connection_timeout_ms / 1000.0)
        except (KazooTimeoutError, KazooException) as error:
            with contextlib.suppress(Exception):
                self._client.close()
            raise RegistryUnavailableError(f"cannot reach ZooKeeper at {self.connect}: {error}") from None
        self._started = True
        return self

    def close(self) -> None:
        """End the session: this registry's ephemeral nodes go away at once. Idempotent."""
        if not self._started:
            return
        self._started = False
        self._client.remove_listener(self._state_changed)  # closing is not losing the session
        with contextlib.suppress(Exception):
            self._client.stop()
        with contextlib.suppress(Exception):
            self._client.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def kazoo_client(self) -> KazooClient:
        """The kazoo client (for reading arbitrary znodes)."""
        return self._client

    @property
    def session_id(self) -> int | None:
        session = self._client.client_id
        return session[0] if session else None

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    def _state_changed(self, state: str) -> None:
        if state == KazooState.LOST and self._on_session_lost is not None:
            log.warning("ZooKeeper session lost: ownership and registration are gone")
            self._on_session_lost()

    # -- consumer ids ------------------------------------------------------------------------------
    def register(self, group: str, consumer_id: str, registration: ConsumerRegistration) -> None:
        """Create (or replace, after a session loss) the consumer's ephemeral id node."""
        path = ConsumerIdZNode.path(group, consumer_id)
        data = ConsumerIdZNode.encode(registration)
        self._client.ensure_path(ConsumerIdsZNode.path(group))
        try:
            self._client.create(path, data, ephemeral=True)
        except NodeExistsError:  # ours, from a session that has not expired yet, or a stale one
            with contextlib.suppress(NoNodeError):
                self._client.delete(path)
            self._client.create(path, data, ephemeral=True)

    def unregister(self, group: str, consumer_id: str) -> None:
        with contextlib.suppress(NoNodeError):
            self._client.delete(ConsumerIdZNode.path(group, consumer_id))

    def consumers(self, group: str, watch: Watch | None = None) -> dict[str, ConsumerRegistration]:
        """The group's live consumers by id (sorted); ``watch`` fires once when the set changes."""
        try:
            ids = self._client.get_children(ConsumerIdsZNode.path(group), watch=watch)
        except NoNodeError:
            if watch is not None:  # watch the group appearing
                self._client.ensure_path(ConsumerIdsZNode.path(group))
                return self.consumers(group, watch)
            return {}
        out: dict[str, ConsumerRegistration] = {}
        for consumer_id in sorted(ids):
            try:
                data, _ = self._client.get(ConsumerIdZNode.path(group, consumer_id))
                out[consumer_id] = ConsumerIdZNode.decode(group, consumer_id, data)
            except NoNodeError:
                continue  # left meanwhile (the watch fires)
            except ConsumerZNodeDecodeError as error:
                log.warning("ignoring consumer %s: %s", consumer_id, error)
        return out

    # -- brokers and topics ------------------------------------------------------------------------
    def broker_ids(self, watch: Watch | None = None) -> list[int]:
        try:
            children = self._client.get_children(BrokerIdsZNode.path, watch=watch)
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.isdigit())

    def broker_addresses(self, security_protocol: str = "PLAINTEXT") -> list[str]:
        """``host:port`` of every live broker (``/brokers/ids/<id>``) for a client speaking
        ``security_protocol``: the endpoint of the broker's first listener with that protocol (by
        the registration's ``listener_security_protocol_map``), else its registered host and port —
        how Kafka's ZooKeeper-era tools found the brokers. Sorted by broker id."""
        wanted = security_protocol.strip().upper()
        addresses = []
        for broker_id in self.broker_ids():
            try:
                data, _ = self._client.get(BrokerIdZNode.path(broker_id))
                registration = BrokerIdZNode.decode(broker_id, data)
                protocols = BrokerIdZNode.security_protocols(broker_id, data)
            except NoNodeError:
                continue  # gone meanwhile
            except ZNodeDecodeError as error:
                log.warning("ignoring broker %d: %s", broker_id, error)
                continue
            mapping = protocols or registration.security_protocol_map
            protocols = {name.upper(): protocol.upper() for name, protocol in mapping.items()}
            host, port = registration.host, registration.port
            for endpoint in registration.listeners:
                name, endpoint_host, endpoint_port = parse_endpoint(endpoint)
                if protocols.get(name.upper(), name.upper()) == wanted:
                    host, port = endpoint_host, endpoint_port
                    break
            addresses.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        return addresses

    def topic_names(self, watch: Watch | None = None) -> list[str]:
        try:
            return sorted(self._client.get_children(TopicsZNode.path, watch=watch))
        except NoNodeError:
            return []

    def partitions(self, topic: str, watch: Watch | None = None) -> list[int]:
        """The topic's partition ids (empty for an unknown topic); ``watch`` fires when it changes."""
        try:
            data, _ = self._client.get(TopicZNode.path(topic), watch=watch)
        except NoNodeError:
            return []
        try:
            _, assignment = TopicZNode.decode(topic, data)
        except ZNodeDecodeError as error:
            log.warning("ignoring topic %s: %s", topic, error)
            return []
        return sorted(assignment)

    # -- ownership ---------------------------------------------------------------------------------
    def owner(self, group: str, topic: str, partition: int) -> str | None:
        try:
            data, _ = self._client.get(ConsumerOwnerZNode.path(group, topic, partition))
        except NoNodeError:
            return None
        return ConsumerOwnerZNode.decode(data)

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        """(topic, partition) -> owning consumer id, for every owned partition of the group."""
        out: dict[tuple[str, int], str] = {}
        for topic in self._children(ConsumerOwnersZNode.path(group)):
            for p in self._children(ConsumerOwnersZNode.path(group, topic)):
                if p.isdigit() and (who := self.owner(group, topic, int(p))) is not None:
                    out[(topic, int(p))] = who
        return dict(sorted(out.items()))

    def claim(self, group: str, topic: str, partition: int, consumer_id: str) -> bool:
        """Take ownership (an ephemeral node holding ``consumer_id``): True if this consumer owns the
        partition now, False while another one does."""
        path = ConsumerOwnerZNode.path(group, topic, partition)
        try:
            self._client.create(path, ConsumerOwnerZNode.encode(consumer_id), ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            return self.owner(group, topic, partition) == consumer_id and self._mine(path)

    def _mine(self, path: str) -> bool:
        """Whether the ephemeral node at ``path`` belongs to this session (not a dead one's)."""
        try:
            _, stat = self._client.get(path)
        except NoNodeError:
            return False
        return bool(stat.ephemeralOwner) and stat.ephemeralOwner == self.session_id

    def release(self, group: str, topic: str, partition: int, consumer_id: str) -> None:
        """Give up ownership, if this consumer holds it (another's node is left alone)."""
        path = ConsumerOwnerZNode.path(group, topic, partition)
        try:
            data, stat = self._client.get(path)
            if ConsumerOwnerZNode.decode(data) == consumer_id:
                self._client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    # -- offsets -----------------------------------------------------------------------------------
    def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        try:
            data, _ = self._client.get(ConsumerOffsetZNode.path(group, topic, partition))
        except NoNodeError:
            return None
        return ConsumerOffsetZNode.decode(group, topic, partition, data)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of the group: (topic, partition) -> next offset."""
        out: dict[tuple[str, int], int] = {}
        for topic in self._children(ConsumerOffsetsZNode.path(group)):
            for p in self._children(ConsumerOffsetsZNode.path(group, topic)):
                if p.isdigit() and (offset := self.committed_offset(group, topic, int(p))) is not None:
                    out[(topic, int(p))] = offset
        return dict(sorted(out.items()))

    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        path = ConsumerOffsetZNode.path(group, topic, partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            self._client.set(path, data)
        except NoNodeError:
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:
                self._client.set(path, data)

    def delete_offset(self, group: str, topic: str, partition: int) -> bool:
        try:
            self._client.delete(ConsumerOffsetZNode.path(group, topic, partition))
            return True
        except NoNodeError:
            return False

    # -- groups ------------------------------------------------------------------------------------
    def groups(self) -> list[str]:
        return sorted(self._children(ConsumersZNode.path))

    def group_exists(self, group: str) -> bool:
        return self._client.exists(ConsumerGroupZNode.path(group)) is not None

    def delete_group(self, group: str) -> None:
        """Delete the group's znodes (its offsets); ValueError while a consumer is registered."""
        if self._children(ConsumerIdsZNode.path(group)):
            raise ValueError(f"group {group!r} has registered consumers")
        with contextlib.suppress(NoNodeError, NotEmptyError):
            self._client.delete(ConsumerGroupZNode.path(group), recursive=True)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._client.get_children(path))
        except NoNodeError:
            return []
