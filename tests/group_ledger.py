"""The ledger of the consumer-group tests (split from group_clients): what every member reports —
who owns which partition right now, every record each member consumed, every error a client
reported — and a timeline for failure messages; waits block on its condition variable with a
deadline. `_StdoutLedger` is a child-process member's: each report a JSON line on stdout."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

TIMEOUT = 20.0

Key = tuple[int, int]  # (partition, offset)


class GroupTestFailure(AssertionError):
    """A wait timed out or a member misbehaved; the message carries the ledger's timeline."""


# ------------------------------------------------------------------------------------------- ledger


class Ledger:
    """Ownership and consumption of one topic's partitions by the members of one group.

    Members whose rebalance callbacks run before they rejoin (threads in this process) are *checked*:
    a partition assigned to one of them while another checked member still owns it is recorded as a
    violation. Members in child processes report through a pipe, so they are not checked."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = frozenset(range(partitions))
        self.cond = threading.Condition()
        self.owned: dict[str, set[int]] = {}
        self.unchecked: set[str] = set()
        self.records: dict[str, list[tuple[int, int, bytes | None]]] = {}
        self.consumers: dict[Key, list[str]] = {}
        self.client_logs: dict[str, deque[str]] = {}
        """member -> the last lines of its client's own debug log (librdkafka's cgrp and topic)."""
        """(partition, offset) -> "member@seconds" for each delivery (who read a duplicate, when)."""
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.timeline: list[str] = []
        self.revocations: Counter[str] = Counter()
        self.assignments: Counter[str] = Counter()
        self.t0 = time.monotonic()

    # -- reports from members ------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.t0:7.3f}s {text}")

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        new = set(partitions)
        with self.cond:
            self._note(f"{member} assigned {sorted(new)}")
            self.assignments[member] += 1
            if member not in self.unchecked:
                for other, theirs in self.owned.items():
                    clash = theirs & new
                    if other != member and other not in self.unchecked and clash:
                        self.violations.append(
                            f"{member} was assigned {sorted(clash)} while {other} still owned them"
                        )
            self.owned.setdefault(member, set()).update(new)
            self.cond.notify_all()

    def revoked(self, member: str, partitions: Iterable[int], how: str = "revoked") -> None:
        gone = set(partitions)
        with self.cond:
            self._note(f"{member} {how} {sorted(gone)}")
            self.revocations[member] += 1
            self.owned.setdefault(member, set()).difference_update(gone)
            self.cond.notify_all()

    def forget(self, member: str, why: str) -> None:
        """The member stopped consuming (closed or killed): it owns nothing any more."""
        with self.cond:
            self._note(f"{member} {why}; it owned {sorted(self.owned.get(member, ()))}")
            self.owned.pop(member, None)
            self.cond.notify_all()

    def record(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        with self.cond:
            self.records.setdefault(member, []).append((partition, offset, value))
            when = f"{member}@{time.monotonic() - self.t0:.3f}s"
            self.consumers.setdefault((partition, offset), []).append(when)
            self.cond.notify_all()

    def error(self, member: str, text: str) -> None:
        with self.cond:
            self._note(f"{member} ERROR {text}")
            self.errors.append(f"{member}: {text}")
            self.cond.notify_all()

    def note(self, text: str) -> None:
        with self.cond:
            self._note(text)

    # -- views ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, frozenset[int]]:
        with self.cond:
            return {m: frozenset(p) for m, p in self.owned.items()}

    def consumed(self) -> Counter[Key]:
        """How many times each (partition, offset) was consumed, over all members."""
        with self.cond:
            return Counter((p, o) for records in self.records.values() for p, o, _ in records)

    def consumed_by(self, member: str) -> list[tuple[int, int, bytes | None]]:
        with self.cond:
            return list(self.records.get(member, []))

    def deliveries(self, keys: Iterable[Key]) -> str:
        """Who consumed each of ``keys`` and when, and what those members' clients logged about
        those partitions (for a failure message)."""
        keys = list(keys)
        with self.cond:
            lines = [f"{key}: {', '.join(self.consumers.get(key, []))}" for key in keys]
            partitions = {f"[{p}]" for p, _ in keys}
            readers = {who.split("@")[0] for key in keys for who in self.consumers.get(key, [])}
            for member in sorted(readers):
                logged = [
                    line
                    for line in self.client_logs.get(member, ())
                    if any(p in line for p in partitions) and " DUMP" not in line
                ]
                lines += [f"{member}'s client log about {sorted(partitions)}:", *logged[-40:]]
        return "\n  ".join(lines)

    def client_log(self, member: str) -> logging.Logger:
        """A logger for ``member``'s client whose lines (timed like the timeline) the ledger keeps."""
        kept = self.client_logs.setdefault(member, deque(maxlen=2000))
        ledger = self

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                kept.append(f"{time.monotonic() - ledger.t0:7.3f}s {record.getMessage()}")

        logger = logging.getLogger(f"group-clients.{self.topic}.{member}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(Keep())
        return logger

    def values(self) -> dict[Key, bytes | None]:
        with self.cond:
            return {(p, o): v for records in self.records.values() for p, o, v in records}

    def report(self) -> str:
        with self.cond:
            lines = [*self.timeline[-60:]]
            owned = {m: sorted(p) for m, p in self.owned.items()}
        return f"ownership now: {owned}\ntimeline:\n  " + "\n  ".join(lines)

    # -- waits ---------------------------------------------------------------------------------
    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Block until ``predicate()`` (called under the lock) holds; returns the monotonic time it
        became true. Raises GroupTestFailure with the timeline after ``timeout`` seconds."""
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise GroupTestFailure(
                    f"timed out after {timeout:g}s waiting for {what}\nerrors: {self.errors}\n{self.report()}"
                )
            return time.monotonic()

    def settled(self, members: Iterable[str], *, balanced: bool = True) -> bool:
        """Exactly ``members`` own partitions, every partition has exactly one owner, and (balanced)
        each member owns len(partitions)/len(members) of them (rounded either way). Call under lock."""
        names = set(members)
        owners = {m: p for m, p in self.owned.items() if p}
        if set(owners) != names:
            return False
        everything: list[int] = [p for parts in owners.values() for p in parts]
        if len(everything) != len(set(everything)) or set(everything) != self.partitions:
            return False
        if balanced:
            low = len(self.partitions) // len(names)
            high = -(-len(self.partitions) // len(names))
            return all(low <= len(p) <= high for p in owners.values())
        return True

    def wait_settled(
        self, members: Iterable[str], timeout: float = TIMEOUT, *, balanced: bool = True
    ) -> float:
        names = sorted(members)
        return self.wait(
            lambda: self.settled(names, balanced=balanced), timeout, f"the group to settle on {names}"
        )

    def wait_consumed(self, keys: Iterable[Key], timeout: float = TIMEOUT) -> float:
        wanted = set(keys)

        def done() -> bool:
            seen = {(p, o) for records in self.records.values() for p, o, _ in records}
            return wanted <= seen

        return self.wait(done, timeout, f"{len(wanted)} produced records to be consumed")



class _StdoutLedger(Ledger):
    """The child's ledger: every report becomes a JSON line on stdout."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic, 0)
        self.out_lock = threading.Lock()

    def _emit(self, **event: Any) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        self._emit(event="assign", partitions=sorted(partitions))

    def revoked(self, member: str, partitions: Iterable[int], how: str = "revoked") -> None:
        self._emit(event="lost" if how == "lost" else "revoke", partitions=sorted(partitions))

    def record(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        text = None if value is None else value.decode("latin-1")
        self._emit(event="record", partition=partition, offset=offset, value=text)

    def error(self, member: str, text: str) -> None:
        self._emit(event="error", text=text)

    def forget(self, member: str, why: str) -> None:
        self._emit(event=why.replace(" ", "-"))


