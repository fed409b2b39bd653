"""A broker whose peer cannot be reached for a while writes a bounded number of lines about it.

Two brokers (real processes, real ZooKeeper); broker 2 advertises an address the test forwards to
it (a TCP forwarder the test can cut and restore, as a network partition between brokers would).
Broker 1 follows broker 2's partition. With the link cut, broker 1's replica fetcher fails about
once a second; it must say so once at WARNING (then at most one summary a minute), and once at
INFO when broker 2 is reachable again — not a line per retry (issue 25 §5)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.localcluster.cluster import LocalCluster
from kctl.testing import ZooKeeperServer
from kctl.testing.cluster_view import ClusterView

pytestmark = pytest.mark.slow

LAG_MS = 12_000  # the outage lasts at least this long: until broker 2 drops broker 1 from the ISR
MAX_LINES = 3  # the first failure, perhaps one summary, the recovery


class Link:
    """Forwards 127.0.0.1:``port`` to ``target``; `cut` closes it (listener and connections),
    `restore` listens again."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
            listener, self._listener = self._listener, None
        for sock in [*sockets, *([listener] if listener is not None else [])]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                inbound, _ = listener.accept()
                outbound = socket.create_connection(self.target)
            except OSError:
                return  # cut
            with self._lock:
                if self._listener is not listener:
                    inbound.close()
                    outbound.close()
                    return
                self._sockets += [inbound, outbound]
            for source, sink in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[LocalCluster, Link]]:
    advertised = _free_port()
    properties = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": str(LAG_MS)}
    cluster = LocalCluster(tmp_path, 2, properties=properties, zookeeper=zookeeper)
    cluster.broker(2).properties["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{advertised}"
    link: Link | None = None
    try:
        cluster.start()
        link = Link(advertised, (cluster.broker(2).host, cluster.broker(2).port))
        link.restore()
        yield cluster, link
    finally:
        if link is not None:
            link.cut()
        cluster.stop()


def test_an_unreachable_peer_costs_a_few_lines_not_one_per_retry(cluster: tuple[LocalCluster, Link]) -> None:
    local, link = cluster
    admin = AdminClient({"bootstrap.servers": local.broker(1).bootstrap})
    topic = NewTopic("t", 1, replica_assignment=[[2, 1]])
    admin.create_topics([topic], operation_timeout=30)["t"].result(30)
    follower = local.broker(1)
    with ClusterView(local.zookeeper_connect) as view:
        view.wait_for_isr("t", 0, {1, 2})
        assert view.leader_of("t", 0) == 2
        start = follower.log_file.stat().st_size
        link.cut()
        # the outage lasts until the leader drops its follower from the ISR (replica.lag.time.max.ms)
        view.wait_for_isr("t", 0, {2}, timeout=LAG_MS / 1000 + 30)
        address = f"broker 2 at 127.0.0.1:{link.port}"
        during = follower.log_file.read_text(errors="replace")[start:].splitlines()
        about = [line for line in during if "broker 2" in line or f":{link.port}" in line]
        assert len(about) <= MAX_LINES - 1, f"{len(about)} lines during the outage:\n" + "\n".join(about)
        warnings = [line for line in about if " WARNING " in line and f"cannot reach {address}" in line]
        assert len(warnings) == 1, "\n".join(during)
        link.restore()
        view.wait_for_isr("t", 0, {1, 2}, timeout=60)

        def recovered() -> list[str]:
            lines = follower.log_file.read_text(errors="replace")[start:].splitlines()
            return [line for line in lines if " INFO " in line and f"{address} reachable again after" in line]

        # logged when the first fetch after the reconnection is answered (a long poll)
        view.wait_for(recovered, "the INFO line saying broker 2 is reachable again", 30)
    lines = follower.log_file.read_text(errors="replace")[start:].splitlines()
    about = [line for line in lines if "broker 2" in line or f":{link.port}" in line]
    assert len(about) <= MAX_LINES, "\n".join(about)
