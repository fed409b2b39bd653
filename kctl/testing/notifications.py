"""``Notifications``: a registry listener tests wait on, instead of sleeping, for a change another
process (a broker, ZooKeeper, Kafka's tools) makes."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Notifications:
    """A registry listener recording the reasons it is called with; ``wait_for`` blocks until a
    condition holds, re-checking it after every notification, up to a timeout."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self._condition = threading.Condition()

    def __call__(self, reason: str) -> None:
        with self._condition:
            self.reasons.append(reason)
            self._condition.notify_all()

    def clear(self) -> None:
        with self._condition:
            self.reasons.clear()

    def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0) -> bool:
        """True once ``predicate()`` is true; False if it is still false after ``timeout`` s."""
        with self._condition:
            return bool(self._condition.wait_for(predicate, timeout))

    def wait_for_reason(self, reason: str, timeout: float = 10.0) -> bool:
        return self.wait_for(lambda: reason in self.reasons, timeout)
