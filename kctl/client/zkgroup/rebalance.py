"""The ZooKeeper consumer's rebalancing algorithm (seed 003, "Consumer rebalancing algorithm"), as a
pure function: every consumer of the group computes the same plan from the same registry contents.

For each topic T: sort T's partitions, sort the consumer threads subscribed to T (``<consumer_id>-<n>``
for each of a consumer's streams of T), and give the thread at index i the contiguous range
``i*N .. (i+1)*N - 1`` where N = partitions / threads, the first ``partitions % threads`` threads
taking one more each (Kafka's range assignment). Threads past the partitions get nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kctl.common.topic_partition import TopicPartition
from kctl.zk.consumer_znodes import ConsumerRegistration

__all__ = ["assign_range", "consumer_threads", "plan_assignment"]


def assign_range(partitions: Sequence[int], threads: Sequence[str]) -> dict[str, list[int]]:
    """Each thread's contiguous share of the sorted ``partitions`` (threads sorted first)."""
    ordered_partitions = sorted(partitions)
    ordered_threads = sorted(threads)
    out: dict[str, list[int]] = {t: [] for t in ordered_threads}
    if not ordered_threads:
        return out
    per_thread, extra = divmod(len(ordered_partitions), len(ordered_threads))
    for i, thread in enumerate(ordered_threads):
        start = per_thread * i + min(i, extra)
        count = per_thread + (1 if i < extra else 0)
        out[thread] = ordered_partitions[start : start + count]
    return out


def consumer_threads(consumer_id: str, registration: ConsumerRegistration, topic: str) -> list[str]:
    """The thread ids with which a consumer reads ``topic`` (none if it does not subscribe to it)."""
    return [f"{consumer_id}-{n}" for n in range(registration.streams(topic))]


def plan_assignment(
    consumer_id: str,
    consumers: Mapping[str, ConsumerRegistration],
    topics: Mapping[str, Sequence[int]],
) -> set[TopicPartition]:
    """The partitions ``consumer_id`` owns when the group's consumers are ``consumers`` and the
    topics it subscribes to have ``topics`` (name -> partition ids)."""
    mine: set[TopicPartition] = set()
    me = consumers.get(consumer_id)
    if me is None:
        return mine
    for topic, partitions in sorted(topics.items()):
        my_threads = set(consumer_threads(consumer_id, me, topic))
        if not my_threads:
            continue
        threads = [t for cid, reg in consumers.items() for t in consumer_threads(cid, reg, topic)]
        for thread, share in assign_range(partitions, threads).items():
            if thread in my_threads:
                mine.update(TopicPartition(topic, p) for p in share)
    return mine
