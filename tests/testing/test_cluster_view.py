"""ClusterView (kctl/testing/cluster_view.py) reads with a deadline: a ZooKeeper that stops answering
(here a proxy in front of the real server that freezes) makes a read fail within the view's timeout
instead of hanging the test that uses it — also a read issued while kazoo reconnects, which kazoo's
blocking calls queue until a server answers, forever if none does."""

from __future__ import annotations

import socket
import threading
import time

from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError

from kctl.testing.cluster_view import ClusterView


class FreezingProxy:
    """Forwards TCP between a client and ``target`` until ``freeze()``; then holds every byte."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frozen = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            while self.frozen.is_set():  # held: the peer sees a live connection that never answers
                time.sleep(0.05)
            try:
                sink.sendall(data)
            except OSError:
                return

    def freeze(self) -> None:
        self.frozen.set()

    def close(self) -> None:
        self.listener.close()


def test_reads_fail_within_the_timeout_when_zookeeper_stops_answering(zookeeper) -> None:  # type: ignore[no-untyped-def]
    host, port = zookeeper.connect_string().split("/")[0].split(",")[0].rsplit(":", 1)
    proxy = FreezingProxy((host, int(port)))
    view = ClusterView(f"127.0.0.1:{proxy.port}", timeout=2.0).start()
    try:
        assert view.controller_id() is None or isinstance(view.controller_id(), int)  # answers now
        proxy.freeze()
        for attempt in ("the read in flight", "a read while the session is reconnecting"):
            outcome: list[BaseException | int | None] = []

            def read(into: list[BaseException | int | None] = outcome) -> None:
                try:
                    into.append(view.controller_id())
                except BaseException as error:
                    into.append(error)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            reader.join(30)  # the test's own deadline: before the fix the second read never returned
            assert outcome, f"{attempt}: still waiting on a ZooKeeper that does not answer"
            assert isinstance(outcome[0], (KazooTimeoutError, ConnectionLoss)), (attempt, outcome)
    finally:
        proxy.frozen.clear()
        view.close()
        proxy.close()
