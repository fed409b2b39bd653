"""Fetch sessions (KIP-227): the broker's cache of incremental fetch sessions, and the fetch context
that tells one Fetch request which partitions to read and which of them its response carries.

A Fetch (v7+) names a session id and epoch. Epoch -1 (final) or 0 (initial) is a full request: any
session it names is closed; with epoch 0 the broker then tries to open a new session holding the
request's partitions (the response's ``session_id``, 0 when no slot is free), with -1 it answers
without one (a sessionless fetch, as every fetch before v7). Epoch > 0 is an incremental request on
an open session: an unknown id is FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's is
INVALID_FETCH_SESSION_EPOCH, a session opened with topic names used with topic ids (v13+) or the
other way round FETCH_SESSION_TOPIC_ID_ERROR; otherwise the partitions it names are added to the
session or update their fetch offset, leader epoch and maximum bytes, those in
``forgotten_topics_data`` leave it, and the session's epoch advances (wrapping from 2^31-1 to 1).
A session left empty is closed and the request answered without a session. An incremental response
carries only the partitions with something new for the fetcher: records, a high watermark, last
stable offset or log start offset other than the one it was last sent, or an error (after which the
partition is sent again once the error goes); partitions that returned records move to the end of
the session, so that a response bounded by ``max_bytes`` serves the others first next time.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. When it is full, a
new session takes the slot of one unused for 2 minutes (Kafka's eviction time); failing that, of the
least valuable session a newcomer may evict — ordered by (from a follower, number of partitions,
id), lowest first — if the newcomer is worth at least as much: a consumer may evict only sessions
created more than 2 minutes before their last use, a follower also any consumer's session. Else the
newcomer gets no session (session id 0) and its fetches stay full ones."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from uuid import UUID

from kctl.log.naming import TopicPartition
from kctl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kctl.broker.idle_followers import IdleFollower

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
"""A session unused this long may be evicted by any newcomer (Kafka's minimum eviction time)."""
MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """The session epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


class CachedPartition:
    """One partition of a fetch: what the fetcher asked for (topic, fetch offset, leader epoch,
    maximum bytes, a follower's log start offset) and, in a session, the offsets it was last sent
    (-1: not yet, or an error)."""

    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "fetcher_log_start_offset",
        "high_watermark",
        "idle",
        "key",
        "last_stable_offset",
        "log_start_offset",
        "max_bytes",
        "topic_id",
        "topic_partition",
    )

    def __init__(
        self,
        key: tuple[object, int],
        topic_partition: TopicPartition | None,
        topic_id: UUID,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        fetcher_log_start_offset: int = -1,
    ) -> None:
        self.key = key  # (topic name or topic id, partition index): how requests name it
        self.topic_partition = topic_partition  # None: a topic id this broker does not know
        self.topic_id = topic_id  # as the request gave it (v13+: how it names the topic)
        self.fetch_offset = fetch_offset
        self.current_leader_epoch = current_leader_epoch
        self.max_bytes = max_bytes
        self.fetcher_log_start_offset = fetcher_log_start_offset  # a follower's (Fetch v5+)
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        # a follower's session: the partition as its last read found it idle (kctl.broker.idle_followers)
        self.idle: IdleFollower | None = None

    def changed(
        self,
        error_code: int,
        records_size: int,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
        preferred_read_replica: int = -1,
    ) -> bool:
        """Whether an incremental response must carry this partition (always when it names a
        preferred read replica, KIP-392); records what it carries."""
        if error_code or preferred_read_replica >= 0:
            self.high_watermark = -1  # sent again once the error is gone
            return True
        must = records_size > 0
        if high_watermark != self.high_watermark:
            self.high_watermark = high_watermark
            must = True
        if last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = last_stable_offset
            must = True
        if log_start_offset != self.log_start_offset:
            self.log_start_offset = log_start_offset
            must = True
        return must


class FetchSession:
    """An open session: its partitions in fetch order and its bookkeeping."""

    __slots__ = ("creation_ms", "epoch", "id", "last_used_ms", "partitions", "privileged", "uses_topic_ids")

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[tuple[object, int], CachedPartition],
        uses_topic_ids: bool,
        now_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged  # opened by a follower
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def eviction_key(self) -> tuple[bool, int, int]:
        return (self.privileged, len(self.partitions), self.id)


class FetchContext:
    """What one Fetch reads (``partitions``, in order) and how its response is chosen: every
    partition for a full or sessionless fetch, the changed ones for an incremental one."""

    __slots__ = ("_cache", "_privileged", "_uses_topic_ids", "create", "partitions", "session")

    def __init__(
        self,
        partitions: list[CachedPartition],
        *,
        session: FetchSession | None = None,
        create: FetchSessionCache | None = None,
        privileged: bool = False,
        uses_topic_ids: bool = False,
    ) -> None:
        self.partitions = partitions
        self.session = session
        self.create = create  # a full fetch with epoch 0: the cache to open a session in
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    @property
    def incremental(self) -> bool:
        return self.session is not None

    def session_id(self) -> int:
        """The response's session id: the open session's, or a new one for a full fetch at epoch 0
        (0 if the cache has no slot for it), else 0. Call once, when the response is made."""
        if self.session is not None:
            return self.session.id
        if self.create is not None:
            return self.create.maybe_create(self._privileged, self.partitions, self._uses_topic_ids)
        return INVALID_SESSION_ID

    def moved_to_end(self, sent_records: Iterable[CachedPartition]) -> None:
        """Partitions that returned records go to the end of the session (fairness under max_bytes)."""
        session = self.session
        if session is None:
            return
        partitions = session.partitions
        for cached in sent_records:
            if partitions.get(cached.key) is cached:
                del partitions[cached.key]
                partitions[cached.key] = cached


class FetchSessionCache:
    """The broker's fetch sessions, at most ``max_slots()`` of them."""

    def __init__(
        self,
        max_slots: Callable[[], int],
        *,
        eviction_ms: int = EVICTION_MS,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self._max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._now_ms = now_ms or (lambda: int(time.monotonic() * 1000))
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: list[CachedPartition],
        forgotten: list[tuple[object, int]],
        *,
        privileged: bool,
        uses_topic_ids: bool,
    ) -> FetchContext | int:
        """The context of a Fetch v7+ with these session fields, or the error code to answer with."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            return FetchContext(partitions, create=self, privileged=privileged, uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        cached = session.partitions
        for wanted in partitions:
            known = cached.get(wanted.key)
            if known is None:
                cached[wanted.key] = wanted
            else:
                known.fetch_offset = wanted.fetch_offset
                known.current_leader_epoch = wanted.current_leader_epoch
                known.max_bytes = wanted.max_bytes
                known.fetcher_log_start_offset = wanted.fetcher_log_start_offset
                known.idle = None  # named again: read in full
        for key in forgotten:
            cached.pop(key, None)
        if not cached:
            del self.sessions[session.id]
            return FetchContext([])
        session.last_used_ms = self._now_ms()
        session.epoch = next_epoch(session.epoch)
        return FetchContext(list(cached.values()), session=session)

    def maybe_create(self, privileged: bool, partitions: list[CachedPartition], uses_topic_ids: bool) -> int:
        """Open a session holding ``partitions`` (as just sent in full) if there is a slot, evicting by
        Kafka's rules when the cache is full; its id, or 0 when none was opened."""
        now = self._now_ms()
        if len(self.sessions) >= self._max_slots() and not self._evict_for(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        cached = {p.key: p for p in partitions}
        self.sessions[session_id] = FetchSession(session_id, privileged, cached, uses_topic_ids, now)
        return session_id

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions or self._max_slots() <= 0:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        # evictable: by anyone once it lived past the eviction time (as of its last use); by a
        # follower also any consumer's session
        candidates = [
            s
            for s in self.sessions.values()
            if s.last_used_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        weakest = min(candidates, key=FetchSession.eviction_key)
        if (privileged, size, 0) < weakest.eviction_key():
            return False
        self._evict(weakest)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        self.evictions += 1

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, MAX_EPOCH)
            if session_id not in self.sessions:
                return session_id
