"""Znode reads kept true by watches: the ZooKeeper registry's cache of partition states and topic
records (issue 28).

A broker's metadata refresh reads every partition state of the cluster; a controller writing a few
hundred states makes every broker refresh a few times, each reading thousands of znodes. Every
partition state znode already carries a watch (kctl.zk.zookeeper_watches) that fires on its next
change, so a state read after its watch was set stays true until that watch fires: such reads are
kept here, and a refresh re-reads only the states whose watch fired since (or that were never read
under a watch). Topic records (the topic znode with its config overrides) are kept the same way
under the topic znode's watch; their configs change without touching the topic znode, so a config
change notification (/config/changes) re-arms every topic key (`rearm_all`).

The rules that make a kept read true, on one ZooKeeper session (which orders its requests):

- a key becomes *armed*, with a fresh generation number, only when the request that set its watch
  has succeeded; a read of the key issued after that is ordered after the watch on the server, so
  any later change fires it;
- when its watch fires (or the connection is lost, which loses every watch), the key is disarmed
  at once, before anyone is told of the change: reads issued from then on are not kept until the
  watch is set again;
- a read is kept only if the key is still armed with the generation it had when the read was
  issued (a change in between makes its result unkeepable, whatever it returned).

A registry's own writes need nothing more: a write fires the watches on what it changed, ZooKeeper
sends those events before the write's answer, and every read of kept keys first runs the callbacks
of the events received so far (``ZooKeeperSession.settle_watches``), so the written keys are read
anew and every other kept read stays kept (a controller writing a few states does not make its
broker read the whole cluster again).

Generations come from one counter, so a read issued before a disarm can never match a later arm.
Thread-safe: the watches run on kazoo's threads, the reads on the broker's."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["WatchedReads"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class WatchedReads(Generic[K, V]):
    """Values of watched keys, each valid while the watch set before its read has not fired."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations = itertools.count(1)
        self._armed: dict[K, int] = {}
        self._values: dict[K, tuple[int, V]] = {}

    def armed(self, key: K) -> None:
        """``key``'s watch is set (its request succeeded): reads issued from now on may be kept."""
        with self._lock:
            self._armed[key] = next(self._generations)
            self._values.pop(key, None)

    def disarm(self, key: K) -> None:
        """``key``'s watch fired, or is no longer wanted: forget its value, keep no read until armed."""
        with self._lock:
            self._armed.pop(key, None)
            self._values.pop(key, None)

    def disarm_all(self, keys: Iterable[K] | None = None) -> None:
        """Disarm ``keys`` (every key if None: the connection and its watches are gone)."""
        with self._lock:
            if keys is None:
                self._armed.clear()
                self._values.clear()
                return
            for key in keys:
                self._armed.pop(key, None)
                self._values.pop(key, None)

    def rearm_all(self) -> None:
        """Forget every kept value, and keep only reads issued from now on (the keys' watches are
        still set: something they do not cover changed, e.g. a config change notification)."""
        with self._lock:
            for key in self._armed:
                self._armed[key] = next(self._generations)
            self._values.clear()

    def lookup(self, keys: Iterable[K]) -> tuple[dict[K, V], list[tuple[K, int | None]]]:
        """The kept values of ``keys`` (hits), and the others with the generation to store their
        read under (None: not armed, the read will not be kept)."""
        hits: dict[K, V] = {}
        misses: list[tuple[K, int | None]] = []
        with self._lock:
            armed, values = self._armed, self._values
            for key in keys:
                generation = armed.get(key)
                entry = values.get(key)
                if entry is not None and entry[0] == generation:
                    hits[key] = entry[1]
                else:
                    misses.append((key, generation))
        return hits, misses

    def keep(self, key: K, generation: int | None, value: V) -> None:
        """Keep a read of ``key`` issued under ``generation``, if the key is still armed with it."""
        if generation is None:
            return
        with self._lock:
            if self._armed.get(key) == generation:
                self._values[key] = (generation, value)

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
