"""A ZooKeeper server that accepts a connection and never answers its handshake (ZooKeeper 3.8.0
does so to a client that connects while it is still loading its data) must not cost the session:
the registry gives up on the handshake after a third of the session and tries again."""

from __future__ import annotations

import time
import uuid

from kctl.testing import ZooKeeperServer
from kctl.testing.tcp_proxy import TcpProxy
from kctl.zk.zookeeper import ZooKeeperRegistry
from kctl.zk.zookeeper_session import handshake_hosts


def test_each_server_is_listed_at_least_three_times() -> None:
    assert handshake_hosts("a:1") == "a:1,a:1,a:1"
    assert handshake_hosts("a:1, b:2") == "a:1,b:2,a:1,b:2"
    assert handshake_hosts("a:1,b:2,c:3") == "a:1,b:2,c:3"


def test_two_unanswered_handshakes_in_a_row_keep_the_session(zookeeper: ZooKeeperServer) -> None:
    session_timeout_ms = 9_000
    with TcpProxy(zookeeper.port) as proxy:
        registry = ZooKeeperRegistry(
            f"127.0.0.1:{proxy.port}/handshake-{uuid.uuid4().hex[:12]}",
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=5_000,
        )
        try:
            registry.start()
            session = registry.kazoo_client.client_id[0]
            proxy.hang_next(2)
            registry.topics()  # a round trip just before: the session has its whole timeout left
            proxy.reset()
            # Two hung handshakes of a third of the session each, then the server: back in time.
            # Waiting out each handshake for the whole session (kazoo's default with one server)
            # comes back only after ZooKeeper expired the session.
            deadline = time.monotonic() + 3 * session_timeout_ms / 1000
            while time.monotonic() < deadline:
                if proxy.hung == 2 and registry.session_state() == "connected":
                    break
                time.sleep(0.05)
            assert proxy.hung == 2, "the client did not connect into the hanging connections"
            assert registry.session_state() == "connected", "the client did not get back"
            assert registry.kazoo_client.client_id[0] == session, "the session expired meanwhile"
            assert registry.topics() == {}
        finally:
            registry.close()
