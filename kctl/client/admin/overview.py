"""Operator views built from several admin calls: the cluster at a glance (``cluster_overview``:
DescribeCluster and Metadata — `kcat -L`, `rpk cluster info`), each partition's offset at a point of
the shared offset grammar (``partition_offsets``: ListOffsets — `kcat -Q`, `kafka-get-offsets.sh`),
and trimming partitions up to a point (``trim_plan`` / ``execute_trim``: ListOffsets, then
DeleteRecords — `kafka-delete-records.sh`, `rpk topic trim-prefix`). A trim target is never
clamped to the end: an absolute offset past a partition's high watermark is refused
(``OffsetPastEndError``) as the broker refuses it (OFFSET_OUT_OF_RANGE); ``end`` deletes everything."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from kctl.client.admin.client import AdminClient
from kctl.client.admin.results import PartitionInfo, TopicDescription
from kctl.client.offsets_spec import AdminLookup, OffsetPoint, resolve_points
from kctl.client.types import BrokerInfo
from kctl.common.topic_partition import TopicPartition

__all__ = [
    "ClusterOverview",
    "PartitionOffsets",
    "PartitionPosition",
    "TrimStep",
    "cluster_overview",
    "execute_trim",
    "log_offsets",
    "partition_document",
    "partition_offsets",
    "trim_plan",
]


# -------------------------------------------------------------------------------- cluster overview


@dataclasses.dataclass(frozen=True)
class ClusterOverview:
    """The cluster id, the controller (-1: none known), the live brokers (sorted by id) and the
    topics with their partitions (sorted by name)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicDescription, ...]

    def document(self) -> dict[str, Any]:
        """The overview as one JSON-ready object."""
        return {
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "brokers": [
                {
                    "broker_id": b.node_id,
                    "endpoint": b.address,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack,
                    "controller": b.node_id == self.controller_id,
                }
                for b in self.brokers
            ],
            "topics": [
                {
                    "topic": t.name,
                    "topic_id": str(t.topic_id) if t.topic_id else None,
                    "internal": t.internal,
                    "partitions": [partition_document(p) for p in t.partitions],
                }
                for t in self.topics
            ],
        }


def partition_document(p: PartitionInfo) -> dict[str, Any]:
    """A partition's leadership as plain data: leader, epoch, replicas, ISR, offline replicas."""
    return {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline_replicas": list(p.offline),
    }


def cluster_overview(
    admin: AdminClient, topics: Sequence[str] | None = None, *, include_internal: bool = False
) -> tuple[ClusterOverview, list[TopicDescription]]:
    """The cluster (DescribeCluster, else Metadata) and its topics (Metadata): every topic (internal
    ones with ``include_internal``), or those named. Returns the overview and the named topics that
    could not be described (errors, e.g. UNKNOWN_TOPIC_OR_PARTITION)."""
    cluster = admin.describe_cluster()
    if topics:
        described = admin.describe_topics(topics)
        found = tuple(t for t in described if t.ok)
        failed = [t for t in described if not t.ok]
    else:
        found = tuple(admin.list_topics(include_internal=include_internal))
        failed = []
    overview = ClusterOverview(cluster.cluster_id, cluster.controller_id, cluster.brokers, found)
    return overview, failed


# -------------------------------------------------------------------------------- offsets


@dataclasses.dataclass(frozen=True)
class PartitionOffsets:
    """A partition's log start offset and high watermark (its earliest and latest offsets)."""

    topic_partition: TopicPartition
    log_start_offset: int
    high_watermark: int


@dataclasses.dataclass(frozen=True)
class PartitionPosition:
    """The offset a point names in one partition, and the timestamp of the record there when the
    point is a time and a record was found (None otherwise: the point is the end)."""

    topic_partition: TopicPartition
    offset: int
    timestamp: int | None = None


def log_offsets(admin: AdminClient, partitions: Iterable[TopicPartition]) -> list[PartitionOffsets]:
    """Each partition's log start offset and high watermark (two ListOffsets rounds), sorted.
    Raises ``BrokerResponseError`` for a partition the leader cannot answer."""
    tps = sorted(set(partitions))
    if not tps:
        return []
    lookup = AdminLookup(admin)
    begin = lookup.beginning_offsets(tps)
    end = lookup.end_offsets(tps)
    return [PartitionOffsets(tp, begin[tp], end[tp]) for tp in tps]


def partition_offsets(
    admin: AdminClient,
    partitions: Iterable[TopicPartition],
    point: OffsetPoint,
    *,
    now_ms: int | None = None,
) -> list[PartitionPosition]:
    """The offset ``point`` (the shared offset grammar) names in each partition, sorted: resolved as
    everywhere in kctl (clamped into [log start, high watermark]; a time with no record at or after
    it is the end). For a time, the timestamp of the record found there (ListOffsets by time)."""
    tps = sorted(set(partitions))
    if not tps:
        return []
    lookup = AdminLookup(admin)
    offsets = resolve_points(point, tps, lookup, now_ms=now_ms)
    timestamps: dict[TopicPartition, int] = {}
    if point.is_time:
        ts = point.timestamp(now_ms)
        for tp, found in lookup.offsets_for_times({tp: max(ts or 0, 0) for tp in tps}).items():
            if found is not None and found.offset == offsets[tp] and found.timestamp >= 0:
                timestamps[tp] = found.timestamp
    return [PartitionPosition(tp, offsets[tp], timestamps.get(tp)) for tp in tps]


# -------------------------------------------------------------------------------- trim


@dataclasses.dataclass(frozen=True)
class TrimStep:
    """Trimming one partition: its log start offset now, the new one (the point; one before the log
    start changes nothing), and, once executed, the log start offset the leader reports or
    Kafka's error name."""

    topic_partition: TopicPartition
    log_start_offset: int
    new_log_start_offset: int
    high_watermark: int
    result_log_start_offset: int | None = None
    error: str | None = None
    error_message: str | None = None

    @property
    def removed(self) -> int:
        """How many offsets fall below the new log start (records, unless compaction left gaps)."""
        return max(self.new_log_start_offset - self.log_start_offset, 0)

    @property
    def changes(self) -> bool:
        return self.removed > 0


def trim_plan(
    admin: AdminClient,
    partitions: Iterable[TopicPartition],
    point: OffsetPoint,
    *,
    now_ms: int | None = None,
) -> list[TrimStep]:
    """What deleting the records below ``point`` would do in each partition (changes nothing).

    Raises ``OffsetPastEndError`` naming every partition whose high watermark lies before an
    absolute offset (``N``, ``+N``) of ``point``: such a target is refused, not clamped to the end.
    ``-N`` beyond the log start and a time before the first record change nothing; a time after
    the last record names the end, as everywhere in the offset grammar."""
    tps = sorted(set(partitions))
    if not tps:
        return []
    logs = {o.topic_partition: o for o in log_offsets(admin, tps)}
    targets = resolve_points(point, tps, AdminLookup(admin), now_ms=now_ms, refuse_past_end=True)
    steps = []
    for tp in tps:
        log = logs[tp]
        new = min(max(targets[tp], log.log_start_offset), log.high_watermark)
        steps.append(TrimStep(tp, log.log_start_offset, new, log.high_watermark))
    return steps


def execute_trim(admin: AdminClient, plan: Sequence[TrimStep]) -> list[TrimStep]:
    """Apply a plan (DeleteRecords for the partitions whose log start moves); the steps come back
    with the leaders' answers. Steps that change nothing are returned as they are."""
    todo = {s.topic_partition: s.new_log_start_offset for s in plan if s.changes}
    results = admin.delete_records(todo) if todo else {}
    done = []
    for step in plan:
        result = results.get(step.topic_partition)
        if result is None:
            done.append(step)
        elif result.ok:
            done.append(dataclasses.replace(step, result_log_start_offset=result.low_watermark))
        else:
            done.append(
                dataclasses.replace(step, error=result.error, error_message=result.error_message)
            )
    return done
