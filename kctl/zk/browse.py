"""Reading Kafka's ZooKeeper layout for people: list, get and walk znodes, and the brokers, topics
and ZooKeeper-mode consumer groups decoded into rows (what ``kctl zk`` prints). Read-only: nothing
here writes to ZooKeeper.

A znode's data is shown decoded: a JSON value when it is JSON (Kafka's znodes mostly are), else
text when it is UTF-8, else ``{"base64": ...}``.
"""

from __future__ import annotations

import base64
import json
import posixpath
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from kctl.zk.consumer_registry import ConsumerRegistry
from kctl.zk.model import RegistryError, encode_uuid
from kctl.zk.znodes import BrokerIdZNode, ControllerZNode, TopicPartitionStateZNode, TopicZNode

__all__ = ["NoSuchZNodeError", "ZkBrowser", "decode_data"]


class NoSuchZNodeError(RegistryError):
    """The path names no znode."""


def decode_data(data: bytes | None) -> Any:
    """A znode's data for display: JSON value, text, or {"base64": ...}; None when empty."""
    if not data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _stat(path: str, stat: ZnodeStat) -> dict[str, Any]:
    return {
        "path": path,
        "version": stat.version,
        "ephemeral_owner": f"0x{stat.ephemeralOwner:x}" if stat.ephemeralOwner else None,
        "children": stat.numChildren,
        "data_length": stat.dataLength,
        "ctime_ms": stat.ctime,
        "mtime_ms": stat.mtime,
    }


class ZkBrowser:
    """Read-only views of the znodes of ``registry``'s session."""

    def __init__(self, registry: ConsumerRegistry) -> None:
        self.registry = registry
        self.zk: KazooClient = registry.kazoo_client

    @staticmethod
    def normalize(path: str) -> str:
        return posixpath.normpath("/" + path.strip().lstrip("/")) if path.strip() not in ("", "/") else "/"

    def _get(self, path: str) -> tuple[bytes, ZnodeStat]:
        try:
            return self.zk.get(path)
        except NoNodeError:
            raise NoSuchZNodeError(f"no znode {path}") from None

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            raise NoSuchZNodeError(f"no znode {path}") from None

    def ls(self, path: str) -> list[dict[str, Any]]:
        """The children of ``path``: name, path, their children count, ephemeral or not, data size."""
        path = self.normalize(path)
        rows = []
        for name in self._children(path):
            child = posixpath.join(path, name)
            stat = self.zk.exists(child)
            if stat is None:
                continue  # gone meanwhile
            rows.append({"name": name, **_stat(child, stat)})
        return rows

    def get(self, path: str) -> dict[str, Any]:
        """One znode: its decoded data and its stat."""
        path = self.normalize(path)
        data, stat = self._get(path)
        return {**_stat(path, stat), "data": decode_data(data)}

    def tree(self, path: str, max_depth: int | None = None) -> list[dict[str, Any]]:
        """``path`` and every znode below it, depth first, each with its depth and decoded data."""
        root = self.normalize(path)
        self._get(root)
        return list(self._walk(root, 0, max_depth))

    def _walk(self, path: str, depth: int, max_depth: int | None) -> Iterator[dict[str, Any]]:
        try:
            data, stat = self.zk.get(path)
            children = sorted(self.zk.get_children(path))
        except NoNodeError:
            return
        yield {"depth": depth, **_stat(path, stat), "data": decode_data(data)}
        if max_depth is not None and depth >= max_depth:
            return
        for name in children:
            yield from self._walk(posixpath.join(path, name), depth + 1, max_depth)

    # -- Kafka's layout, decoded -------------------------------------------------------------------
    def brokers(self) -> list[dict[str, Any]]:
        try:
            controller = ControllerZNode.decode(self.zk.get(ControllerZNode.path)[0])
        except (NoNodeError, RegistryError):
            controller = None
        rows = []
        for broker_id in self.registry.broker_ids():
            try:
                data, stat = self.zk.get(BrokerIdZNode.path(broker_id))
                broker = BrokerIdZNode.decode(broker_id, data)
            except NoNodeError:
                continue
            rows.append(
                {
                    "broker_id": broker_id,
                    "host": broker.host,
                    "port": broker.port,
                    "rack": broker.rack,
                    "endpoints": list(broker.listeners),
                    "controller": broker_id == controller,
                    "session": f"0x{stat.ephemeralOwner:x}",
                }
            )
        return rows

    def topics(self) -> list[dict[str, Any]]:
        rows = []
        for topic in self.registry.topic_names():
            try:
                topic_id, assignment = TopicZNode.decode(topic, self.zk.get(TopicZNode.path(topic))[0])
            except NoNodeError:
                continue
            partitions = []
            for partition, replicas in assignment.items():
                try:
                    data, stat = self.zk.get(TopicPartitionStateZNode.path(topic, partition))
                    state = TopicPartitionStateZNode.decode(topic, partition, data, stat.version)
                    leader, isr = state.leader, list(state.isr)
                except NoNodeError:
                    leader, isr = None, []
                partitions.append(
                    {"partition": partition, "replicas": list(replicas), "leader": leader, "isr": isr}
                )
            rows.append(
                {
                    "topic": topic,
                    "topic_id": encode_uuid(topic_id) if topic_id is not None else None,
                    "partition_count": len(assignment),
                    "replication_factor": max((len(r) for r in assignment.values()), default=0),
                    "partitions": partitions,
                }
            )
        return rows

    def consumers(self) -> list[dict[str, Any]]:
        """Each ZooKeeper-mode group: its consumers (id, subscription, owned partitions) and offsets."""
        rows = []
        for group in self.registry.groups():
            owners = self.registry.owners(group)
            consumers = [
                {
                    "consumer_id": consumer_id,
                    "pattern": registration.pattern,
                    "subscription": dict(registration.subscription),
                    "owns": [f"{t}-{p}" for (t, p), who in owners.items() if who == consumer_id],
                }
                for consumer_id, registration in self.registry.consumers(group).items()
            ]
            offsets = self.registry.committed_offsets(group)
            rows.append(
                {
                    "group": group,
                    "consumer_count": len(consumers),
                    "owned_partitions": len(owners),
                    "committed_partitions": len(offsets),
                    "consumers": consumers,
                    "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()],
                }
            )
        return rows
