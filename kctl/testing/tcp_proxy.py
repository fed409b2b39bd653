"""A TCP proxy on 127.0.0.1 that a fault test can cut and heal: the network partition of one link
between real processes, on any machine (no network namespaces, no root).

``TcpProxy(target_port).start()`` listens on a port of its own and forwards every connection to
127.0.0.1:``target_port``. ``cut()`` turns the link into a black hole, as a partition looks to both
ends: open connections stay open but carry nothing (bytes are read and dropped, so no sender
blocks), and new connections are accepted but go nowhere; neither end sees a reset. ``heal()``
closes the black-holed connections (their peers reconnect, as after a real partition whose TCP
connections timed out) and forwards new ones again.

    proxy = TcpProxy(zookeeper.port).start()
    broker.properties["zookeeper.connect"] = f"127.0.0.1:{proxy.port}/chroot"
    proxy.cut(); ...; proxy.heal()

``hang_next(n)`` makes the next n connections hang: accepted, then silent until closed, through
`heal` too (a server that takes a connection and never answers it). ``reset()`` closes every open
connection, as a server restart does.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Callable
from types import TracebackType

CHUNK = 64 * 1024
POLL_S = 0.1
"""How often a connection's thread looks at the cut flag while nothing arrives."""


class TcpProxy:
    """Forwards ``listen_host``:``port`` (127.0.0.1 by default) to ``target_host``:``target_port``
    until cut (see the module docstring)."""

    def __init__(
        self, target_port: int, *, target_host: str = "127.0.0.1", listen_host: str = "127.0.0.1"
    ) -> None:
        self.target = (target_host, target_port)
        self.host = listen_host
        self._listener = socket.create_server((listen_host, 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._cut = False
        self._hang = 0
        self.hung = 0  # connections hung by `hang_next` so far
        self._closed = False
        self._links: set[_Link] = set()
        self._acceptor = threading.Thread(target=self._accept, name=f"tcp-proxy-{self.port}", daemon=True)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def is_cut(self) -> bool:
        return self._cut

    def start(self) -> TcpProxy:
        self._acceptor.start()
        return self

    def cut(self) -> None:
        """Black-hole the link: nothing passes in either direction until `heal`."""
        with self._lock:
            self._cut = True
            for link in self._links:
                link.black_hole = True

    def heal(self) -> None:
        """Close the black-holed connections and forward new ones again."""
        with self._lock:
            self._cut = False
            holed = [link for link in self._links if link.black_hole and not link.hung]
        for link in holed:
            link.close()

    def hang_next(self, count: int = 1) -> None:
        """Accept the next ``count`` connections and never forward or close them."""
        with self._lock:
            self._hang += count

    def reset(self) -> None:
        """Close every open connection; new ones are handled as before."""
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links = list(self._links)
        with contextlib.suppress(OSError):
            self._listener.close()
        for link in links:
            link.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream: socket.socket | None = None
            with self._lock:
                hang = self._hang > 0
                if hang:
                    self._hang -= 1
                    self.hung += 1
            if not self._cut and not hang:
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                except OSError:
                    client.close()  # nothing listens there: the client sees a refused connection
                    continue
            link = _Link(client, upstream, self._forget)
            with self._lock:
                if self._closed:
                    link.close()
                    return
                link.black_hole = self._cut or hang
                link.hung = hang
                self._links.add(link)
            link.start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)


class _Link:
    """One proxied connection: a thread moving bytes both ways (or dropping them while black-holed)."""

    def __init__(
        self, client: socket.socket, upstream: socket.socket | None, on_close: Callable[[_Link], None]
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.black_hole = upstream is None
        self.hung = False  # stays black-holed through `TcpProxy.heal`
        self._on_close = on_close
        self._closed = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._pump, name="tcp-proxy-link", daemon=True).start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for sock in (self.client, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()

    def _pump(self) -> None:
        peers = {self.client: self.upstream}
        if self.upstream is not None:
            peers[self.upstream] = self.client
        selector = selectors.DefaultSelector()
        try:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._closed.is_set():
                for key, _ in selector.select(POLL_S):
                    source = key.fileobj
                    assert isinstance(source, socket.socket)
                    data = source.recv(CHUNK)
                    if not data:
                        return  # one end closed: close both
                    peer = peers[source]
                    if not self.black_hole and peer is not None:
                        peer.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            self.close()
            self._on_close(self)
