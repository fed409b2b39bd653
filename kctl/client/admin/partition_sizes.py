"""Partition sizes on disk at their leaders (DescribeLogDirs to each leader, one round for all of
them): what `kctl topic describe` shows and what `kctl partition reassign` counts as the bytes a
move copies. One definition for both.

A leader that gives no sizes (not in the cluster, not answering, a failed request) is in
``failed`` with its error, and its partitions are left out; a log dir a leader reports offline is
in ``offline_dirs``. The callers say what that means (a warning each, here).

::

    sizes = partition_sizes(admin, [TopicPartition("orders", 0)])
    sizes.sizes                    # {TopicPartition("orders", 0): 1234}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kctl.client.admin.results import LogDirDescription, TopicDescription
from kctl.client.errors import KafkaError
from kctl.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kctl.client.admin.client import AdminClient

__all__ = ["PartitionSizes", "leader_partition_sizes", "leaders_of", "partition_sizes"]


@dataclasses.dataclass
class PartitionSizes:
    """The sizes found (bytes, by partition), the leaders that gave none (leader id -> error, in
    leader order) and the offline log dirs the leaders reported ((leader id, log dir), in order)."""

    sizes: dict[TopicPartition, int] = dataclasses.field(default_factory=dict)
    failed: dict[int, KafkaError] = dataclasses.field(default_factory=dict)
    offline_dirs: list[tuple[int, LogDirDescription]] = dataclasses.field(default_factory=list)


def leaders_of(
    topics: Iterable[TopicDescription], only: Collection[TopicPartition] | None = None
) -> dict[int, list[TopicPartition]]:
    """Leader id -> the partitions it leads, of ``topics`` (those described without error; only the
    partitions in ``only`` when given). Partitions without a leader are left out."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for topic in topics:
        for p in topic.partitions if topic.ok else ():
            tp = TopicPartition(topic.name, p.partition)
            if p.leader >= 0 and (only is None or tp in only):
                by_leader.setdefault(p.leader, []).append(tp)
    return by_leader


def leader_partition_sizes(
    admin: AdminClient, by_leader: Mapping[int, Sequence[TopicPartition]]
) -> PartitionSizes:
    """Each partition's size at its leader, ``by_leader`` saying which partitions each leader leads
    (``leaders_of``). Only a leader's own partitions count (not the followers' copies)."""
    found = PartitionSizes()
    if not by_leader:
        return found
    wanted = [tp for tps in by_leader.values() for tp in tps]
    answers = admin.log_dirs_by_broker(sorted(by_leader), wanted)
    for leader, answer in sorted(answers.items()):
        if answer.error is not None:
            found.failed[leader] = answer.error
            continue
        led = set(by_leader[leader])
        for log_dir in answer.log_dirs:
            if not log_dir.ok:
                found.offline_dirs.append((leader, log_dir))
            for replica in log_dir.replicas:
                if not replica.is_future and replica.topic_partition in led:
                    found.sizes[replica.topic_partition] = replica.size
    return found


def partition_sizes(admin: AdminClient, tps: Collection[TopicPartition]) -> PartitionSizes:
    """The sizes of ``tps`` at their current leaders (found with Metadata). When the log dirs cannot
    be asked at all, every leader is in ``failed`` with that error."""
    by_leader = leaders_of(admin.describe_topics(sorted({tp.topic for tp in tps})), set(tps))
    try:
        return leader_partition_sizes(admin, by_leader)
    except KafkaError as error:
        return PartitionSizes(failed={leader: error for leader in sorted(by_leader)})
