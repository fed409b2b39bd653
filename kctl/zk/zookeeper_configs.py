"""The ZooKeeper registry's config overrides (kctl.zk.registry.ConfigStore, on the registry's
shared session: kctl.zk.zookeeper_session).

This module owns the writes of /config/topics/<topic> and /config/brokers/<id>|<default> (Kafka's
``changeTopicConfig`` and ``changeBrokerConfig``) and the change notifications that announce them
(/config/changes/config_change_<seq>, purged after Kafka's 15 minutes). Every broker watches those
notifications (kctl.zk.zookeeper_watches); topic overrides are read with their topic
(kctl.zk.zookeeper_topics)."""

from __future__ import annotations

import contextlib
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from kctl.zk.model import UnknownTopicError
from kctl.zk.registry import CONFIGS, ConfigStore
from kctl.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    TopicZNode,
)
from kctl.zk.zookeeper_session import ZooKeeperPart

__all__ = ["ZooKeeperConfigs"]


class ZooKeeperConfigs(ZooKeeperPart, ConfigStore):
    """Topic config overrides and dynamic broker configs under /config (Kafka's layout)."""

    def _notify(self, reason: str) -> None:
        """After a write of this registry's: topic records kept before it may hold older overrides
        (kctl.zk.watched_reads; read your writes)."""
        self._session.watched_topics.rearm_all()
        super()._notify(reason)

    # -- topic config overrides --------------------------------------------------------------------
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Kafka's ``changeTopicConfig``: overwrite /config/topics/<topic>, then announce it with a
        /config/changes/config_change_ notification (and purge expired notifications)."""
        client = self._zk_client()
        with self._zk(f"set the configs of topic {name}"):
            if client.exists(TopicZNode.path(name)) is None:
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            self._write_and_announce(client, ConfigEntityZNode.TOPICS, name, configs)
        self._notify(CONFIGS)

    # -- dynamic broker configs (Kafka's /config/brokers/<id> and /config/brokers/<default>) ----------
    def broker_configs(self, entity: str) -> dict[str, str]:
        client = self._zk_client()
        with self._zk(f"read the configs of broker {entity}"):
            try:
                data, _ = client.get(ConfigEntityZNode.path(ConfigEntityZNode.BROKERS, entity))
            except NoNodeError:
                return {}
        return ConfigEntityZNode.decode(ConfigEntityZNode.BROKERS, entity, data)

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Kafka's ``changeBrokerConfig``: overwrite /config/brokers/<entity>, then announce it with
        a /config/changes notification for ``brokers/<entity>``."""
        client = self._zk_client()
        with self._zk(f"set the configs of broker {entity}"):
            self._write_and_announce(client, ConfigEntityZNode.BROKERS, entity, configs)
        self._notify(CONFIGS)

    def _write_and_announce(
        self, client: KazooClient, entity_type: str, entity: str, configs: dict[str, str]
    ) -> None:
        """Overwrite /config/<entity_type>/<entity> (created when missing), announce it with a
        /config/changes notification and purge the expired ones."""
        path = ConfigEntityZNode.path(entity_type, entity)
        data = ConfigEntityZNode.encode(configs)
        try:
            client.set(path, data)
        except NoNodeError:
            try:
                client.create(path, data, makepath=True)
            except NodeExistsError:
                client.set(path, data)
        created = client.create(
            ConfigEntityChangeNotificationSequenceZNode.create_path,
            ConfigEntityChangeNotificationSequenceZNode.encode(entity_type, entity),
            sequence=True,
            makepath=True,
        )
        self._purge_config_changes(client, created)

    def _purge_config_changes(self, client: KazooClient, newest: str) -> None:
        """Delete notifications older than Kafka's 15-minute expiry, oldest first."""
        newest_number = ConfigEntityChangeNotificationSequenceZNode.sequence_number(newest.rsplit("/", 1)[-1])
        children = client.get_children(ConfigEntityChangeNotificationZNode.path)
        numbered = sorted(
            (n, c)
            for c in children
            if (n := ConfigEntityChangeNotificationSequenceZNode.sequence_number(c)) is not None
            and newest_number is not None
            and n < newest_number
        )
        expired_before = time.time() * 1000 - ConfigEntityChangeNotificationSequenceZNode.EXPIRATION_MS
        for _, child in numbered:
            path = f"{ConfigEntityChangeNotificationZNode.path}/{child}"
            stat = client.exists(path)
            if stat is None:
                continue
            if stat.ctime >= expired_before:
                break
            with contextlib.suppress(NoNodeError):
                client.delete(path)
