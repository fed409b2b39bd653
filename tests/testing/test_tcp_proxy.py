"""The TCP proxy fault tests cut links with: it forwards both ways, black-holes a cut link without
resetting it (a partition, not a crash), and closes the black-holed connections when healed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from kctl.testing.tcp_proxy import TcpProxy


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def test_forwards_cuts_and_heals(echo_port: int) -> None:
    with TcpProxy(echo_port) as proxy:
        conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        conn.sendall(b"ping")
        assert conn.recv(4) == b"ping"

        proxy.cut()
        conn.sendall(b"lost")
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):  # silence, not a reset
            conn.recv(4)
        late = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)  # accepted, goes nowhere
        late.sendall(b"void")
        late.settimeout(0.5)
        with pytest.raises(TimeoutError):
            late.recv(4)

        proxy.heal()
        conn.settimeout(5)
        assert conn.recv(4) == b""  # the black-holed connection is closed
        again = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        again.sendall(b"back")
        assert again.recv(4) == b"back"
        for sock in (conn, late, again):
            sock.close()
