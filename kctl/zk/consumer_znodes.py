"""The ZooKeeper consumers' registry (seed 003, "ZooKeeper Directories"): one definition per znode
(its path, and how its data is encoded and decoded), as Kafka's old high-level consumer writes them.

This module owns the bytes of ``/consumers``; nothing here talks to ZooKeeper
(kctl.zk.consumer_registry does).

::

    /consumers/<group>/ids/<consumer_id>            (ephemeral)  {"version":1,"subscription":{"orders":1},
                                                                  "pattern":"static","timestamp":"<ms>"}
    /consumers/<group>/owners/<topic>/<partition>   (ephemeral)  <consumer_id>
    /consumers/<group>/offsets/<topic>/<partition>  (persistent) <next offset, decimal>

``pattern`` is ``static`` (the subscription names topics), ``white_list`` or ``black_list`` (its
one key is a regular expression over topic names).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping

from kctl.zk.model import RegistryError

__all__ = [
    "PATTERNS",
    "ConsumerGroupZNode",
    "ConsumerIdZNode",
    "ConsumerIdsZNode",
    "ConsumerOffsetZNode",
    "ConsumerOffsetsZNode",
    "ConsumerOwnerZNode",
    "ConsumerOwnersZNode",
    "ConsumerRegistration",
    "ConsumerZNodeDecodeError",
    "ConsumersZNode",
]

STATIC = "static"
WHITE_LIST = "white_list"
BLACK_LIST = "black_list"
PATTERNS = (STATIC, WHITE_LIST, BLACK_LIST)
"""The subscription kinds a consumer registration names."""


class ConsumerZNodeDecodeError(RegistryError):
    """A consumers' znode whose data is not in the format Kafka writes."""


@dataclasses.dataclass(frozen=True)
class ConsumerRegistration:
    """A consumer's registration: topic (or, for a topic filter, the regex) -> stream count, the
    pattern kind, and when it registered (epoch ms)."""

    subscription: Mapping[str, int]
    pattern: str = STATIC
    timestamp_ms: int = 0

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        if self.pattern != STATIC and len(self.subscription) != 1:
            raise ValueError("a topic filter subscription has exactly one regex")

    def streams(self, topic: str, *, exclude_internal: bool = True) -> int:
        """How many streams this consumer reads ``topic`` with (0: it does not subscribe to it)."""
        if self.pattern == STATIC:
            return int(self.subscription.get(topic, 0))
        [(regex, count)] = self.subscription.items()
        if exclude_internal and topic.startswith("__"):
            return 0
        matched = re.fullmatch(regex, topic) is not None
        return int(count) if matched == (self.pattern == WHITE_LIST) else 0

    @property
    def topic_filter(self) -> bool:
        return self.pattern != STATIC


class ConsumersZNode:
    """``/consumers``: one child per group."""

    path = "/consumers"


class ConsumerGroupZNode:
    """``/consumers/<group>``."""

    @staticmethod
    def path(group: str) -> str:
        return f"{ConsumersZNode.path}/{group}"


class ConsumerIdsZNode:
    """``/consumers/<group>/ids``: one ephemeral child per live consumer."""

    @staticmethod
    def path(group: str) -> str:
        return f"{ConsumerGroupZNode.path(group)}/ids"


class ConsumerIdZNode:
    """``/consumers/<group>/ids/<consumer_id>`` (ephemeral): the consumer's subscription."""

    VERSION = 1

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"{ConsumerIdsZNode.path(group)}/{consumer_id}"

    @staticmethod
    def encode(registration: ConsumerRegistration) -> bytes:
        timestamp = registration.timestamp_ms or int(time.time() * 1000)
        value = {
            "version": ConsumerIdZNode.VERSION,
            "subscription": {k: int(v) for k, v in registration.subscription.items()},
            "pattern": registration.pattern,
            "timestamp": str(timestamp),
        }
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, group: str, consumer_id: str, data: bytes | None) -> ConsumerRegistration:
        path = cls.path(group, consumer_id)
        try:
            obj = json.loads((data or b"").decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConsumerZNodeDecodeError(f"{path}: not JSON: {error}") from None
        if not isinstance(obj, dict):
            raise ConsumerZNodeDecodeError(f"{path}: not a JSON object")
        subscription = obj.get("subscription")
        if not isinstance(subscription, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in subscription.values()
        ):
            raise ConsumerZNodeDecodeError(f"{path}: bad subscription {subscription!r}")
        pattern = obj.get("pattern", STATIC)
        try:
            timestamp = int(obj.get("timestamp", 0))
        except (TypeError, ValueError):
            raise ConsumerZNodeDecodeError(f"{path}: bad timestamp {obj.get('timestamp')!r}") from None
        try:
            return ConsumerRegistration(dict(subscription), pattern, timestamp)
        except ValueError as error:
            raise ConsumerZNodeDecodeError(f"{path}: {error}") from None


class ConsumerOwnersZNode:
    """``/consumers/<group>/owners`` and ``.../owners/<topic>``."""

    @staticmethod
    def path(group: str, topic: str | None = None) -> str:
        base = f"{ConsumerGroupZNode.path(group)}/owners"
        return base if topic is None else f"{base}/{topic}"


class ConsumerOwnerZNode:
    """``/consumers/<group>/owners/<topic>/<partition>`` (ephemeral): the owning consumer's id."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOwnersZNode.path(group, topic)}/{partition}"

    @staticmethod
    def encode(consumer_id: str) -> bytes:
        return consumer_id.encode("utf-8")

    @staticmethod
    def decode(data: bytes | None) -> str:
        return (data or b"").decode("utf-8", errors="replace")


class ConsumerOffsetsZNode:
    """``/consumers/<group>/offsets`` and ``.../offsets/<topic>``."""

    @staticmethod
    def path(group: str, topic: str | None = None) -> str:
        base = f"{ConsumerGroupZNode.path(group)}/offsets"
        return base if topic is None else f"{base}/{topic}"


class ConsumerOffsetZNode:
    """``/consumers/<group>/offsets/<topic>/<partition>`` (persistent): the next offset to read."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOffsetsZNode.path(group, topic)}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(int(offset)).encode("ascii")

    @classmethod
    def decode(cls, group: str, topic: str, partition: int, data: bytes | None) -> int:
        text = (data or b"").decode("ascii", errors="replace").strip()
        try:
            return int(text)
        except ValueError:
            raise ConsumerZNodeDecodeError(
                f"{cls.path(group, topic, partition)}: not a decimal offset: {text!r}"
            ) from None
