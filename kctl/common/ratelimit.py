"""Rate-limited logging for conditions that repeat, so that a fault lasting an hour costs a handful
of lines rather than one per retry.

- `RepeatedFailures`: per key (a peer, a partition), the first failure is logged at WARNING; while
  the failures go on, at most one summary line per ``interval_s`` ("still cannot reach broker 2 at
  host:port: 57 failures in the last 60 s (last: ...)"); and one INFO line when it works again
  ("broker 2 at host:port reachable again after 312 failures in 311 s"). For code that knows both
  when something fails and when it succeeds (the replica fetcher's connections).
- `RateLimitFilter`: a `logging.Filter` for a handler, for libraries whose retries log a line each
  (kazoo's "Connection dropped" every second while ZooKeeper is down): per logger and message
  template, the first record passes, then at most one per ``interval_s``, carrying how many were
  held back since the last one.

Both take a ``clock`` (seconds, monotonic) so that tests can drive time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["DEFAULT_INTERVAL_S", "RateLimitFilter", "RepeatedFailures"]

DEFAULT_INTERVAL_S = 60.0

Clock = Callable[[], float]


@dataclass(slots=True)
class _Failing:
    first_at: float
    logged_at: float
    total: int = 1
    since_logged: int = 0


class RepeatedFailures:
    """The log lines of failures that repeat, per key (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        level: int = logging.WARNING,
        clock: Clock = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.level = level
        self.clock = clock
        self._failing: dict[Hashable, _Failing] = {}
        self._lock = threading.Lock()

    def failing(self, key: Hashable) -> bool:
        return key in self._failing

    def failed(self, key: Hashable, what: str, error: object = "") -> bool:
        """One failure of ``key``; ``what`` says what fails ("cannot reach broker 2 at h:p"),
        ``error`` why this time. Returns whether a line was logged."""
        now = self.clock()
        detail = f": {error}" if str(error) else ""
        with self._lock:
            state = self._failing.get(key)
            if state is None:
                self._failing[key] = _Failing(first_at=now, logged_at=now)
                message = f"{what}{detail}"
            else:
                state.total += 1
                state.since_logged += 1
                if now - state.logged_at < self.interval_s:
                    return False
                count = f"{state.since_logged} failure{'s' if state.since_logged != 1 else ''}"
                last = f" (last{detail})" if detail else ""
                message = f"still {what}: {count} in the last {now - state.logged_at:.0f} s{last}"
                state.logged_at, state.since_logged = now, 0
        self.logger.log(self.level, "%s", message)
        return True

    def recovered(self, key: Hashable, what: str) -> bool:
        """``key`` works again; ``what`` says so ("broker 2 at h:p reachable"). Logs one INFO line
        if it was failing; returns whether it was."""
        if key not in self._failing:  # the common case, without the lock
            return False
        with self._lock:
            state = self._failing.pop(key, None)
        if state is None:
            return False
        took = self.clock() - state.first_at
        self.logger.info(
            "%s again after %d failure%s in %.0f s", what, state.total, "s" if state.total != 1 else "", took
        )
        return True


class RateLimitFilter(logging.Filter):
    """Per (logger name, message template) of the loggers under ``prefixes``: the first record
    passes, then at most one per ``interval_s``, with "(N similar lines held back in the last S s)"
    appended. Records of other loggers pass untouched."""

    def __init__(
        self,
        prefixes: tuple[str, ...],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__()
        self.prefixes = prefixes
        self.interval_s = interval_s
        self.clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # -> (last passed at, held back since)
        self._lock = threading.Lock()

    def _covers(self, name: str) -> bool:
        return any(name == prefix or name.startswith(prefix + ".") for prefix in self.prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._covers(record.name):
            return True
        key = (record.name, str(record.msg))
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval_s:
                self._seen[key] = (seen[0], seen[1] + 1)
                return False
            self._seen[key] = (now, 0)
        if seen is not None and seen[1]:
            held = f"{seen[1]} similar line{'s' if seen[1] != 1 else ''}"
            record.msg = f"{record.msg} ({held} held back in the last {now - seen[0]:.0f} s)"
        return True
