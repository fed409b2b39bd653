"""ZooKeeper's own failures as faults of a `kctl.testing.jepsen.Campaign` (issue 24's ZooKeeper
nemesis): each acts on a real `ZooKeeperEnsemble` (quorum mode) that a `LocalCluster`'s brokers use,
waits until the ensemble serves again, and returns a one-line description of what it did.

- `kill_zookeeper_leader`: SIGKILL the ensemble's leader; the two others elect a new one; the old
  one is restarted and rejoins as a follower. Brokers connected to it move their sessions to another
  server within the session timeout.
- `pause_zookeeper_leader`: SIGSTOP the leader until the others have elected a new one (the paused
  one answers nothing but keeps its sockets open: the clients connected to it see silence, not a
  closed connection), then SIGCONT; it rejoins as a follower.
- `kill_zookeeper_follower`: SIGKILL one follower and restart it (the quorum is never lost).
- `lose_zookeeper_quorum`: SIGSTOP two of three servers for ``hold_s`` seconds: no writes and, once
  the clients give up on the last server, no reads either; brokers keep serving what they lead
  but can change no ISR; then SIGCONT and wait until a leader serves.
- `isolate_leader_from_zookeeper`: the zombie-leader case. Each broker reaches ZooKeeper through a
  `TcpProxy` of its own (`ZooKeeperLinks`, set up before the cluster starts); the fault cuts a
  partition leader's link only, while clients and followers still reach it, until its session
  expired, another broker leads and the writers went on; then heals the link and waits for a full
  ISR. Acknowledged writes accepted by the old leader meanwhile would show up as lost or as offsets
  reused (two leaders acknowledging one offset: split brain).

The campaign's writers keep producing with acks=all throughout; the checker then requires that
nothing acknowledged was lost whatever ZooKeeper did."""

from __future__ import annotations

import time
from collections.abc import Sequence

from kctl.localcluster import LocalCluster, ZooKeeperEnsemble, ZooKeeperServer
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Load, wait_for_progress
from kctl.testing.tcp_proxy import TcpProxy

QUORUM_TIMEOUT_S = 60.0
"""How long a fault waits for the ensemble to serve with a leader again."""


def kill_zookeeper_leader(ensemble: ZooKeeperEnsemble) -> str:
    leader = ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    leader.kill()
    ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    ensemble.restart(leader, QUORUM_TIMEOUT_S)
    return f"kill -9 ZooKeeper leader zk-{leader.server_id}, restarted"


def pause_zookeeper_leader(ensemble: ZooKeeperEnsemble) -> str:
    leader = ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    leader.pause()
    try:
        deadline = time.monotonic() + QUORUM_TIMEOUT_S
        while (successor := ensemble.leader()) is None or successor is leader:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no new ZooKeeper leader within {QUORUM_TIMEOUT_S:g} s")
            time.sleep(0.05)  # polling interval of the election probe, bounded by the deadline
    finally:
        leader.resume()
    leader.wait_serving(QUORUM_TIMEOUT_S)
    return f"kill -STOP ZooKeeper leader zk-{leader.server_id} until zk-{successor.server_id} led, then -CONT"


def kill_zookeeper_follower(ensemble: ZooKeeperEnsemble) -> str:
    ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    follower = ensemble.followers()[0]
    follower.kill()
    ensemble.restart(follower, QUORUM_TIMEOUT_S)
    return f"kill -9 ZooKeeper follower zk-{follower.server_id}, restarted"


def lose_zookeeper_quorum(ensemble: ZooKeeperEnsemble, hold_s: float = 3.0) -> str:
    """``hold_s`` is the fault's length (how long the quorum stays lost), not a wait for a
    condition."""
    leader = ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    stopped = [leader, *ensemble.followers()[:1]]
    for server in stopped:
        server.pause()
    try:
        time.sleep(hold_s)
    finally:
        for server in stopped:
            server.resume()
    ensemble.wait_for_leader(QUORUM_TIMEOUT_S)
    names = " and ".join(f"zk-{server.server_id}" for server in stopped)
    return f"kill -STOP {names} (quorum lost for {hold_s:g} s), then -CONT"


class ZooKeeperLinks:
    """Each broker of ``cluster`` (not started yet) connected to ``zookeeper`` (a server or every
    server of an ensemble) through `TcpProxy` objects of its own, so that one broker's link can be
    cut while the others stay. The proxies listen on ``listen_host`` (another address than 127.0.0.1
    when the brokers run in network namespaces: kctl.testing.netns's ``client_ip``)."""

    def __init__(
        self,
        cluster: LocalCluster,
        zookeeper: ZooKeeperServer | ZooKeeperEnsemble,
        *,
        listen_host: str = "127.0.0.1",
    ) -> None:
        servers = zookeeper.servers if isinstance(zookeeper, ZooKeeperEnsemble) else [zookeeper]
        self.proxies: dict[int, list[TcpProxy]] = {}
        chroot = cluster.chroot.lstrip("/")
        for broker_id, broker in cluster.brokers.items():
            proxies = self.proxies[broker_id] = [
                TcpProxy(server.port, listen_host=listen_host).start() for server in servers
            ]
            hosts = ",".join(f"{listen_host}:{proxy.port}" for proxy in proxies)
            broker.properties["zookeeper.connect"] = f"{hosts}/{chroot}"

    def cut(self, broker_id: int) -> None:
        for proxy in self.proxies[broker_id]:
            proxy.cut()

    def heal(self, broker_id: int) -> None:
        for proxy in self.proxies[broker_id]:
            proxy.heal()

    def is_cut(self, broker_id: int) -> bool:
        return any(proxy.is_cut for proxy in self.proxies[broker_id])

    def close(self) -> None:
        for proxies in self.proxies.values():
            for proxy in proxies:
                proxy.close()


def isolate_leader_from_zookeeper(
    links: ZooKeeperLinks,
    view: ClusterView,
    topic: str,
    partition: int,
    loads: Sequence[Load],
    *,
    timeout: float = 60.0,
) -> str:
    leader = view.wait_for_leader(topic, partition, timeout=timeout).leader
    links.cut(leader)
    try:
        view.wait_for_leader(topic, partition, not_in={leader}, timeout=timeout)
        wait_for_progress(loads, 50, timeout=timeout)
    finally:
        links.heal(leader)
    for index, replicas in sorted(view.assignment(topic).items()):
        view.wait_for_isr(topic, index, set(replicas), timeout=timeout)
    return f"cut broker {leader} (leader of {topic}/{partition}) from ZooKeeper until another led"
