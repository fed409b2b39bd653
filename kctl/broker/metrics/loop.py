"""The event loop's health, measured once a second by a task on the loop itself: how late it ran a
callback due at a given time (lag: the loop was busy with something else), and the fraction of the
interval its thread spent on the CPU (``time.thread_time``; the loop does the work of Kafka's
network and request handler threads, so this is their idle ratios' complement). It runs only while
metrics are served."""

from __future__ import annotations

import asyncio
import contextlib
import time

INTERVAL_S = 1.0


class EventLoopMonitor:
    """``busy_ratio`` and ``lag_seconds`` of the last interval; ``start()`` on the loop to measure."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.busy_ratio = 0.0
        self.lag_seconds = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kctl-metrics-loop-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        wall, cpu = time.monotonic(), time.thread_time()
        while True:
            due = time.monotonic() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now, now_cpu = time.monotonic(), time.thread_time()
            self.lag_seconds = max(now - due, 0.0)
            elapsed = now - wall
            if elapsed > 0:
                self.busy_ratio = min(max((now_cpu - cpu) / elapsed, 0.0), 1.0)
            wall, cpu = now, now_cpu
