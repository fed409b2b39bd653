"""Noticing that the broker's process stood still (SIGSTOP, a VM paused, a swap storm) before it
answers from what it believed before (issue 24's committed-offsets checker found it): a broker paused
past its ZooKeeper session wakes up with requests already in its sockets and, until kazoo has
reconnected and learned that the session expired, believes it still leads its partitions and
coordinates its groups — a consumer asking it then got committed offsets older than those the new
coordinator had accepted meanwhile.

`StallWatch` ticks every ``TICK_S`` on the event loop with a plain timer callback (``call_later``,
not a task: after a pause, asyncio runs the due timers in the same loop iteration as the socket
reads, while the requests those reads complete run one iteration later), so a stall is seen before
any request that arrived during it is handled. A gap longer than ``threshold_s`` (the broker uses a
third of its ZooKeeper session timeout) calls ``on_stall(gap_s)``: the broker fences itself (no
leading, no coordinating: NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR) and leads again only once a
ZooKeeper round trip proved its session alive and the metadata was read anew."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

TICK_S = 0.25


class StallWatch:
    """Calls ``on_stall(gap_s)`` when the event loop did not run for more than ``threshold_s``."""

    def __init__(self, threshold_s: float, on_stall: Callable[[float], None]) -> None:
        self.threshold_s = threshold_s
        self.on_stall = on_stall
        self.stalls = 0
        self._handle: asyncio.TimerHandle | None = None
        self._last = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        self._handle = loop.call_later(TICK_S, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        gap = now - self._last - TICK_S
        self._last = now
        self._handle = loop.call_later(TICK_S, self._tick)
        if gap > self.threshold_s:
            self.stalls += 1
            self.on_stall(gap)
