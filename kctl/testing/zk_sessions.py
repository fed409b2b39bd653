"""Expiring another client's ZooKeeper session from outside, as ZooKeeper allows: open the session
from a second client (the "twin") with its id and password, then close it.

The owner reconnects at once when the twin takes its connection (kctl's clients list each server
more than once, `kctl.zk.zookeeper_session.handshake_hosts`, and kazoo tries the next one without a
pause), and may take the session back before the twin closes it. So the trick is repeated until the
owner shows the session gone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

__all__ = ["expire_session"]


def expire_session(
    hosts: str, client_id: tuple[int, bytes], expired: Callable[[], bool], timeout: float = 30.0
) -> None:
    """Close the session ``client_id`` on ``hosts`` (``host:port,...``, no chroot) until
    ``expired()`` holds; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not expired():
        if time.monotonic() > deadline:
            raise AssertionError(f"the ZooKeeper session {client_id[0]:#x} did not expire")
        twin = KazooClient(hosts=hosts, client_id=client_id)
        try:
            with contextlib.suppress(KazooException, KazooTimeoutError):
                twin.start(timeout=10)
                twin.stop()
        finally:
            twin.close()
        settle = time.monotonic() + 2.0  # the owner hears of the expiry on its next connection
        while not expired() and time.monotonic() < settle:
            time.sleep(0.05)
