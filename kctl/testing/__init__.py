"""kctl's test harness, for kctl's own tests and for users' tests of code that talks to kctl (as
kazoo ships its harness): a real ZooKeeper server (`ZooKeeperServer`), a real ``kctl broker start``
process (`BrokerProcess`), a `LocalCluster` of both, and pytest fixtures (``kctl.testing.pytest_plugin``:
``pytest_plugins = ["kctl.testing.pytest_plugin"]`` in a conftest.py), and the helpers tests need
around them (``kctl.testing.helpers``): `wait_for` (poll with a deadline and a clear failure),
`create_topic` and `produce` (kctl's own client; a topic waited for, records acknowledged).

The process classes live in kctl.localcluster (which ``kctl cluster up`` uses too); this package
re-exports them and adds the pytest plugin. It is the top layer: it may import any part of kctl but
kctl.commands, and nothing else in kctl imports it.
"""

from __future__ import annotations

from kctl.localcluster import (
    BrokerProcess,
    BrokerStartError,
    LocalCluster,
    UnmarkedProcessError,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    ZooKeeperStartError,
    ZooKeeperUnavailableError,
    free_port,
    new_chroot,
    start_zookeeper,
)
from kctl.testing.helpers import WaitTimeout, create_topic, produce, wait_for
from kctl.testing.notifications import Notifications

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "LocalCluster",
    "Notifications",
    "UnmarkedProcessError",
    "WaitTimeout",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ZooKeeperUnavailableError",
    "create_topic",
    "free_port",
    "new_chroot",
    "produce",
    "start_zookeeper",
    "wait_for",
]
