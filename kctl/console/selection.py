"""Which topics and partitions the console clients and the load generators work on: checking that a
topic (and partition) exists before producing, selecting topics by name or pattern and their
partitions, and positioning a consumer at the start of each partition's range."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kctl.client import BrokerResponseError, TopicPartition
from kctl.client.cluster import ClusterClient
from kctl.client.consumer import Consumer
from kctl.client.offsets_spec import OffsetRange
from kctl.protocol import ErrorCode


class NotFoundError(LookupError):
    """A topic or partition that was named does not exist (the message says which)."""


def check_topic(cluster: ClusterClient, topic: str, partition: int | None = None) -> None:
    """Raise NotFoundError when the topic does not exist and is not created on demand, or has no
    ``partition``; BrokerResponseError for another error of the topic; client errors when no broker
    answers. A topic whose leader is not elected yet passes."""
    metadata = cluster.refresh_metadata([topic], allow_auto_create=True)
    found = metadata.topic(topic)
    code = found.error_code if found is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise NotFoundError(
            f"topic {topic!r} does not exist (and the broker does not create topics on demand)"
        )
    if code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
        raise BrokerResponseError(code, context=f"topic {topic!r}")
    if (
        found is not None
        and partition is not None
        and found.partitions
        and found.partition(partition) is None
    ):
        count = len(found.partitions)
        raise NotFoundError(f"topic {topic!r} has no partition {partition} (it has {count}: 0-{count - 1})")


def select_topics(cluster: ClusterClient, names: Sequence[str], pattern: re.Pattern[str] | None) -> list[str]:
    """The named topics (each must exist, else NotFoundError) and the non-internal topics whose
    whole name matches `pattern` (at least one must), in that order without duplicates."""
    selected: list[str] = []
    if names:
        metadata = cluster.refresh_metadata(names)
        missing = []
        for name in names:
            topic = metadata.topic(name)
            if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                missing.append(name)
            elif topic.error_code:
                raise BrokerResponseError(topic.error_code, context=f"topic {name!r}")
        if missing:
            listing = ", ".join(repr(n) for n in missing)
            raise NotFoundError(f"topic {listing} does not exist")
        selected += names
    if pattern is not None:
        metadata = cluster.refresh_metadata(None)
        matched = sorted(
            t.name
            for t in metadata.topics.values()
            if not t.is_internal and not t.error_code and pattern.fullmatch(t.name)
        )
        if not matched:
            raise NotFoundError(f"no topic matches --pattern {pattern.pattern!r}")
        selected += [t for t in matched if t not in selected]
    return selected


def select_partitions(
    cluster: ClusterClient, topics: Sequence[str], wanted: Sequence[int]
) -> list[TopicPartition]:
    """Every partition of the topics, or those numbered in `wanted` (each topic must have them,
    else NotFoundError)."""
    partitions: list[TopicPartition] = []
    for name in topics:
        topic = cluster.topic_metadata(name)
        numbers = [p.partition for p in topic.partitions]
        if wanted:
            absent = [p for p in wanted if p not in numbers]
            if absent:
                raise NotFoundError(
                    f"topic {name!r} has no partition {', '.join(map(str, absent))} "
                    f"(it has {len(numbers)}: 0-{len(numbers) - 1})"
                )
            numbers = [p for p in numbers if p in wanted]
        partitions += [TopicPartition(name, p) for p in numbers]
    return partitions


def assign_ranges(consumer: Consumer, ranges: dict[TopicPartition, OffsetRange]) -> None:
    """Assign the partitions and seek each to its range's start. (A consumer group instead
    subscribes; its positions come from the group's committed offsets.)"""
    consumer.assign(list(ranges))
    for tp, offset_range in ranges.items():
        consumer.seek(tp, offset_range.start)
