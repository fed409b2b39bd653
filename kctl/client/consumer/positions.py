"""Where a consumer stands in each assigned partition: the assignment (in order), each partition's
position (the offset of the next record to return), a pending reset (``seek_to_beginning``/``end``,
``auto.offset.reset``), pause, retry backoff, and what its last fetch said of the log (high
watermark, last stable offset, log start offset).

``SubscriptionState`` holds them; ``Consumer`` asks it and keeps the fetched records in step (a seek
or an unassigned partition drops what was fetched for it). Not thread-safe, like the consumer.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

from kctl.client.errors import KafkaError
from kctl.common.topic_partition import TopicPartition

__all__ = ["NoOffsetForPartitionError", "OffsetOutOfRangeError", "PartitionState", "SubscriptionState"]


class OffsetOutOfRangeError(KafkaError):
    """A fetch offset was outside the partition's log and ``auto.offset.reset`` is none.
    ``offsets``: the offending offset of each partition."""

    def __init__(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.offsets = dict(offsets)
        text = ", ".join(f"{tp} at {o}" for tp, o in self.offsets.items())
        super().__init__(f"offsets out of range with no reset policy: {text}")


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position, no committed offset, and ``auto.offset.reset`` is none."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = list(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(f"no position and no reset policy for: {names}")


class PartitionState:
    """One assigned partition's position, pending reset, pause, backoff, log offsets, and the
    preferred read replica its leader named (KIP-392) with when that choice expires."""

    __slots__ = (
        "backoff",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "out_of_range",
        "partial",
        "paused",
        "position",
        "preferred_replica",
        "preferred_until",
        "reset",
        "retry_at",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.paused = False
        self.reset: str | None = None  # "earliest" / "latest" / "auto" (auto.offset.reset) pending
        self.out_of_range: int | None = None  # the fetch offset that got OFFSET_OUT_OF_RANGE
        self.retry_at = 0.0
        self.backoff = 0.0
        self.partial = False  # the last fetch returned only part of a batch
        self.high_watermark: int | None = None
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        self.preferred_replica: int | None = None
        self.preferred_until = 0.0

    def read_replica(self, leader: int, now: float) -> int:
        """The broker to fetch from: the preferred read replica the leader named, until it expires
        (``metadata.max.age.ms`` after it was named, as Kafka's consumer), else the leader."""
        if self.preferred_replica is not None and now < self.preferred_until:
            return self.preferred_replica
        self.preferred_replica = None
        return leader


class SubscriptionState:
    """The assigned partitions: ``order`` (as assigned) and ``states`` (each one's
    ``PartitionState``). Backoffs grow from ``retry_backoff`` to ``retry_backoff_max`` seconds."""

    __slots__ = ("order", "retry_backoff", "retry_backoff_max", "states")

    def __init__(self, retry_backoff: float, retry_backoff_max: float) -> None:
        self.states: dict[TopicPartition, PartitionState] = {}
        self.order: list[TopicPartition] = []
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max

    def assign(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Replace the assignment; partitions that stay keep their state. Returns those dropped."""
        wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        old = self.states
        states = {tp: old.get(tp) or PartitionState() for tp in wanted}
        self.states = states
        self.order = wanted
        return [tp for tp in old if tp not in states]

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition; ``ValueError`` for one that is not assigned."""
        state = self.states.get(TopicPartition(*tp))
        if state is None:
            raise ValueError(f"partition {TopicPartition(*tp)} is not assigned to this consumer")
        return state

    def seek(self, partition: TopicPartition, offset: int) -> TopicPartition:
        """Make ``offset`` the position of ``partition`` (no reset pending any more)."""
        if offset < 0:
            raise ValueError(f"offset must not be negative, got {offset}")
        state = self.state(partition)
        state.position = int(offset)
        state.reset = None
        state.out_of_range = None
        return TopicPartition(*partition)

    def pause(self, partitions: Iterable[TopicPartition], paused: bool = True) -> None:
        for tp in partitions:
            self.state(tp).paused = paused

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.states.items() if s.paused}

    def positions(self) -> dict[TopicPartition, int]:
        """The position of every partition that has one and no reset pending."""
        return {tp: s.position for tp, s in self.states.items() if s.position is not None and s.reset is None}

    def lacking(self) -> list[TopicPartition]:
        """The partitions that need a position (none yet, or a reset pending)."""
        return [tp for tp, s in self.states.items() if s.position is None or s.reset is not None]

    def back_off(self, state: PartitionState, now: float) -> None:
        """Retry the partition (fetch or offset lookup) later, from its leader (any preferred read
        replica is forgotten): the backoff doubles, with jitter."""
        state.preferred_replica = None
        state.backoff = min(max(state.backoff * 2, self.retry_backoff), self.retry_backoff_max)
        state.retry_at = now + state.backoff * random.uniform(0.8, 1.2)

    def next_retry(self, now: float, default: float) -> float:
        """When the earliest backoff of a partition that is not paused ends (``default`` if none)."""
        times = [s.retry_at for s in self.states.values() if s.retry_at > now and not s.paused]
        return min(times) if times else default
