"""The network lab's isolation as the processes in it meet it: an isolated node reaches nothing, not
even a socket of the root namespace (where the tests' clients and ZooKeeper proxies listen), and
nothing reaches it; both ways the packets vanish without a word (no reset, no error), as in a real
partition. Before the lab had a router of its own, its rules sat in the root namespace, whose own
addresses are delivered before any rule: an isolated broker's session pings still reached the
ZooKeeper proxies there (keeping its session alive seconds longer) and its answers still reached the
clients. Needs root for the namespaces; skips with the reason otherwise."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from kctl.testing.netns import NetworkLab, NetworkUnavailableError

# runs inside a node: connects to the address given, then sends one byte per line read
SENDER = """
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print("connected", flush=True)
for _ in sys.stdin:
    conn.send(b"x")
    print("sent", flush=True)
"""

# runs inside a node: a server counting the bytes it receives, printing its port first
SINK = """
import socket, sys
server = socket.create_server((sys.argv[1], 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
print("accepted", flush=True)
while data := conn.recv(4096):
    print(len(data), flush=True)
"""

SILENCE_S = 1.0
"""How long a cut link must carry nothing (a delivered byte takes well under a millisecond here)."""


class Sink:
    """A server in the root namespace counting the bytes it receives."""

    def __init__(self, host: str) -> None:
        self.server = socket.create_server((host, 0))
        self.port = int(self.server.getsockname()[1])
        self.received = 0
        self._changed = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            while data := conn.recv(4096):
                with self._changed:
                    self.received += len(data)
                    self._changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.received >= count, timeout)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    try:
        network = NetworkLab.create()
    except NetworkUnavailableError as error:
        pytest.skip(f"no network namespaces here: {error}")
    with network:
        yield network


def _in_node(lab: NetworkLab, name: str, script: str, *args: str) -> subprocess.Popen[str]:
    node = lab.nodes[name]
    return subprocess.Popen(
        [*node.prefix, sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_an_isolated_node_reaches_nothing_and_nothing_reaches_it(lab: NetworkLab) -> None:
    broker, other = lab.add_node("b1"), lab.add_node("b2")
    root_sink = Sink(lab.client_ip)
    sender = _in_node(lab, "b1", SENDER, lab.client_ip, str(root_sink.port))
    node_sink = _in_node(lab, "b2", SINK, other.ip)
    assert sender.stdin and sender.stdout and node_sink.stdout
    try:
        node_sink_port = int(node_sink.stdout.readline())
        to_node = _in_node(lab, "b1", SENDER, other.ip, str(node_sink_port))
        assert to_node.stdin and to_node.stdout
        assert sender.stdout.readline().strip() == "connected"
        assert to_node.stdout.readline().strip() == "connected"
        assert node_sink.stdout.readline().strip() == "accepted"

        def send(process: subprocess.Popen[str]) -> None:
            assert process.stdin and process.stdout
            process.stdin.write("go\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == "sent"

        send(sender)
        send(to_node)
        assert root_sink.wait_for(1, 10), "node -> root namespace works before the fault"
        assert node_sink.stdout.readline().strip() == "1", "node -> node works before the fault"

        lab.isolate(broker)
        send(sender)
        assert not root_sink.wait_for(2, SILENCE_S), "an isolated node still reaches the root namespace"
        # and the root namespace does not reach it: a new connection hears nothing (no error, no reset)
        probe = socket.socket()
        probe.settimeout(SILENCE_S)
        with probe, pytest.raises(TimeoutError):
            probe.connect((broker.ip, 9))

        lab.heal()
        assert root_sink.wait_for(2, 30), "the byte the cut held back arrives once healed"
        to_node.kill()
    finally:
        for process in (sender, node_sink):
            process.kill()
            process.wait()
        root_sink.close()
