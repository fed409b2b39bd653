"""Producer partitioners (seed 001): the default (murmur2 of the key, exactly as the Java client, so a
key lands where Kafka would put it; sticky partitioning for records without a key), round-robin,
random, and a custom partitioner loaded by import path (``partitioner.class``)."""

from __future__ import annotations

import importlib
import itertools
import random
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    tail_start = length & ~3
    for i in range(0, tail_start, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    remaining = length & 3
    if remaining == 3:
        h ^= data[tail_start + 2] << 16
    if remaining >= 2:
        h ^= data[tail_start + 1] << 8
    if remaining >= 1:
        h ^= data[tail_start]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``: toPositive(murmur2) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Partitioner(Protocol):
    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        """Choose a partition of ``topic`` (``partitions`` all, ``available`` those with a leader)."""
        ...

    def on_new_batch(self, topic: str, previous_partition: int) -> None:
        """Called when a batch for ``previous_partition`` was closed (sticky partitioners switch)."""
        ...


class DefaultPartitioner:
    """murmur2 of the key; without a key, stick to one partition until its batch is sent."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        if key is not None:
            return partitions[murmur2_partition(key, len(partitions))]
        with self._lock:
            chosen = self._sticky.get(topic)
            if chosen is None or chosen not in partitions:
                pool = available or partitions
                chosen = self._sticky[topic] = random.choice(pool)
            return chosen

    def on_new_batch(self, topic: str, previous_partition: int) -> None:
        with self._lock:
            if self._sticky.get(topic) == previous_partition:
                del self._sticky[topic]


class RoundRobinPartitioner:
    """Each record to the next available partition, keys ignored."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        pool = available or partitions
        with self._lock:
            counter = self._counters.setdefault(topic, itertools.count())
            return pool[next(counter) % len(pool)]

    def on_new_batch(self, topic: str, previous_partition: int) -> None:
        pass


class RandomPartitioner:
    """Each record to a random available partition."""

    def partition(
        self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        return random.choice(available or partitions)

    def on_new_batch(self, topic: str, previous_partition: int) -> None:
        pass


class Murmur2Partitioner(DefaultPartitioner):
    """Alias of the default (librdkafka's ``murmur2_random``: murmur2 for keys, random-ish without)."""


BUILTIN_PARTITIONERS: dict[str, Callable[[], Partitioner]] = {
    "default": DefaultPartitioner,
    "murmur2": Murmur2Partitioner,
    "murmur2_random": Murmur2Partitioner,
    "sticky": DefaultPartitioner,
    "round_robin": RoundRobinPartitioner,
    "roundrobin": RoundRobinPartitioner,
    "random": RandomPartitioner,
}


def load_partitioner(name: str | None) -> Partitioner:
    """A partitioner by built-in name, or ``module:Class`` / ``module.Class`` import path of a class
    (instantiated without arguments) implementing ``partition`` (and optionally ``on_new_batch``)."""
    if not name or name in BUILTIN_PARTITIONERS:
        return BUILTIN_PARTITIONERS[name or "default"]()
    module_name, _, attribute = name.replace(":", ".").rpartition(".")
    if not module_name:
        raise ValueError(
            f"unknown partitioner {name!r}: use one of {sorted(BUILTIN_PARTITIONERS)} or module.Class"
        )
    try:
        cls = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot load partitioner {name!r}: {error}") from None
    instance = cls()
    if not hasattr(instance, "partition"):
        raise ValueError(f"partitioner {name!r} has no partition() method")
    if not hasattr(instance, "on_new_batch"):
        instance.on_new_batch = lambda topic, previous: None
    return instance
