"""The ListOffsets lookup: the earliest (log start), latest (high watermark), max-timestamp or
first-at-a-time offset of partitions, asked of each partition's leader over a ``ClusterClient``.

::

    results = list_offsets(cluster, [TopicPartition("orders", 0)], "earliest")
    results = list_offsets(cluster, {TopicPartition("orders", 0): 1_700_000_000_000})  # per partition
    results[TopicPartition("orders", 0)].offset

The consumer positions its partitions with it (``seek_to_beginning``, ``end_offsets``,
``offsets_for_times``, ``auto.offset.reset``); it needs nothing but a ``ClusterClient``, so the admin
client answers its own ``list_offsets`` with it too. One request per leader, all sent before any
answer is read; partitions that fail with a retriable error (a leader that moved, a lost connection,
...) are asked again after a backoff (``retry.backoff.ms``, doubling to ``retry.backoff.max.ms``) with
fresh metadata, until the deadline (``kctl.client.leader_requests``); the result of each partition is
its offset or its last error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.leader_requests import Outcome, per_leader
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, error_name
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "OFFSET_SPECS",
    "ListOffsetsSpec",
    "OffsetResult",
    "list_offsets",
    "offset_timestamp",
]

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
OFFSET_SPECS: dict[str, int] = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}
"""The named ``list_offsets`` specs and the timestamps Kafka's ListOffsets uses for them."""

ListOffsetsSpec = str | int
"""``"earliest"``, ``"latest"``, ``"max-timestamp"`` or a timestamp in ms (first offset at or after it)."""


@dataclasses.dataclass(frozen=True)
class OffsetResult:
    """ListOffsets for one partition: ``offset`` (-1 when none), the record's ``timestamp`` (-1 when
    not applicable), the leader epoch; or an error."""

    topic_partition: TopicPartition
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error_code: int = 0
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == 0

    @property
    def error(self) -> str | None:
        """Kafka's name of the error (``NOT_LEADER_OR_FOLLOWER``), None when it succeeded."""
        return error_name(self.error_code) if self.error_code else None


def offset_timestamp(spec: ListOffsetsSpec) -> int:
    """The timestamp ListOffsets asks for ``spec``: -2 (earliest), -1 (latest), -3 (max-timestamp),
    or a timestamp in ms. Raises ``ValueError`` for anything else."""
    if isinstance(spec, bool):
        raise ValueError(f"bad offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0 and spec not in (EARLIEST, LATEST, MAX_TIMESTAMP):
            raise ValueError(f"bad offset spec {spec}: a timestamp in ms, or earliest/latest/max-timestamp")
        return spec
    text = str(spec).strip().lower()
    if text in OFFSET_SPECS:
        return OFFSET_SPECS[text]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"bad offset spec {spec!r}: expected earliest, latest, max-timestamp or a timestamp in ms"
        ) from None
    return offset_timestamp(value)


def list_offsets(
    cluster: ClusterClient,
    topic_partitions: Iterable[TopicPartition] | Mapping[TopicPartition, ListOffsetsSpec],
    spec: ListOffsetsSpec = "latest",
    *,
    isolation_level: int = 0,
    timeout: float | None = None,
) -> dict[TopicPartition, OffsetResult]:
    """Offsets of partitions (ListOffsets, to each leader): ``spec`` is ``"earliest"`` (the log
    start offset), ``"latest"`` (the high watermark), ``"max-timestamp"`` (the record with the
    largest timestamp) or a timestamp in ms (the first offset at or after it; -1 if none).
    A mapping gives each partition its own spec. ``isolation_level`` 1 is READ_COMMITTED.
    ``timeout``: seconds for the whole lookup, retries included (default ``default.api.timeout.ms``).
    Raises only for errors that are not retriable, or a retriable one that failed every partition
    up to the deadline; the partitions' own errors are in their results."""
    if isinstance(topic_partitions, Mapping):
        specs = {TopicPartition(*tp): offset_timestamp(s) for tp, s in topic_partitions.items()}
    else:
        timestamp = offset_timestamp(spec)
        specs = {TopicPartition(*tp): timestamp for tp in topic_partitions}
    if not specs:
        return {}
    min_version = 7 if MAX_TIMESTAMP in specs.values() else (2 if isolation_level else None)
    outcomes = per_leader(
        cluster,
        specs,
        ApiKey.LIST_OFFSETS,
        _request(isolation_level),
        _parse,
        cluster.deadline(timeout),
        min_version=min_version,
    )
    results = {}
    for tp in specs:
        outcome = outcomes[tp]
        if outcome.error_code or outcome.payload is None:
            results[tp] = OffsetResult(tp, error_code=outcome.error_code, error_message=outcome.error_message)
        else:
            results[tp] = outcome.payload
    return results


_Build = Callable[[dict[TopicPartition, int], int, Deadline], ListOffsetsRequest]


def _request(isolation_level: int) -> _Build:
    """The ``build`` of a leader's ListOffsets request, with ``isolation_level``."""

    def build(group: dict[TopicPartition, int], version: int, deadline: Deadline) -> ListOffsetsRequest:
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp, ts in group.items():
            by_topic.setdefault(tp.topic, []).append(
                ListOffsetsPartition(partition_index=tp.partition, timestamp=ts, max_num_offsets=1)
            )
        return ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    return build


def _parse(response: Any) -> dict[TopicPartition, Outcome]:
    out: dict[TopicPartition, Outcome] = {}
    for t in response.topics:
        for p in t.partitions:
            offset, ts = p.offset, p.timestamp
            if p.old_style_offsets:  # v0
                offset, ts = p.old_style_offsets[0], -1
            tp = TopicPartition(t.name, p.partition_index)
            out[tp] = Outcome(p.error_code, None, OffsetResult(tp, offset, ts, p.leader_epoch))
    return out
