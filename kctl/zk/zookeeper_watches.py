"""The ZooKeeper registry's watches: how changes made by other processes become listener
notifications (kctl.zk.registry's reasons), on the registry's shared session
(kctl.zk.zookeeper_session).

- kazoo's watch recipes on the children of /brokers/ids ("brokers") and /brokers/topics ("topics"),
  the data of /controller ("controller"), the children of /config/changes ("configs": Kafka's
  config change notifications), the admin znodes and the controlled shutdown requests ("admin");
- plain one-shot ZooKeeper watches on the many topic znodes ("topics": partitions added) and
  partition state znodes ("partitions"), set again after each event and, all at once, after a
  reconnection (kazoo drops them with the connection): no thread or blocking call per znode.

Setting a watch is not a change: only later events are announced — except the partition states of a
topic or partitions added while running, which are announced when already there as their watches are
set (written between the refresh the topic's event caused and the watch: no event would tell of it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.recipe.watchers import ChildrenWatch

from kctl.zk.registry import ADMIN, BROKERS, CONFIGS, CONTROLLER, PARTITIONS, TOPICS
from kctl.zk.znodes import (
    BrokerIdsZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ControlledShutdownZNode,
    ControllerZNode,
    ElectLeadersZNode,
    LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
    UncleanRestartZNode,
    UnreachableLeadersZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_session import ZooKeeperPart, ZooKeeperSession, collect

__all__ = ["ZNodeWatch", "ZooKeeperWatches"]

log = logging.getLogger("kctl.zk.zookeeper")

_UNREAD = object()
_CREATED = object()  # an event said the znode exists (its mzxid is not in the event)


class ZNodeWatch:
    """A watch on one znode that may come and go (/controller, the admin request znodes): every
    event on it is announced with ``reason``.

    kazoo's DataWatch re-reads the znode when its watch fires and calls back only when the version
    read differs from the last one: a znode created and deleted before that re-read (a controller
    elected and gone at once, while this session's callback thread was busy) is never announced,
    and then no broker would run for controller. Here the event itself is announced and the watch
    set again; the re-read that sets it is checked against what the event said, for ZooKeeper may
    answer it after another session's change (sessions are not ordered with each other), so a znode
    "created" but gone at the re-read, or "deleted" but there again, is announced once more. After a
    reconnection (ZooKeeper forgets a connection's watches) ``arm`` sets it again and announces a
    znode that changed meanwhile."""

    def __init__(self, session: ZooKeeperSession, path: str, reason: str) -> None:
        self._session = session
        self.path = path
        self.reason = reason
        self._lock = threading.Lock()
        self._mzxid: object = _UNREAD  # of the znode as last read; None when it did not exist

    def arm(self, *, announce_change: bool = False) -> Any:
        """Set the watch (an ``exists`` with it); with ``announce_change``, announce the znode if it
        differs from when last read. Returns kazoo's async result (None when closed)."""
        client = self._session.current
        if client is None or self._session.closed:
            return None
        result = client.exists_async(self.path, watch=self._on_event)
        result.rawlink(lambda done: self._on_read(done, announce_change))
        return result

    def _on_read(self, result: Any, announce_change: bool) -> None:
        if self._session.closed or not result.successful():
            return  # a connection error: the reconnection sets the watch again
        stat = result.value
        mzxid = None if stat is None else stat.mzxid
        with self._lock:
            if self._mzxid is _CREATED:
                changed = mzxid is None
            else:
                changed = self._mzxid is not _UNREAD and mzxid != self._mzxid
            self._mzxid = mzxid
        if changed and announce_change:
            self._session.notify(self.reason)

    def _on_event(self, event: WatchedEvent) -> None:
        if self._session.closed or event.type == EventType.NONE:
            return  # NONE: the connection or session went; the reconnection sets the watch again
        with self._lock:
            self._mzxid = None if event.type == EventType.DELETED else _CREATED
        self.arm(announce_change=True)
        self._session.notify(self.reason)


class ZooKeeperWatches(ZooKeeperPart):
    """The watches of one registry's session."""

    def __init__(self, session: ZooKeeperSession) -> None:
        super().__init__(session)
        self._lock = threading.RLock()  # never held across a ZooKeeper call
        # topic (or topic partition) -> (generation token, its one-shot watch function)
        self._topic_watches: dict[str, tuple[object, Callable[[WatchedEvent], None]]] = {}
        self._state_watches: dict[tuple[str, int], tuple[object, Callable[[WatchedEvent], None]]] = {}
        self._watches: list[object] = []
        self._znode_watches: list[ZNodeWatch] = []
        self._topics_watched = False
        self._config_changes_watched = False
        self._last_config_change = -1

    def clear(self) -> None:
        """Forget every watch (the registry is closing)."""
        with self._lock:
            self._topic_watches.clear()
            self._state_watches.clear()
            self._watches.clear()
            self._znode_watches.clear()
        self._session.watched_states.disarm_all()
        self._session.watched_topics.disarm_all()

    def arm_again(self) -> None:
        """After a reconnection: set the topic and partition-state watches again (kazoo dropped them
        with the connection). Raises RegistryError when ZooKeeper is gone again."""
        with self._lock:
            topics = list(self._topic_watches)
            keys = list(self._state_watches)
            znode_watches = list(self._znode_watches)
        with self._zk("watch the controller and the admin znodes"):
            collect([watch.arm(announce_change=True) for watch in znode_watches], self._op_timeout)
        self._arm_now(topics, keys)

    def start(self) -> None:
        """Set every watch (at the registry's start); no change after this returns goes unnoticed."""
        client = self._zk_client()
        znode_watches = [
            ZNodeWatch(self._session, ControllerZNode.path, CONTROLLER),
            ZNodeWatch(self._session, ReassignPartitionsZNode.path, ADMIN),
            ZNodeWatch(self._session, PreferredReplicaElectionZNode.path, ADMIN),
            ZNodeWatch(self._session, ElectLeadersZNode.path, ADMIN),
        ]
        watches: list[object] = [
            ChildrenWatch(client, BrokerIdsZNode.path, self._children_watcher(BROKERS)),
            ChildrenWatch(client, TopicsZNode.path, self._on_topics),
            ChildrenWatch(client, ConfigEntityChangeNotificationZNode.path, self._on_config_changes),
            ChildrenWatch(client, ControlledShutdownZNode.path, self._children_watcher(ADMIN)),
            ChildrenWatch(client, UncleanRestartZNode.path, self._children_watcher(ADMIN)),
            ChildrenWatch(client, LogDirEventNotificationZNode.path, self._children_watcher(ADMIN)),
            ChildrenWatch(client, UnreachableLeadersZNode.path, self._children_watcher(ADMIN)),
        ]
        with self._zk("watch the controller and the admin znodes"):
            collect([watch.arm() for watch in znode_watches], self._op_timeout)
        with self._lock:
            self._watches = watches
            self._znode_watches = znode_watches
            topics = list(self._topic_watches)
        self._arm_now(topics, [])

    def _children_watcher(self, reason: str) -> Callable[[list[str]], bool | None]:
        first = [True]

        def watcher(children: list[str]) -> bool | None:
            if self._session.closed:
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
        if self._session.current is None:
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
            keys = [k for k in self._state_watches if k[0] == topic]
            for key in keys:
                del self._state_watches[key]
        self._session.watched_states.disarm_all(keys)
        self._session.watched_topics.disarm(topic)

    def _topic_watcher(self, topic: str, token: object) -> Callable[[WatchedEvent], None]:
        """The one-shot watch on /brokers/topics/<topic> (partitions added)."""

        def watcher(event: WatchedEvent) -> None:
            self._session.watched_topics.disarm(topic)  # whatever the event: no kept read is sure now
            entry = self._topic_watches.get(topic)
            if self._session.closed or entry is None or entry[0] is not token or event.type == EventType.NONE:
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
            self._session.watched_states.disarm(key)  # whatever the event: no kept read is sure now
            entry = self._state_watches.get(key)
            if self._session.closed or entry is None or entry[0] is not token or event.type == EventType.NONE:
                return
            self._arm_state(key)
            self._notify(PARTITIONS)

        return watcher

    def _arm_topic(self, topic: str, *, follow: bool = True) -> Any:
        """Read /brokers/topics/<topic> with a watch; with ``follow``, its partitions' states get
        watched when the data arrives (else the caller does it). Returns kazoo's async result (None
        if there is nothing to watch)."""
        client = self._session.current
        with self._lock:
            entry = self._topic_watches.get(topic)
        if client is None or entry is None:
            return None
        token, watcher = entry
        result = client.get_async(TopicZNode.path(topic), watch=watcher)
        result.rawlink(lambda done: self._on_topic_armed(topic, token, done))
        if follow:
            result.rawlink(lambda done: self._on_topic_data(topic, token, done, announce=True))
        return result

    def _arm_state(self, key: tuple[str, int]) -> Any:
        """Set the watch of partition state ``key``; once ZooKeeper has it, reads of the state may be
        kept (kctl.zk.watched_reads). Returns kazoo's async result (None if nothing to watch)."""
        client = self._session.current
        with self._lock:
            entry = self._state_watches.get(key)
        if client is None or entry is None:
            return None
        token = entry[0]
        result = client.exists_async(TopicPartitionStateZNode.path(*key), watch=entry[1])
        result.rawlink(lambda done: self._on_state_armed(key, token, done))
        return result

    def _on_topic_armed(self, topic: str, token: object, result: Any) -> None:
        if self._session.closed or not result.successful():
            return
        with self._lock:  # still this generation's watch
            entry = self._topic_watches.get(topic)
            current = entry is not None and entry[0] is token
        if current:
            self._session.watched_topics.armed(topic)

    def _on_state_armed(self, key: tuple[str, int], token: object, result: Any) -> None:
        if self._session.closed or not result.successful():
            return
        with self._lock:  # still this generation's watch (not a topic deleted and created again)
            entry = self._state_watches.get(key)
            current = entry is not None and entry[0] is token
        if current:
            self._session.watched_states.armed(key)

    def _on_topic_data(self, topic: str, token: object, result: Any, *, announce: bool = False) -> list[Any]:
        """A topic znode was read: watch the states of partitions not watched yet. Returns the
        async results of the new watches (for _arm_now to wait for). With ``announce`` (a topic or
        partitions added while running): a state found already there when its watch is set is
        announced ("partitions"), for the controller may have written it after the refresh that the
        topic's event caused had read the states, and before the watch was set — no event would
        ever tell of it, and the broker would answer that partition leaderless until the next
        change."""
        if self._session.closed:
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
        armed = [r for r in (self._arm_state(key) for key in new) if r is not None]
        if announce:
            for armed_result in armed:
                armed_result.rawlink(self._announce_if_exists)
        return armed

    def _announce_if_exists(self, result: Any) -> None:
        if not self._session.closed and result.successful() and result.value is not None:
            self._notify(PARTITIONS)

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
        if self._session.closed:
            return False
        numbers = [ConfigEntityChangeNotificationSequenceZNode.sequence_number(c) for c in children]
        newest = max((n for n in numbers if n is not None), default=-1)
        with self._lock:
            first, self._config_changes_watched = not self._config_changes_watched, True
            changed = newest > self._last_config_change
            self._last_config_change = max(newest, self._last_config_change)
        if changed and not first:
            self._session.watched_topics.rearm_all()  # a topic's config overrides may have changed
            self._notify(CONFIGS)
        return None
