"""The network's resource limits, shared by every listener of a broker (kctl.broker.server uses them):

- ``max.connections`` and ``max.connections.per.ip``: a connection over either is closed as soon as
  it is accepted (logged), before anything of it is read;
- ``queued.max.request.bytes``: the bytes of requests received but not yet handled, all connections
  together. A frame's size is reserved from this budget when its 4-byte size arrives (as Kafka's
  memory pool does) and given back once the request is handled; a connection whose next frame does
  not fit stops being read until enough is given back (so a frame never stalls half-received and
  nothing deadlocks). The reservation is accounting only: the frame's buffer grows as its bytes
  arrive, so a size that is announced and never sent costs no memory. A frame is always admitted
  when nothing else is reserved (a budget below ``socket.request.max.bytes`` still lets every frame
  through, one at a time);
- ``connections.max.idle.ms``: a connection that received and sent nothing for that long, and has no
  request in a handler, is closed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

UNBOUNDED = -1


@dataclass
class ConnectionLimits:
    """Counters and budgets of one broker's connections (used on its event loop only)."""

    max_connections: int = 2**31 - 1
    max_per_ip: int = 2**31 - 1
    idle_ms: int = 600_000
    queued_max_bytes: int = UNBOUNDED
    connections: int = 0
    per_ip: Counter[str] = field(default_factory=Counter)
    reserved: int = 0
    #: callbacks of connections waiting for budget, in the order they asked
    _waiting: dict[int, Callable[[], None]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Any) -> ConnectionLimits:
        """From a BrokerConfig (anything answering ``config[name]``)."""
        return cls(
            max_connections=config["max.connections"],
            max_per_ip=config["max.connections.per.ip"],
            idle_ms=config["connections.max.idle.ms"],
            queued_max_bytes=config["queued.max.request.bytes"],
        )

    # -- connection counts -------------------------------------------------------------------------
    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; None when admitted, else why it is refused."""
        if self.connections >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        if self.per_ip[host] >= self.max_per_ip:
            return f"max.connections.per.ip ({self.max_per_ip}) reached for {host}"
        self.connections += 1
        self.per_ip[host] += 1
        return None

    def release(self, host: str) -> None:
        """An admitted connection is gone."""
        self.connections -= 1
        self.per_ip[host] -= 1
        if self.per_ip[host] <= 0:
            del self.per_ip[host]

    # -- the request-bytes budget ------------------------------------------------------------------
    def reserve(self, nbytes: int, *, force: bool = False) -> bool:
        """Take ``nbytes`` from the budget: True when taken (always with ``force``, or when nothing
        is reserved), False when it does not fit (nothing taken)."""
        bound = self.queued_max_bytes
        if force or bound < 0 or self.reserved == 0 or self.reserved + nbytes <= bound:
            self.reserved += nbytes
            return True
        return False

    @property
    def exhausted(self) -> bool:
        return 0 <= self.queued_max_bytes < self.reserved

    def wait(self, key: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` once budget is given back (first asked, first called)."""
        self._waiting[key] = callback

    def forget(self, key: int) -> None:
        self._waiting.pop(key, None)

    def give_back(self, nbytes: int) -> None:
        """Return ``nbytes`` to the budget and wake the connections waiting for it while it lasts."""
        self.reserved -= nbytes
        if not self._waiting or self.exhausted:
            return
        waiting, self._waiting = self._waiting, {}
        for key, callback in waiting.items():
            if self.exhausted:
                self._waiting[key] = callback  # still waiting (a callback that did not fit waits again)
            else:
                callback()
