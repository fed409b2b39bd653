"""ZooKeeper-coordinated consumer groups (the seeds' high-level consumer), client side.

* ``config``    — ``ZkGroupConfig``: zookeeper.connect, offsets.storage, dual.commit.enabled, ...
* ``rebalance`` — the range algorithm every member runs on the registry's contents.
* ``storage``   — ``OffsetStore``: offsets in ZooKeeper, in Kafka, or both (dual commit).
* ``consumer``  — ``ZkGroupConsumer``: registration, watches, ownership claims, offsets.
* ``admin``     — ``ZkGroupAdmin`` (list/describe/rewind/delete these groups) and the offline
  migration of a group's offsets between ZooKeeper and Kafka.

The znodes (``/consumers/<group>/ids|owners|offsets``) are kctl.zk.consumer_znodes; the kazoo
session is kctl.zk.consumer_registry.
"""

from kctl.client.zkgroup.admin import (
    MigrationEntry,
    MigrationPlan,
    ZkGroupAdmin,
    execute_migration,
    plan_migration,
)
from kctl.client.zkgroup.config import ZkGroupConfig
from kctl.client.zkgroup.consumer import OwnershipEvent, ZkGroupConsumer, ZkRebalanceError
from kctl.client.zkgroup.rebalance import assign_range, plan_assignment
from kctl.client.zkgroup.storage import OffsetStore

__all__ = [
    "MigrationEntry",
    "MigrationPlan",
    "OffsetStore",
    "OwnershipEvent",
    "ZkGroupAdmin",
    "ZkGroupConfig",
    "ZkGroupConsumer",
    "ZkRebalanceError",
    "assign_range",
    "execute_migration",
    "plan_assignment",
    "plan_migration",
]
