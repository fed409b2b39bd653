"""A follower's reports of the leaders it cannot reach (kctl's own; the controller acts on them).

A leader cut from its followers while it keeps its ZooKeeper session stays leader under Kafka's
rules: its session is alive, so no election happens, and once the followers leave its ISR nothing
can be written with acks=all until the network heals. Here each follower tells the controller
instead: a source broker that has had partitions to give this broker and has not answered its
replica fetcher for ``replica.lag.time.max.ms`` (the time after which the leader drops it from the
ISR) is reported through the registry (``Registry.report_unreachable_leader``), and the report is
withdrawn as soon as the source answers again or this broker no longer fetches from it (standing
reports are written again every ``REASSERT_S``: they are ephemeral znodes of the session). The
controller moves a partition's leadership to a reporting ISR member (or eligible leader replica)
once a majority of the partition's replicas report its leader (``election.unreachable_leader_election``).

A report must be true when it is made, so a process that stood still is not trusted on its first
look afterwards: a source is reported only when it was found unanswering at two consecutive checks,
the second one on time (a check late by more than its interval and a half starts over)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from kctl.broker.replication.fetcher import ReplicaFetcherManager

log = logging.getLogger("kctl.broker.replication")

REASSERT_S = 10.0
"""While reports stand, they are written again this often (a new ZooKeeper session drops them)."""


class ReachabilityRegistry(Protocol):
    """What the reports use of the registry."""

    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None: ...


class LeaderReachability:
    """Checks the replica fetchers every ``interval_s`` and keeps the registry's reports of this
    broker in line with what it found (one registry write in flight at a time)."""

    def __init__(
        self,
        broker_id: int,
        registry: ReachabilityRegistry,
        fetchers: Callable[[], ReplicaFetcherManager | None],
        *,
        unanswered_s: float,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id = broker_id
        self._registry = registry
        self._fetchers = fetchers
        self.unanswered_s = unanswered_s
        self.interval_s = interval_s
        self._clock = clock
        self._last_check: float | None = None
        self._suspects: set[int] = set()  # unanswering at the previous check
        self.reported: set[int] = set()  # what the registry holds for this broker
        self._wanted: set[int] = set()
        self._writer: asyncio.Task[None] | None = None
        self._asserted = clock()  # when the reports were last written anew

    def check(self) -> set[int]:
        """One look at the fetchers (on the event loop): the sources to report from now on."""
        now = self._clock()
        late = self._last_check is not None and now - self._last_check > self.interval_s * 1.5
        self._last_check = now
        fetchers = self._fetchers()
        unanswering = set() if fetchers is None else fetchers.unanswered_sources(now, self.unanswered_s)
        if late:  # this process stood still: answers may wait unread; look again next time
            self._suspects = set()
            wanted = self._wanted & unanswering
        else:
            wanted = unanswering & self._suspects
            self._suspects = unanswering
        self._set(wanted)
        if self._writer is None and wanted and now - self._asserted >= REASSERT_S:
            # a report is an ephemeral znode: a new ZooKeeper session would have lost it
            self._asserted = now
            self.reported -= wanted
        if self._writer is None and self.reported != self._wanted:  # a change, or a failed write
            self._writer = asyncio.get_running_loop().create_task(self._write())
        return wanted

    def _set(self, wanted: set[int]) -> None:
        for leader in sorted(wanted - self._wanted):
            log.warning(
                "broker %d: no answer from broker %d for %.1f s while following it: reported to the "
                "controller as unreachable",
                self.broker_id, leader, self.unanswered_s,
            )  # fmt: skip
        for leader in sorted(self._wanted - wanted):
            log.info("broker %d: broker %d answers again (or is no longer followed)", self.broker_id, leader)
        self._wanted = set(wanted)

    async def _write(self) -> None:
        try:
            while self.reported != self._wanted:
                wanted = set(self._wanted)
                for leader in sorted(wanted ^ self.reported):
                    unreachable = leader in wanted
                    try:
                        await asyncio.to_thread(
                            self._registry.report_unreachable_leader, self.broker_id, leader, unreachable
                        )
                    except Exception as error:  # the next check tries again
                        log.info("could not update the report on broker %d: %s", leader, error)
                        return
                    if unreachable:
                        self.reported.add(leader)
                    else:
                        self.reported.discard(leader)
        finally:
            self._writer = None

    async def close(self) -> None:
        writer = self._writer
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
