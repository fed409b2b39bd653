"""A real ZooKeeper ensemble (quorum mode, Debian's ``zookeeper`` package) on this machine: for the
fault tests that need ZooKeeper's own failures (its leader killed or paused, a quorum lost) and for
``kctl cluster up --zookeepers 3``.

``ZooKeeperEnsemble(directory, size=3)`` holds ``size`` `ZooKeeperServer` objects in quorum mode
(``QuorumPeerMain``), each with a client, a quorum and an election port on 127.0.0.1 and its data
under ``directory/zk-<id>``. It answers what the brokers and tests ask of a standalone server
(``hosts``, ``connect_string``, ``start``, ``stop``, ``running``), so `LocalCluster` takes either.
``start()`` launches every server, then waits until each serves and one of them leads; a server
restarted alone catches up from the others. The faults are on the servers themselves
(``server.kill()``, ``pause()``, ``resume()``, ``restart()``), found by role with `leader()` and
`followers()`.

    ensemble = ZooKeeperEnsemble(tmp_path / "zk", size=3).start()
    cluster = LocalCluster(tmp_path / "cluster", 3, zookeeper=ensemble).start()
    ensemble.leader().kill()                 # a new ZooKeeper leader is elected among the two others
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from kctl.localcluster.zookeeper import (
    START_TIMEOUT_S,
    QuorumPeer,
    ZooKeeperServer,
    ZooKeeperStartError,
    free_port,
    new_chroot,
)


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers in quorum mode on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        size: int = 3,
        *,
        client_ports: Sequence[int] | None = None,
        peers: Sequence[QuorumPeer] | None = None,
        detached: bool = False,
    ) -> None:
        """``client_ports`` and ``peers`` (quorum and election ports): those of a previous run, to
        start the same ensemble again (default: free ports)."""
        if size < 1:
            raise ValueError(f"an ensemble needs at least one server, not {size}")
        for given in (client_ports, peers):
            if given is not None and len(given) != size:
                raise ValueError(f"{size} servers need {size} ports of each kind, not {len(given)}")
        self.directory = Path(directory)
        if peers is None:
            peers = [QuorumPeer(server_id, free_port(), free_port()) for server_id in range(1, size + 1)]
        self.peers = list(peers)
        self.servers = [
            ZooKeeperServer(
                self.directory / f"zk-{peer.server_id}",
                port=client_ports[index] if client_ports else free_port(),
                detached=detached,
                quorum=peers,
                server_id=peer.server_id,
            )
            for index, peer in enumerate(peers)
        ]

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.hosts} {self.directory}>"

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def hosts(self) -> str:
        """``127.0.0.1:P1,127.0.0.1:P2,...``: the connect string without a chroot."""
        return ",".join(server.hosts for server in self.servers)

    @property
    def running(self) -> bool:
        """Whether any server of the ensemble runs."""
        return any(server.running for server in self.servers)

    def chroot(self, prefix: str = "kctl-test") -> str:
        return new_chroot(prefix)

    def connect_string(self, chroot: str | None = None) -> str:
        """Every server's address, then ``/<chroot>`` (a fresh unique one when none is given)."""
        path = chroot or self.chroot()
        return f"{self.hosts}/{path.lstrip('/')}"

    def server(self, server_id: int) -> ZooKeeperServer:
        """The server with ``myid`` ``server_id`` (1..size)."""
        return self.servers[server_id - 1]

    def start(self, timeout: float = START_TIMEOUT_S) -> ZooKeeperEnsemble:
        """Launch the servers not running, then wait until every server serves and one leads."""
        for server in self.servers:
            if not server.running:
                server.launch()
        try:
            for server in self.servers:
                server.wait_serving(timeout)
            self.wait_for_leader(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server (SIGTERM, SIGKILL after a while)."""
        for server in self.servers:
            server.stop()

    def restart(self, server: ZooKeeperServer, timeout: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Stop ``server`` (if running) and start it again; it serves once it rejoined the quorum."""
        server.stop()
        server.launch()
        return server.wait_serving(timeout)

    def leader(self) -> ZooKeeperServer | None:
        """The server that reports itself the ensemble's leader, None while there is none."""
        leaders = [server for server in self.servers if server.running and server.mode() == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def followers(self) -> list[ZooKeeperServer]:
        """The servers serving as followers."""
        return [server for server in self.servers if server.running and server.mode() == "follower"]

    def wait_for_leader(self, timeout: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """The leader, once the running servers have elected one; raises `ZooKeeperStartError`
        after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None:
                return leader
            time.sleep(0.05)  # polling interval of the probe, bounded by the deadline
        modes = {server.server_id: server.mode() or "not serving" for server in self.servers}
        raise ZooKeeperStartError(f"no ZooKeeper leader within {timeout:g} s: {modes}")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(f"-- zk-{server.server_id}\n{server.log_tail(lines)}" for server in self.servers)
