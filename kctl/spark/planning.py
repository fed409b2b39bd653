"""Offset planning for the Spark data source, with ``kctl.client``: which partitions a query reads,
the offsets its bounds resolve to, and the offset ranges its tasks read.

``OffsetRange`` is one task's work: ``[from_offset, until_offset)`` of one partition. Planning
follows Spark's Kafka source: one range per partition, and with ``minPartitions`` larger than the
number of partitions, large ranges are split into several (each partition gets a share of the
tasks in proportion to its size, at least one), so a job gets at least that many tasks.
``limit_ranges`` spreads ``maxOffsetsPerTrigger`` over the partitions in proportion to their
backlog, as Spark's ``rateLimit`` does.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.client import (
    BrokerResponseError,
    ClusterClient,
    Consumer,
    ConsumerConfig,
    TopicPartition,
)
from kctl.protocol import ErrorCode
from kctl.spark.options import EARLIEST, LATEST, OffsetBound, SourceOptionError, SourceOptions

__all__ = [
    "OffsetRange",
    "consumer_config",
    "limit_offsets",
    "plan_ranges",
    "resolve_bound",
    "subscribed_partitions",
]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """The records ``[from_offset, until_offset)`` of one partition: one Spark task's work."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(self.until_offset - self.from_offset, 0)


def consumer_config(options: SourceOptions, **overrides: Any) -> ConsumerConfig:
    """A ``ConsumerConfig`` from the ``kafka.``-prefixed options (properties a consumer does not know,
    e.g. a producer's ``acks``, are left out, as Kafka's clients ignore them)."""
    known = ConsumerConfig.known_keys()
    properties = {k: v for k, v in options.client_properties.items() if k in known}
    properties.setdefault("auto.offset.reset", "none")
    return ConsumerConfig.coerce(properties, **overrides)


def subscribed_partitions(cluster: ClusterClient, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription names now, sorted. ``subscribe`` of a topic that does not
    exist raises ``BrokerResponseError`` (UNKNOWN_TOPIC_OR_PARTITION); a pattern may match none."""
    if options.assign:
        return sorted(set(options.assign))
    if options.subscribe_pattern is not None:
        metadata = cluster.retry(lambda: cluster.refresh_metadata(None))
        names = [
            name
            for name, topic in metadata.topics.items()
            if not topic.is_internal and re.fullmatch(options.subscribe_pattern or "", name)
        ]
    else:
        names = list(options.subscribe)
        metadata = cluster.retry(lambda: cluster.refresh_metadata(names))
    found: list[TopicPartition] = []
    for name in names:
        topic = metadata.topic(name)
        if topic is None or topic.error_code:
            code = topic.error_code if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise BrokerResponseError(code, context=f"topic {name!r}")
        found += [TopicPartition(name, p.partition) for p in topic.partitions]
    return sorted(found)


def resolve_bound(
    consumer: Consumer, partitions: Iterable[TopicPartition], bound: OffsetBound
) -> dict[TopicPartition, int]:
    """The offset ``bound`` stands for in each partition, looked up with ListOffsets. Explicit offsets
    must name every partition of the subscription (Spark's rule), -2/-1 meaning earliest/latest. A
    timestamp with no record at or after it resolves to the end offset (Spark's ``latest`` strategy
    for ``startingOffsetsByTimestampStrategy``... here always)."""
    tps = list(partitions)
    if not tps:
        return {}
    if bound.kind == "earliest":
        return consumer.beginning_offsets(tps)
    if bound.kind == "latest":
        return consumer.end_offsets(tps)
    if bound.kind == "timestamp":
        if bound.timestamp is not None:
            stamps = dict.fromkeys(tps, bound.timestamp)
        else:
            missing = [tp for tp in tps if tp not in bound.timestamps]
            if missing:
                raise SourceOptionError(f"startingOffsetsByTimestamp has no timestamp for {missing[0]}")
            stamps = {tp: bound.timestamps[tp] for tp in tps}
        found = consumer.offsets_for_times(stamps)
        ends = consumer.end_offsets([tp for tp, at in found.items() if at is None])
        return {tp: (at.offset if at is not None else ends[tp]) for tp, at in found.items()}
    missing = [tp for tp in tps if tp not in bound.offsets]
    if missing:
        raise SourceOptionError(f"the per-partition offsets have no offset for {missing[0]}")
    wanted = {tp: bound.offsets[tp] for tp in tps}
    earliest = consumer.beginning_offsets([tp for tp, o in wanted.items() if o == EARLIEST])
    latest = consumer.end_offsets([tp for tp, o in wanted.items() if o == LATEST])
    return {tp: earliest.get(tp, latest.get(tp, offset)) for tp, offset in wanted.items()}


def plan_ranges(
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """One range per partition from its start to its end (empty ones left out), split so there are
    at least ``min_partitions`` when that is more than the number of ranges."""
    ranges = [
        OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp])
        for tp in sorted(starts)
        if tp in ends and ends[tp] > starts[tp]
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    split: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, math.ceil(min_partitions * r.size / total)))
        step = r.size / parts
        bounds = [r.from_offset + round(i * step) for i in range(parts)] + [r.until_offset]
        split += [
            OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
    return split


def limit_offsets(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], max_records: int
) -> dict[TopicPartition, int]:
    """The end offsets of a micro-batch of at most ``max_records`` records (about: each partition
    gets a share in proportion to its backlog, at least one record while it has any)."""
    backlog = {tp: max(ends[tp] - starts.get(tp, ends[tp]), 0) for tp in ends}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(ends)
    limited: dict[TopicPartition, int] = {}
    for tp, end in ends.items():
        start = starts.get(tp, end)
        if backlog[tp] == 0:
            limited[tp] = end
            continue
        share = max(1, math.floor(max_records * backlog[tp] / total))
        limited[tp] = min(end, start + share)
    return limited

