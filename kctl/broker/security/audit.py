"""The authorizer's log of denials, rate-limited (Kafka's ``kafka.authorizer.logger`` logs every
denial at INFO; a client retrying a denied request would fill the log, so kctl logs a denial once
and then counts).

For each (principal, operation, resource type, resource name) the first denial is logged at once,
in Kafka's words plus the client's address::

    Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on resource =
    Topic:LITERAL:orders for request = Produce (client 127.0.0.1:51234)

Further denials of the same key are counted, and the count is logged at most once per ``interval``
(60 s), when the next denial comes or when ``flush`` (the broker calls it every few seconds) finds
the interval over::

    Principal = User:alice was Denied Operation = Write on resource = Topic:LITERAL:orders 41 more
    time(s) in the last 60 s (last from client 127.0.0.1:51240, request = Produce)

A key quiet for a whole interval is forgotten, so its next denial is logged in full again; at most
``max_keys`` keys are remembered (the oldest are dropped, with their counts logged)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("kctl.broker.authorizer")

DenialKey = tuple[str, str, str, str]
"""(principal, operation, resource type, resource name), as Kafka spells them (``User:alice``,
``Write``, ``Topic``, ``orders``). A request names a resource literally, hence ``LITERAL`` in the
lines, as Kafka's."""


@dataclass
class _Seen:
    logged_at: float
    suppressed: int = 0
    last_client: str = ""
    last_request: str = ""


class DenialLog:
    """Rate-limited INFO lines about denied authorizations (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger = log,
        *,
        interval: float = 60.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[DenialKey, _Seen] = {}

    def denied(
        self,
        principal: str,
        operation: str,
        resource_type: str,
        resource_name: str,
        *,
        host: str,
        port: int,
        request: str,
    ) -> None:
        """One denial: logged if it is the first of its key (in the last interval), else counted."""
        key = (principal, operation, resource_type, resource_name)
        client = f"{host}:{port}"
        now = self.clock()
        lines: list[str] = []
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= self.max_keys:
                    oldest = next(iter(self._seen))
                    lines += self._count_line(oldest, self._seen.pop(oldest), now)
                self._seen[key] = _Seen(now, 0, client, request)
                lines.append(
                    f"Principal = {principal} is Denied Operation = {operation} from host = {host} on "
                    f"resource = {resource_type}:LITERAL:{resource_name} for request = {request} "
                    f"(client {client})"
                )
            else:
                seen.suppressed += 1
                seen.last_client, seen.last_request = client, request
                if now - seen.logged_at >= self.interval:
                    lines += self._count_line(key, seen, now)
                    seen.logged_at, seen.suppressed = now, 0
        for line in lines:
            self.logger.info("%s", line)

    def flush(self) -> None:
        """Log the counts whose interval is over; forget the keys that stayed quiet a whole interval."""
        now = self.clock()
        lines: list[str] = []
        with self._lock:
            for key, seen in list(self._seen.items()):
                if now - seen.logged_at < self.interval:
                    continue
                if seen.suppressed:
                    lines += self._count_line(key, seen, now)
                    seen.logged_at, seen.suppressed = now, 0
                else:
                    del self._seen[key]
        for line in lines:
            self.logger.info("%s", line)

    def _count_line(self, key: DenialKey, seen: _Seen, now: float) -> list[str]:
        if not seen.suppressed:
            return []
        principal, operation, resource_type, resource_name = key
        return [
            f"Principal = {principal} was Denied Operation = {operation} on resource = "
            f"{resource_type}:LITERAL:{resource_name} {seen.suppressed} more time(s) in the last "
            f"{now - seen.logged_at:.0f} s (last from client {seen.last_client}, "
            f"request = {seen.last_request})"
        ]
