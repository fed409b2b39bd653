"""Local processes of a kctl cluster on this machine: a real ZooKeeper server (`ZooKeeperServer`) or
ensemble (`ZooKeeperEnsemble`, quorum mode), a real ``kctl broker start`` process (`BrokerProcess`),
a `LocalCluster` of both, and what is behind
``kctl cluster up/start/stop/restart/status/down``: the launcher (kctl.localcluster.launcher:
detached processes whose ports, pids and configuration are kept in a state file,
kctl.localcluster.state), finding which of them run whoever started them (kctl.localcluster.processes)
and the rolling restart (kctl.localcluster.rolling). kctl.testing (the test harness) and
kctl.commands build on it.

`guard` is the check the test harness arms so that a test starts only the processes its markers
declare; outside pytest it checks nothing.
"""

from __future__ import annotations

from kctl.localcluster.broker import BrokerProcess, BrokerStartError
from kctl.localcluster.cluster import LocalCluster
from kctl.localcluster.guard import UnmarkedProcessError
from kctl.localcluster.zookeeper import (
    ZooKeeperServer,
    ZooKeeperStartError,
    ZooKeeperUnavailableError,
    free_port,
    new_chroot,
    start_zookeeper,
)
from kctl.localcluster.zookeeper_ensemble import ZooKeeperEnsemble

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "LocalCluster",
    "UnmarkedProcessError",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ZooKeeperUnavailableError",
    "free_port",
    "new_chroot",
    "start_zookeeper",
]
