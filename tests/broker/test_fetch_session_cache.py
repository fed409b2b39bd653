"""The fetch session cache's eviction rules (Kafka's FetchSessionCache), on a clock the test moves:
stale sessions go first, then the least valuable evictable one if the newcomer is worth as much.
(Sessions over the wire: tests/broker/test_fetch_sessions.py.)"""

from __future__ import annotations

import uuid

from kctl.broker.fetch_session import (
    EVICTION_MS,
    CachedPartition,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from kctl.log.naming import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def partitions(count: int) -> list[CachedPartition]:
    return [
        CachedPartition(("t", i), TopicPartition("t", i), uuid.UUID(int=0), 0, -1, 1 << 20)
        for i in range(count)
    ]


def cache_of(slots: int) -> tuple[FetchSessionCache, Clock]:
    clock = Clock()
    return FetchSessionCache(lambda: slots, now_ms=clock), clock


def use(cache: FetchSessionCache, session_id: int) -> None:
    """An incremental fetch on the session (naming nothing): refreshes its last use."""
    session = cache.sessions[session_id]
    context = cache.new_context(session_id, session.epoch, [], [], privileged=False, uses_topic_ids=False)
    assert isinstance(context, FetchContext)


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert [next_epoch(e) for e in (0, 1, 0x7FFFFFFF, -1)] == [1, 2, 1, -1]


def test_a_stale_session_is_evicted_by_anyone() -> None:
    cache, clock = cache_of(1)
    old = cache.maybe_create(True, partitions(50), False)
    clock.ms += EVICTION_MS  # not yet stale
    assert cache.maybe_create(False, partitions(1), False) == 0
    clock.ms += 1
    new = cache.maybe_create(False, partitions(1), False)
    assert new != 0 and list(cache.sessions) == [new] and old not in cache.sessions
    assert cache.evictions == 1


def test_a_follower_evicts_a_consumer_of_any_age_but_not_a_young_follower() -> None:
    cache, clock = cache_of(2)
    consumer = cache.maybe_create(False, partitions(100), False)
    follower = cache.maybe_create(True, partitions(1), False)
    other = cache.maybe_create(True, partitions(1), False)
    assert other != 0 and set(cache.sessions) == {follower, other} and consumer not in cache.sessions
    clock.ms += 10
    assert cache.maybe_create(True, partitions(1000), False) == 0  # followers under 2 minutes old stay


def test_a_consumer_evicts_only_smaller_sessions_that_lived_past_the_eviction_time() -> None:
    cache, clock = cache_of(2)
    small = cache.maybe_create(False, partitions(2), False)
    big = cache.maybe_create(False, partitions(5), False)
    clock.ms += EVICTION_MS // 2
    use(cache, small)
    use(cache, big)
    assert cache.maybe_create(False, partitions(10), False) == 0  # none lived long enough yet
    clock.ms += EVICTION_MS // 2 + 1
    use(cache, small)
    use(cache, big)  # both now used more than 2 minutes after they were opened
    assert cache.maybe_create(False, partitions(1), False) == 0  # smaller than either
    newcomer = cache.maybe_create(False, partitions(3), False)  # bigger than the small one only
    assert newcomer != 0 and set(cache.sessions) == {big, newcomer}


def test_an_old_follower_session_goes_before_an_old_consumer_only_for_a_follower() -> None:
    cache, clock = cache_of(2)
    follower = cache.maybe_create(True, partitions(1), False)
    consumer = cache.maybe_create(False, partitions(50), False)
    clock.ms += EVICTION_MS + 1
    use(cache, follower)
    use(cache, consumer)
    # the least valuable evictable session is the consumer's (a follower's is worth more)
    newcomer = cache.maybe_create(True, partitions(1), False)
    assert set(cache.sessions) == {follower, newcomer}


def test_zero_slots_means_no_sessions() -> None:
    cache, _clock = cache_of(0)
    assert cache.maybe_create(True, partitions(1), False) == 0
    assert len(cache) == 0
