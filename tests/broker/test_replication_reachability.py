"""A follower's reports of leaders it cannot reach (kctl.broker.replication.reachability): made once a
source has been unanswering at two consecutive on-time checks, never on the first look after the
process stood still, withdrawn as soon as it answers again, written to the registry one at a time."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kctl.broker.replication.fetcher import ReplicaFetcherManager
from kctl.broker.replication.reachability import LeaderReachability


class Fetchers:
    """The part of ReplicaFetcherManager the checks use: the sources unanswering right now."""

    def __init__(self) -> None:
        self.unanswering: set[int] = set()
        self.asked: list[float] = []

    def unanswered_sources(self, now: float, longer_than_s: float) -> set[int]:
        self.asked.append(longer_than_s)
        return set(self.unanswering)


class Registry:
    def __init__(self) -> None:
        self.reports: dict[tuple[int, int], bool] = {}
        self.calls: list[tuple[int, int, bool]] = []
        self.fail = False

    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None:
        if self.fail:
            raise OSError("ZooKeeper unreachable")
        self.calls.append((broker_id, leader_id, unreachable))
        self.reports[(broker_id, leader_id)] = unreachable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def checker(fetchers: Fetchers, registry: Registry, clock: Clock) -> LeaderReachability:
    return LeaderReachability(
        2,
        registry,
        lambda: cast(ReplicaFetcherManager, cast(Any, fetchers)),
        unanswered_s=3.0,
        interval_s=1.0,
        clock=clock,
    )


async def settle() -> None:
    for _ in range(20):  # the registry writes run in threads
        await asyncio.sleep(0.01)


def test_a_source_is_reported_after_two_on_time_checks_and_withdrawn_when_it_answers() -> None:
    async def scenario() -> None:
        fetchers, registry, clock = Fetchers(), Registry(), Clock()
        reach = checker(fetchers, registry, clock)
        fetchers.unanswering = {1}
        assert reach.check() == set()  # first sighting: not yet
        clock.now += 1.0
        assert reach.check() == {1}
        await settle()
        assert registry.calls == [(2, 1, True)]
        assert fetchers.asked[-1] == 3.0
        clock.now += 1.0
        assert reach.check() == {1}  # unchanged: no second write
        await settle()
        assert registry.calls == [(2, 1, True)]
        fetchers.unanswering = set()
        clock.now += 1.0
        assert reach.check() == set()
        await settle()
        assert registry.calls == [(2, 1, True), (2, 1, False)]
        assert reach.reported == set()

    asyncio.run(scenario())


def test_no_report_on_the_first_look_after_standing_still() -> None:
    """After a stall every answer that waited unread makes its source look silent: the late check
    reports nothing new, and the source must still be silent at the next on-time check."""

    async def scenario() -> None:
        fetchers, registry, clock = Fetchers(), Registry(), Clock()
        reach = checker(fetchers, registry, clock)
        reach.check()
        fetchers.unanswering = {1, 3}
        clock.now += 1.0
        assert reach.check() == set()  # first sighting
        clock.now += 10.0  # stood still
        assert reach.check() == set()
        fetchers.unanswering = {3}  # 1's answer was only waiting
        clock.now += 1.0
        assert reach.check() == set()  # 3 seen once since the stall
        clock.now += 1.0
        assert reach.check() == {3}
        await settle()
        assert registry.calls == [(2, 3, True)]

    asyncio.run(scenario())


def test_a_failed_registry_write_is_made_again_at_the_next_check() -> None:
    async def scenario() -> None:
        fetchers, registry, clock = Fetchers(), Registry(), Clock()
        reach = checker(fetchers, registry, clock)
        fetchers.unanswering = {1}
        reach.check()
        registry.fail = True
        clock.now += 1.0
        reach.check()
        await settle()
        assert registry.calls == [] and reach.reported == set()
        registry.fail = False
        clock.now += 1.0
        reach.check()
        await settle()
        assert registry.calls == [(2, 1, True)] and reach.reported == {1}
        await reach.close()

    asyncio.run(scenario())


def test_standing_reports_are_written_again_for_a_new_session() -> None:
    async def scenario() -> None:
        fetchers, registry, clock = Fetchers(), Registry(), Clock()
        reach = checker(fetchers, registry, clock)
        fetchers.unanswering = {1}
        for _ in range(12):  # 12 on-time checks: reported at the second, written again 10 s on
            reach.check()
            await settle()
            clock.now += 1.0
        assert registry.calls == [(2, 1, True), (2, 1, True)]

    asyncio.run(scenario())
