"""``ZkGroupConsumer``: a consumer whose group is coordinated in ZooKeeper, as Kafka's old high-level
consumer was (seeds 000, 003, 004), built on ``kctl.client.consumer.Consumer`` (assign/seek).

::

    props = {"group.id": "billing", "zookeeper.connect": "127.0.0.1:2181/kafka",
             "auto.offset.reset": "smallest"}
    with ZkGroupConsumer("127.0.0.1:9092", props) as consumer:
        consumer.subscribe(["orders"])            # or subscribe(pattern="orders-.*") (white list)
        for record in consumer:
            ...

Registration and rebalancing (seed 003): the consumer registers ``/consumers/<group>/ids/<id>``
(ephemeral) and watches the group's ids, ``/brokers/ids``, its topics' znodes and, with a topic
filter, ``/brokers/topics``. Any change sets a flag; the next ``poll`` rebalances: it computes its
share (``rebalance.plan_assignment``), commits and releases (un-assigns, then deletes the owner
znode of) the partitions it no longer gets, and claims the new ones by creating their ephemeral
owner znodes. A partition whose previous owner has not let go yet is retried after
``rebalance.backoff.ms``, up to ``rebalance.max.retries`` times (then ``ZkRebalanceError``); the
partitions already claimed are read meanwhile. A partition is fetched only while this consumer's
owner znode exists, and its znode is deleted only after fetching stopped, so no partition is ever
read by two consumers at once. ``history`` records each claim and release (monotonic time).

Offsets (``kctl.client.zkgroup.storage``): a newly owned partition starts at its committed offset
(the larger of ZooKeeper's and Kafka's with ``dual.commit.enabled``), else per ``auto.offset.reset``.
Positions are committed every ``auto.commit.interval.ms`` (``auto.commit.enable``), before a
partition is released, on ``commit()`` and on ``close()`` (with auto-commit).

Session loss: when the ZooKeeper session expires, the consumer's owner znodes are gone and others
may take the partitions: the next ``poll`` drops every partition (without committing), registers
again once a new session is up, and rebalances.

Not thread-safe: use a consumer from one thread (kazoo's watcher thread only sets flags).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.exceptions import KazooException

from kctl.client.cluster import ClusterClient
from kctl.client.config import ClientConfig, ClientConfigError
from kctl.client.consumer import Consumer
from kctl.client.errors import KafkaConnectionError, KafkaError
from kctl.client.zkgroup.config import ZkGroupConfig
from kctl.client.zkgroup.rebalance import plan_assignment
from kctl.client.zkgroup.storage import OffsetStore
from kctl.common.topic_partition import TopicPartition
from kctl.zk.consumer_registry import ConsumerRegistry
from kctl.zk.consumer_znodes import STATIC, WHITE_LIST, ConsumerRegistration
from kctl.zk.model import RegistryUnavailableError

__all__ = ["OwnershipEvent", "ZkGroupConsumer", "ZkRebalanceError"]

log = logging.getLogger("kctl.client.zkgroup")

OwnershipEvent = tuple[float, str, TopicPartition]
"""(time.monotonic(), "claimed" | "released" | "lost", partition)."""


class ZkRebalanceError(KafkaError):
    """A rebalance could not claim every partition within ``rebalance.max.retries`` attempts."""


class _Hooks:
    def __init__(self, consumer: ZkGroupConsumer) -> None:
        self.consumer = consumer

    def on_poll(self, consumer: Consumer) -> None:
        self.consumer._on_poll()

    def committed_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self.consumer._store.fetch(p for p in partitions if p in self.consumer._owned)

    def on_close(self, consumer: Consumer) -> None:
        self.consumer._on_close()


class ZkGroupConsumer(Consumer):
    """A member of a ZooKeeper-coordinated group (``group.id``, ``zookeeper.connect`` required).
    ``config``: Kafka consumer properties plus ``ZkGroupConfig``'s, or a config object.
    ``on_ownership`` is called with each ``OwnershipEvent`` as it happens."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | ClusterClient,
        config: ClientConfig | Mapping[str, str] | None = None,
        *,
        on_ownership: Callable[[OwnershipEvent], None] | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(bootstrap_servers, config, **overrides)
        try:
            self.group_config = ZkGroupConfig.coerce(config)
            if not self.group_config.group_id:
                raise ClientConfigError("group.id is required")
            if not self.group_config.zookeeper_connect:
                raise ClientConfigError("zookeeper.connect is required")
        except BaseException:
            super().close()
            raise
        gc = self.group_config
        assert gc.group_id is not None and gc.zookeeper_connect is not None  # checked above
        self.group_id: str = gc.group_id
        self.consumer_id: str = gc.consumer_id or f"{socket.gethostname()}:{uuid.uuid4()}"
        self.history: list[OwnershipEvent] = []
        self._on_ownership = on_ownership
        self._changed = threading.Event()
        self._session_lost = threading.Event()
        self._owned: set[TopicPartition] = set()
        self._committed: dict[TopicPartition, int] = {}
        self._registration: ConsumerRegistration | None = None
        self._next_auto_commit = time.monotonic() + gc.auto_commit_interval_ms / 1000.0
        self._zk = ConsumerRegistry(
            gc.zookeeper_connect,
            session_timeout_ms=gc.zookeeper_session_timeout_ms,
            connection_timeout_ms=gc.zookeeper_connection_timeout_ms,
            on_session_lost=self._session_lost.set,
        )
        try:
            self._zk.start()
        except RegistryUnavailableError as error:
            super().close()
            raise KafkaConnectionError(str(error)) from None
        except BaseException:
            super().close()
            raise
        self._store = OffsetStore(self.group_id, gc.stores, self._zk, self.cluster)
        self._attach_membership(_Hooks(self))

    def __repr__(self) -> str:
        return f"<ZkGroupConsumer {self.consumer_id} of {self.group_id}: {len(self._owned)} partitions>"

    # ------------------------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | None = None) -> None:
        """Register in the group with a static subscription (``topics``) or a white-list topic filter
        (``pattern``, a regex over whole topic names); the next ``poll`` rebalances."""
        self._check_open()
        if (topics is None) == (pattern is None):
            raise ValueError("give topics or a pattern")
        if pattern is not None:
            registration = ConsumerRegistration({pattern: 1}, WHITE_LIST)
        else:
            names = list(dict.fromkeys(topics or []))
            if not names:
                raise ValueError("subscribe to at least one topic")
            registration = ConsumerRegistration(dict.fromkeys(names, 1), STATIC)
        self._registration = registration
        self._zk.register(self.group_id, self.consumer_id, registration)
        self._changed.set()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        raise KafkaError("a ZooKeeper group consumer is assigned by its group: use subscribe()")

    @property
    def owned(self) -> frozenset[TopicPartition]:
        """The partitions this consumer owns (and reads) now."""
        return frozenset(self._owned)

    @property
    def registry(self) -> ConsumerRegistry:
        return self._zk

    # ------------------------------------------------------------------------------ commits

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every owned partition) to the offset stores."""
        self._check_open()
        self._commit(offsets)

    def _commit(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        only: Iterable[TopicPartition] | None = None,
    ) -> None:
        if offsets is None:
            positions = self.positions()
            keep = self._owned if only is None else set(only) & self._owned
            offsets = {tp: o for tp, o in positions.items() if tp in keep}
        changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        if changed:
            self._store.commit(changed)
            self._committed.update(changed)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offsets of ``partitions`` (the larger of the stores' with dual commit)."""
        return self._store.fetch(partitions)

    # ------------------------------------------------------------------------------ membership

    def _record(self, event: str, tp: TopicPartition) -> None:
        entry = (time.monotonic(), event, tp)
        self.history.append(entry)
        if self._on_ownership is not None:
            self._on_ownership(entry)

    def _watch(self, _event: object = None) -> None:
        self._changed.set()

    def _on_poll(self) -> None:
        if self._session_lost.is_set():
            self._lose_everything()
        if self._registration is not None and self._changed.is_set():
            try:
                self._rebalance()
            except KazooException as error:  # connection loss: try again at the next poll
                log.warning("rebalance of %s interrupted: %s", self.consumer_id, error)
                self._changed.set()
        gc = self.group_config
        if gc.auto_commit_enable and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + gc.auto_commit_interval_ms / 1000.0
            try:
                self._commit()
            except KazooException as error:  # session expired or connection lost: at the next interval
                log.warning("auto commit of group %s failed: %r", self.group_id, error)

    def _lose_everything(self) -> None:
        """The session expired: our owner znodes are gone; stop reading everything we held."""
        self._session_lost.clear()
        self._set_assignment([])
        for tp in sorted(self._owned):
            self._record("lost", tp)
        self._owned.clear()
        self._committed.clear()
        self._changed.set()

    def _subscribed_topics(self) -> dict[str, list[int]]:
        registration = self._registration
        assert registration is not None
        if registration.topic_filter:
            exclude = self.group_config.exclude_internal_topics
            names = [
                t
                for t in self._zk.topic_names(watch=self._watch)
                if registration.streams(t, exclude_internal=exclude)
            ]
        else:
            names = list(registration.subscription)
        topics = {t: self._zk.partitions(t, watch=self._watch) for t in names}
        if not registration.topic_filter and not all(topics.values()):
            self._zk.topic_names(watch=self._watch)  # a subscribed topic that does not exist yet
        return topics

    def _rebalance(self) -> None:
        gc = self.group_config
        for attempt in range(gc.rebalance_max_retries + 1):
            self._changed.clear()
            consumers = self._zk.consumers(self.group_id, watch=self._watch)
            if self.consumer_id not in consumers:  # a new session: register again
                assert self._registration is not None
                self._zk.register(self.group_id, self.consumer_id, self._registration)
                consumers = self._zk.consumers(self.group_id, watch=self._watch)
            self._zk.broker_ids(watch=self._watch)
            desired = plan_assignment(self.consumer_id, consumers, self._subscribed_topics())
            self._release(self._owned - desired)
            claimed = False
            for tp in sorted(desired - self._owned):
                if self._zk.claim(self.group_id, tp.topic, tp.partition, self.consumer_id):
                    self._owned.add(tp)
                    self._record("claimed", tp)
                    claimed = True
            if claimed:
                self._set_assignment(sorted(self._owned))
            if self._owned == desired:
                if not self._changed.is_set():
                    log.info("%s owns %s", self.consumer_id, sorted(self._owned))
                    return
                continue  # something changed meanwhile: plan again at once
            log.info(
                "%s: rebalance attempt %d: %s still owned by others",
                self.consumer_id,
                attempt + 1,
                sorted(desired - self._owned),
            )
            self._changed.wait(gc.rebalance_backoff_ms / 1000.0)
        self._changed.set()
        raise ZkRebalanceError(
            f"consumer {self.consumer_id} of group {self.group_id!r} could not claim its partitions "
            f"after {gc.rebalance_max_retries + 1} attempts (rebalance.max.retries)"
        )

    def _release(self, partitions: Iterable[TopicPartition]) -> None:
        """Commit, stop fetching, then delete the owner znodes of ``partitions``."""
        going = sorted(set(partitions) & self._owned)
        if not going:
            return
        try:
            self._commit(only=going)
        except KafkaError as error:
            log.warning("commit before releasing %s failed: %s", going, error)
        self._owned.difference_update(going)
        self._set_assignment(sorted(self._owned))
        for tp in going:
            self._committed.pop(tp, None)
            self._record("released", tp)
            self._zk.release(self.group_id, tp.topic, tp.partition, self.consumer_id)

    def _on_close(self) -> None:
        try:
            if self.group_config.auto_commit_enable and not self._session_lost.is_set():
                self._commit()
        finally:
            try:
                if not self._session_lost.is_set():
                    self._release(self._owned)
                self._zk.unregister(self.group_id, self.consumer_id)
            except KazooException as error:
                log.warning("leaving group %s: %s", self.group_id, error)
            finally:
                self._zk.close()
