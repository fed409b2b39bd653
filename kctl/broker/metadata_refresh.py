"""Registry change notifications turned into metadata refreshes, one at a time, read off the event
loop.

The registry announces changes from its own threads (ZooKeeper watch callbacks, the embedded
registry's writers) through ``notify``. Reasons coalesce: while a refresh is waiting or running,
new reasons join the next one, so a controller writing a thousand partition states makes a handful
of refreshes, not a thousand. Each refresh is the broker's ``refresh`` coroutine, which reads the
registry in a worker thread (``MetadataCache.refresh``: refreshes are serialized there and never
install an older view over a newer one) and then acts on the new view on the event loop. So a
refresh that reads thousands of partition states never stalls the event loop: requests, heartbeats
and replica fetches go on being served meanwhile.

A session change (``SESSION``) is handed to ``on_session_change`` on the event loop as soon as it is
announced, never behind a refresh: fencing a broker that lost its ZooKeeper session must not wait
for a read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable

from kctl.zk.registry import SESSION

__all__ = ["MetadataRefresher"]

log = logging.getLogger("kctl.broker")


class MetadataRefresher:
    """Coalesces registry change reasons and runs ``refresh(*reasons)`` for them, one at a time."""

    def __init__(
        self,
        refresh: Callable[..., Awaitable[None]],
        on_session_change: Callable[[], None],
    ) -> None:
        self._refresh = refresh
        self._on_session_change = on_session_change
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._announced: list[str] = []  # reasons from any thread, not yet taken by the event loop
        self._queued: list[str] = []  # reasons for the next refresh (event loop only)
        self._task: asyncio.Task[None] | None = None
        self.stopped = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start taking notifications (on ``loop``: the broker's event loop)."""
        self._loop = loop

    def notify(self, reason: str) -> None:
        """A registry listener: safe from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed() or self.stopped:
            return
        with self._lock:
            scheduled = bool(self._announced)
            if reason not in self._announced:
                self._announced.append(reason)
        if not scheduled:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._take_announced)

    def _take_announced(self) -> None:
        with self._lock:
            reasons, self._announced = self._announced, []
        if SESSION in reasons:
            self._on_session_change()
        self.queue(*(reason for reason in reasons if reason != SESSION))

    def queue(self, *reasons: str) -> None:
        """Refresh for ``reasons`` (from the event loop): now, or after the refresh under way."""
        if self.stopped or not reasons:
            return
        for reason in reasons:
            if reason not in self._queued:
                self._queued.append(reason)
        if self._task is None or self._task.done():
            assert self._loop is not None
            self._task = self._loop.create_task(self._run(), name="kctl-metadata-refresh")

    async def _run(self) -> None:
        while self._queued and not self.stopped:
            reasons, self._queued = self._queued, []
            try:
                await self._refresh(*reasons)
            except Exception:  # the broker's refresh logs its own failures; this keeps the task alive
                log.exception("metadata refresh (%s) failed", ", ".join(reasons))

    async def idle(self) -> None:
        """Wait until no refresh is queued or under way (tests; the broker's stop)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Take no more notifications; cancel a refresh under way."""
        self.stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
