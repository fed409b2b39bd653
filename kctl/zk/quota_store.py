"""Where client quotas live: in Kafka's ZooKeeper layout in cluster mode, and in one JSON file under
the data directory otherwise; the registry offers the one of its backend (``Registry.quota_store``).

An entity is a user, a client id, or a user and a client id; either name may be the default
(``None`` here, ``<default>`` in ZooKeeper). Names are sanitized as Kafka sanitizes them (URL
encoding, so ``User:CN=a,O=b`` and client ids with ``/`` make valid znode names).

ZooKeeper (what Kafka's brokers and ``kafka-configs.sh`` read and write; the bytes are
kctl.zk.znodes': ConfigEntityZNode and its change notifications):

- ``/config/users/<user>`` ``{"version":1,"config":{"producer_byte_rate":"1024"}}`` — the same znode
  holds the user's SCRAM credentials (kctl.zk.security_store), which quota writes leave alone;
- ``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>``, likewise;
- a ``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":"users/<user>"}``
  (``clients/<c>``, ``users/<u>/clients/<c>``) after each change; brokers watch those.

Embedded: ``<data dir>/client-quotas.json`` ``{"version":1,"quotas":{"<entity path>":{key: value}}}``
with the same entity paths, rewritten atomically.

Neither store knows what a quota means (kctl.broker.quotas does)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kctl.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ZNodeDecodeError,
)

if TYPE_CHECKING:  # kazoo is only loaded by the ZooKeeper registry
    from kazoo.client import KazooClient
    from kazoo.protocol.states import ZnodeStat

    from kctl.zk.zookeeper_session import ZooKeeperSession

USER = "user"
CLIENT_ID = "client-id"
DEFAULT_NAME = "<default>"
QUOTAS_FILE_NAME = "client-quotas.json"

#: (user, client id): None is "not part of the entity"; DEFAULT_NAME is the entity's default
QuotaEntity = tuple[str | None, str | None]
QuotaValues = dict[str, float]
#: key -> new value, or None to remove the key
QuotaOps = Mapping[str, float | None]

#: the quota keys and whether their value is a whole number (Kafka stores those as longs)
QUOTA_KEYS: dict[str, bool] = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL encoding with ``*`` as ``%2A`` and spaces as ``%20``."""
    return urllib.parse.quote(name, safe="-_.~").replace("+", "%20")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def entity_path(entity: QuotaEntity) -> str:
    """``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>`` (sanitized; ``<default>`` as is)."""
    user, client = entity

    def part(name: str) -> str:
        return name if name == DEFAULT_NAME else sanitize(name)

    if user is not None and client is not None:
        return f"users/{part(user)}/clients/{part(client)}"
    if user is not None:
        return f"users/{part(user)}"
    if client is not None:
        return f"clients/{part(client)}"
    raise ValueError("a quota entity names a user, a client id or both")


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The inverse of ``entity_path``; None for a path that is not a quota entity's."""

    def name(part: str) -> str:
        return part if part == DEFAULT_NAME else desanitize(part)

    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "users":
        return name(parts[1]), None
    if len(parts) == 2 and parts[0] == "clients":
        return None, name(parts[1])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return name(parts[1]), name(parts[3])
    return None


def _apply(config: dict[str, Any], ops: QuotaOps) -> dict[str, Any]:
    out = dict(config)
    for key, value in ops.items():
        if value is None:
            out.pop(key, None)
        elif QUOTA_KEYS.get(key, False):
            out[key] = str(int(value))
        else:
            out[key] = repr(float(value))
    return out


def _quota_values(config: Mapping[str, Any]) -> QuotaValues:
    out: QuotaValues = {}
    for key, value in config.items():
        if key in QUOTA_KEYS:
            with contextlib.suppress(TypeError, ValueError):
                out[key] = float(value)
    return out


class QuotaStore(Protocol):
    """Client quotas (``Registry.quota_store``): a FileQuotaStore or a ZooKeeperQuotaStore."""

    def all_quotas(self) -> dict[QuotaEntity, QuotaValues]: ...
    def alter(self, entity: QuotaEntity, ops: QuotaOps) -> None: ...
    def watch(self, callback: Callable[[], None]) -> None: ...
    def close(self) -> None: ...


class FileQuotaStore:
    """The embedded store: ``<metadata_dir>/client-quotas.json``; thread-safe."""

    def __init__(self, metadata_dir: Path) -> None:
        self.path = Path(metadata_dir) / QUOTAS_FILE_NAME
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        quotas = data.get("quotas") if isinstance(data, dict) else None
        return dict(quotas) if isinstance(quotas, dict) else {}

    def _save(self, quotas: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "quotas": quotas}, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)

    def all_quotas(self) -> dict[QuotaEntity, QuotaValues]:
        with self._lock:
            loaded = self._load()
        out = {}
        for path, config in loaded.items():
            entity = parse_entity_path(path)
            values = _quota_values(config) if isinstance(config, dict) else {}
            if entity is not None and values:
                out[entity] = values
        return out

    def alter(self, entity: QuotaEntity, ops: QuotaOps) -> None:
        path = entity_path(entity)
        with self._lock:
            quotas = self._load()
            config = _apply(quotas.get(path, {}), ops)
            if config:
                quotas[path] = config
            else:
                quotas.pop(path, None)
            self._save(quotas)
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def watch(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def close(self) -> None:
        self._callbacks.clear()


class ZooKeeperQuotaStore:
    """Quotas in ZooKeeper (Kafka's layout, znodes defined in kctl.zk.znodes) on the broker's
    registry's session (``ZooKeeperRegistry.quota_store``)."""

    def __init__(self, session: ZooKeeperSession) -> None:
        self._session = session

    @property
    def _zk(self) -> KazooClient:
        return self._session.kazoo

    def close(self) -> None:
        pass

    def _config(self, path: str) -> tuple[dict[str, str], ZnodeStat | None]:
        """The ``config`` map of an entity (``path``: ``users/<u>``, ...) and its znode's stat (None
        when there is no znode)."""
        from kazoo.exceptions import NoNodeError

        entity_type, _, entity_name = path.partition("/")
        try:
            data, stat = self._zk.get(ConfigEntityZNode.path(entity_type, entity_name))
        except NoNodeError:
            return {}, None
        try:
            return ConfigEntityZNode.decode(entity_type, entity_name, data), stat
        except ZNodeDecodeError:
            return {}, stat

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return list(self._zk.get_children(path))
        except NoNodeError:
            return []

    def all_quotas(self) -> dict[QuotaEntity, QuotaValues]:
        users, clients = ConfigEntityZNode.USERS, ConfigEntityZNode.CLIENTS
        paths = [f"{clients}/{c}" for c in self._children(ConfigEntityTypeZNode.path(clients))]
        for user in self._children(ConfigEntityTypeZNode.path(users)):
            paths.append(f"{users}/{user}")
            paths += [
                f"{users}/{user}/{clients}/{c}"
                for c in self._children(ConfigEntityZNode.path(users, f"{user}/{clients}"))
            ]
        out = {}
        for path in paths:
            entity = parse_entity_path(path)
            config, _ = self._config(path)
            values = _quota_values(config)
            if entity is not None and values:
                out[entity] = values
        return out

    def alter(self, entity: QuotaEntity, ops: QuotaOps) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError

        path = entity_path(entity)
        entity_type, _, entity_name = path.partition("/")
        znode = ConfigEntityZNode.path(entity_type, entity_name)
        while True:
            current, stat = self._config(path)
            config = _apply(current, ops)
            body = ConfigEntityZNode.encode(config)
            try:
                if stat is None:
                    if not config:
                        return
                    self._zk.create(znode, body, makepath=True)
                else:
                    self._zk.set(znode, body, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            break
        notification = ConfigEntityChangeNotificationSequenceZNode
        self._zk.create(
            notification.create_path,
            notification.encode(entity_type, entity_name),
            sequence=True,
            makepath=True,
        )

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on kazoo's thread) when a config change notification about a user or a
        client id appears (topic and broker config changes are left alone)."""
        from kazoo.exceptions import NoNodeError
        from kazoo.recipe.watchers import ChildrenWatch

        changes = ConfigEntityChangeNotificationZNode.path
        notification = ConfigEntityChangeNotificationSequenceZNode
        self._zk.ensure_path(changes)
        seen: list[str] = []  # [the newest notification handled] once the first call has passed

        def about_quotas(child: str) -> bool:
            """Whether a notification is about a user or a client id (or is gone: maybe)."""
            try:
                data, _ = self._zk.get(f"{changes}/{child}")
            except NoNodeError:
                return True
            try:
                entity_type, _ = notification.decode(data)
            except ZNodeDecodeError:
                return False
            return entity_type in (ConfigEntityZNode.USERS, ConfigEntityZNode.CLIENTS)

        def on_children(children: list[str]) -> None:
            ordered = sorted(c for c in children if c.startswith(notification.PREFIX))
            if not seen:  # the first call: what was there before this broker started
                seen.append(ordered[-1] if ordered else "")
                return
            newest = seen[0]
            fresh = [c for c in ordered if c > newest]
            if fresh:
                seen[0] = fresh[-1]
            for child in fresh:
                if about_quotas(child):
                    callback()
                    return

        ChildrenWatch(self._zk, changes, on_children)
