"""kctl's test harness, for kctl's own tests and for users' tests of code that talks to kctl (as
kazoo ships its harness): a real ZooKeeper server (`ZooKeeperServer`), a real ``kctl broker start``
process (`BrokerProcess`), a `LocalCluster` of both, and pytest fixtures (``kctl.testing.pytest_plugin``:
``pytest_plugins = ["kctl.testing.pytest_plugin"]`` in a conftest.py).

This package is the top layer: it may import any part of kctl, and nothing else in kctl imports it.
"""

from __future__ import annotations

from kctl.testing.broker import BrokerProcess, BrokerStartError
from kctl.testing.cluster import LocalCluster
from kctl.testing.guard import UnmarkedProcessError
from kctl.testing.notifications import Notifications
from kctl.testing.zookeeper import (
    ZooKeeperServer,
    ZooKeeperStartError,
    ZooKeeperUnavailableError,
    free_port,
    new_chroot,
    start_zookeeper,
)

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "LocalCluster",
    "Notifications",
    "UnmarkedProcessError",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ZooKeeperUnavailableError",
    "free_port",
    "new_chroot",
    "start_zookeeper",
]
