"""Where the security metadata lives: SCRAM credentials and ACLs, in Kafka's ZooKeeper layout in
cluster mode and in one JSON file under the data directory otherwise; the registry offers the one
of its backend (``Registry.security_store``).

ZooKeeper (what Kafka's brokers and ``kafka-configs.sh`` / ``kafka-acls.sh`` read and write; the
bytes are kctl.zk.znodes' ConfigEntityZNode and kctl.zk.acl_znodes' AclZNode, with their change
notifications):

- ``/config/users/<user>``: ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,
  server_key=...,iterations=4096"}}`` plus a ``/config/changes/config_change_<seq>`` notification
  ``{"version":2,"entity_path":"users/<user>"}``.
- literal ACLs under ``/kafka-acl/<ResourceType>/<name>``, prefixed ones under
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, each
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
  "host":"*"}]}``; a change is announced by ``/kafka-acl-changes/acl_changes_<seq>`` (literal:
  ``"Topic:name"``) or ``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON), which brokers watch.

Embedded: ``<data dir>/security.json`` ``{"version":1,"users":{user:{mechanism:credential}},
"acls":[{"resourceType","patternType","name","acls":[...]}]}``, rewritten atomically.

Both stores hold credentials only in their salted form (the text is made by kctl.common.scram's
callers); neither knows what an ACL means (kctl.broker.security.acls does)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kctl.zk.acl_znodes import AclChangeNotificationSequenceZNode, AclZNode
from kctl.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ZNodeDecodeError,
)

if TYPE_CHECKING:  # kazoo is only loaded by the ZooKeeper registry
    from kazoo.client import KazooClient
    from kazoo.protocol.states import ZnodeStat

    from kctl.zk.zookeeper_session import ZooKeeperSession

#: (resource type name, pattern type name, resource name): ("Topic", "LITERAL", "orders")
ResourceKey = tuple[str, str, str]
#: one ACL as Kafka's ZooKeeper JSON holds it
AclEntry = dict[str, str]
AclUpdate = Callable[[list[AclEntry]], list[AclEntry]]

SECURITY_FILE_NAME = "security.json"


class SecurityStore(Protocol):
    """SCRAM credentials and ACLs (``Registry.security_store``): a FileSecurityStore or a
    ZooKeeperSecurityStore."""

    def user_credentials(self, user: str) -> dict[str, str]: ...
    def users(self) -> dict[str, dict[str, str]]: ...
    def set_user_credential(self, user: str, mechanism: str, credential: str | None) -> bool: ...
    def all_acls(self) -> dict[ResourceKey, list[AclEntry]]: ...
    def update_acls(self, key: ResourceKey, update: AclUpdate) -> None: ...
    def watch_acls(self, callback: Callable[[], None]) -> None: ...
    def close(self) -> None: ...


class FileSecurityStore:
    """The embedded store: ``<metadata_dir>/security.json``; thread-safe, read on every call (so a
    change made by another process holding the same file is seen)."""

    def __init__(self, metadata_dir: Path) -> None:
        self.path = Path(metadata_dir) / SECURITY_FILE_NAME
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"version": 1, "users": {}, "acls": []}
        data.setdefault("users", {})
        data.setdefault("acls", [])
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    def user_credentials(self, user: str) -> dict[str, str]:
        with self._lock:
            return dict(self._load()["users"].get(user, {}))

    def users(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {u: dict(c) for u, c in self._load()["users"].items()}

    def set_user_credential(self, user: str, mechanism: str, credential: str | None) -> bool:
        """Set (or with None delete) one mechanism's credential; False when there was none to delete."""
        with self._lock:
            data = self._load()
            entry = data["users"].setdefault(user, {})
            if credential is None:
                existed = entry.pop(mechanism, None) is not None
                if not entry:
                    del data["users"][user]
                if not existed:
                    return False
            else:
                entry[mechanism] = credential
            self._save(data)
            return True

    def all_acls(self) -> dict[ResourceKey, list[AclEntry]]:
        with self._lock:
            return {
                (r["resourceType"], r["patternType"], r["name"]): list(r["acls"])
                for r in self._load()["acls"]
            }

    def update_acls(self, key: ResourceKey, update: AclUpdate) -> None:
        with self._lock:
            data = self._load()
            resources = {(r["resourceType"], r["patternType"], r["name"]): r for r in data["acls"]}
            current = resources.get(key)
            acls = update(list(current["acls"]) if current is not None else [])
            if acls:
                resources[key] = {"resourceType": key[0], "patternType": key[1], "name": key[2], "acls": acls}
            else:
                resources.pop(key, None)
            data["acls"] = [resources[k] for k in sorted(resources)]
            self._save(data)
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def watch_acls(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def close(self) -> None:
        self._callbacks.clear()


class ZooKeeperSecurityStore:
    """Credentials and ACLs in ZooKeeper (Kafka's layout, znodes defined in kctl.zk.znodes) on a
    ZooKeeper session: the broker's registry's (``ZooKeeperRegistry.security_store``), or one of
    its own (``connect``) for tools."""

    def __init__(self, session: ZooKeeperSession, *, owns_session: bool = False) -> None:
        self._session = session
        self._owns_session = owns_session

    @classmethod
    def connect(cls, connect: str, *, timeout: float = 10.0) -> ZooKeeperSecurityStore:
        """A store on a new session to ``connect`` (``host:port[,...][/chroot]``)."""
        from kctl.zk.zookeeper_session import ZooKeeperSession

        return cls(ZooKeeperSession.plain(connect, timeout=timeout), owns_session=True)

    @property
    def _zk(self) -> KazooClient:
        return self._session.kazoo

    def close(self) -> None:
        if self._owns_session:
            with contextlib.suppress(Exception):
                self._session.close()

    # -- users ---------------------------------------------------------------------------------
    def _user_config(self, user: str) -> tuple[dict[str, str], ZnodeStat | None]:
        """The user's ``config`` map and its znode's stat (None when there is no znode)."""
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self._zk.get(ConfigEntityZNode.path(ConfigEntityZNode.USERS, user))
        except NoNodeError:
            return {}, None
        try:
            return ConfigEntityZNode.decode(ConfigEntityZNode.USERS, user, data), stat
        except ZNodeDecodeError:
            return {}, stat

    def user_credentials(self, user: str) -> dict[str, str]:
        config, _ = self._user_config(user)
        return {k: v for k, v in config.items() if k.startswith("SCRAM-")}

    def users(self) -> dict[str, dict[str, str]]:
        from kazoo.exceptions import NoNodeError

        try:
            names = self._zk.get_children(ConfigEntityTypeZNode.path(ConfigEntityZNode.USERS))
        except NoNodeError:
            return {}
        out = {}
        for name in sorted(names):
            credentials = self.user_credentials(name)
            if credentials:
                out[name] = credentials
        return out

    def set_user_credential(self, user: str, mechanism: str, credential: str | None) -> bool:
        from kazoo.exceptions import BadVersionError, NodeExistsError

        path = ConfigEntityZNode.path(ConfigEntityZNode.USERS, user)
        while True:
            config, stat = self._user_config(user)
            if credential is None:
                if config.pop(mechanism, None) is None:
                    return False
            else:
                config[mechanism] = credential
            body = ConfigEntityZNode.encode(config)
            try:
                if stat is None:
                    self._zk.create(path, body, makepath=True)
                else:
                    self._zk.set(path, body, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            break
        notification = ConfigEntityChangeNotificationSequenceZNode
        self._zk.create(
            notification.create_path,
            notification.encode(ConfigEntityZNode.USERS, user),
            sequence=True,
            makepath=True,
        )
        return True

    # -- ACLs ----------------------------------------------------------------------------------
    def _acls(self, key: ResourceKey) -> tuple[list[AclEntry], ZnodeStat | None]:
        """The ACLs of a resource pattern and its znode's stat (None when there is no znode)."""
        from kazoo.exceptions import NoNodeError

        resource_type, pattern_type, name = key
        try:
            data, stat = self._zk.get(AclZNode.path(resource_type, pattern_type, name))
        except NoNodeError:
            return [], None
        try:
            return AclZNode.decode(resource_type, pattern_type, name, data), stat
        except ZNodeDecodeError:
            return [], stat

    def all_acls(self) -> dict[ResourceKey, list[AclEntry]]:
        from kazoo.exceptions import NoNodeError

        out: dict[ResourceKey, list[AclEntry]] = {}
        for pattern_type in (AclZNode.LITERAL, AclZNode.PREFIXED):
            base = AclZNode.root(pattern_type)
            try:
                types = self._zk.get_children(base)
            except NoNodeError:
                continue
            for resource_type in types:
                try:
                    names = self._zk.get_children(f"{base}/{resource_type}")
                except NoNodeError:
                    continue
                for name in names:
                    key = (resource_type, pattern_type, name)
                    acls, _ = self._acls(key)
                    if acls:
                        out[key] = acls
        return out

    def update_acls(self, key: ResourceKey, update: AclUpdate) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        resource_type, pattern_type, name = key
        path = AclZNode.path(resource_type, pattern_type, name)
        while True:
            current, stat = self._acls(key)
            acls = update(current)
            body = AclZNode.encode(acls)
            try:
                if stat is None:
                    if not acls:
                        return
                    self._zk.create(path, body, makepath=True)
                elif acls:
                    self._zk.set(path, body, version=stat.version)
                else:
                    self._zk.delete(path, version=stat.version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        note = AclChangeNotificationSequenceZNode.encode(resource_type, pattern_type, name)
        self._zk.create(
            AclChangeNotificationSequenceZNode.create_path(pattern_type), note, sequence=True, makepath=True
        )

    def watch_acls(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on kazoo's thread) whenever a change notification appears."""
        from kazoo.recipe.watchers import ChildrenWatch

        for path in AclChangeNotificationSequenceZNode.PATHS:
            self._zk.ensure_path(path)
            first = [True]

            def on_children(children: list[str], first: list[bool] = first) -> None:
                if first[0]:
                    first[0] = False
                    return
                callback()

            ChildrenWatch(self._zk, path, on_children)
