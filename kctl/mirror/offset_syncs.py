"""Offset translation: which source offset became which target offset.

The mirror writes an *offset sync* to the target cluster's topic ``__kctl_mirror_offset_syncs`` (one
partition, created on first use) whenever the distance between source and target offsets of a
partition changes: at the first batch it forwards, after a restart, after a gap in the source
(compaction, transaction markers, deleted records) and around rebuilt batches. Forwarded batches
keep their offset deltas, so between two syncs a source offset ``X`` is at target offset
``target_offset + (X - source_offset)``. Syncs are written (and acknowledged) before the source
positions that cover them are committed, so every committed position is translatable.

A sync record: key ``<cluster>/<topic>/<partition>`` (UTF-8), value JSON ``{"cluster", "topic",
"partition", "source_offset", "target_topic", "target_offset", "linear"}``. ``linear`` false marks a
rebuilt batch whose records were not contiguous in the source: only its first offset maps exactly.

``translate`` takes the latest-written sync at or below ``X``; the result is capped at the target
offset of the next sync of the same run (so an offset in a source gap maps to the first record after
the gap) and never passes what the mirror has copied. A group resuming at the translated offset on
the target re-reads at most the records of one in-flight window and never skips one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from kctl.client import Consumer, ConsumerConfig, ConsumerRecord, TopicPartition

__all__ = [
    "OFFSET_SYNCS_TOPIC",
    "OffsetSync",
    "OffsetSyncStore",
    "decode_sync",
    "encode_sync",
    "read_offset_syncs",
]

OFFSET_SYNCS_TOPIC = "__kctl_mirror_offset_syncs"


@dataclass(frozen=True)
class OffsetSync:
    """Source offset ``source_offset`` of ``cluster``'s ``topic``/``partition`` is target offset
    ``target_offset`` of ``target_topic`` (same partition)."""

    cluster: str
    topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int
    linear: bool = True

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cluster, self.topic, self.partition)


def encode_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """The (key, value) of a sync record."""
    key = f"{sync.cluster}/{sync.topic}/{sync.partition}".encode()
    return key, json.dumps(asdict(sync), separators=(",", ":")).encode()


def decode_sync(value: bytes | None) -> OffsetSync | None:
    """A sync record's value, or None when it is not one (a foreign record in the topic)."""
    if not value:
        return None
    try:
        data = json.loads(value)
        return OffsetSync(
            str(data["cluster"]),
            str(data["topic"]),
            int(data["partition"]),
            int(data["source_offset"]),
            str(data["target_topic"]),
            int(data["target_offset"]),
            bool(data.get("linear", True)),
        )
    except (ValueError, KeyError, TypeError):
        return None


class OffsetSyncStore:
    """The syncs of each source partition, in the order they were written."""

    def __init__(self, syncs: Iterable[OffsetSync] = ()) -> None:
        self._syncs: dict[tuple[str, str, int], list[OffsetSync]] = {}
        for sync in syncs:
            self.add(sync)

    def add(self, sync: OffsetSync) -> None:
        self._syncs.setdefault(sync.key, []).append(sync)

    def syncs(self, cluster: str, topic: str, partition: int) -> list[OffsetSync]:
        return list(self._syncs.get((cluster, topic, partition), ()))

    def __len__(self) -> int:
        return sum(len(v) for v in self._syncs.values())

    def translate(
        self, cluster: str, topic: str, partition: int, offset: int, *, mirrored: int | None = None
    ) -> tuple[str, int] | None:
        """The target topic and offset where a consumer at source ``offset`` resumes without skipping
        a record; None when no sync covers it (nothing at or below ``offset`` was mirrored yet).
        ``mirrored``: the mirror's committed source position; a later ``offset`` is treated as it."""
        history = self._syncs.get((cluster, topic, partition))
        if not history:
            return None
        if mirrored is not None:
            offset = min(offset, mirrored)
        chosen = None
        for index in range(len(history) - 1, -1, -1):
            if history[index].source_offset <= offset:
                chosen = index
                break
        if chosen is None:
            return None
        sync = history[chosen]
        if offset == sync.source_offset:
            return sync.target_topic, sync.target_offset
        if not sync.linear:
            return sync.target_topic, sync.target_offset + 1
        target = sync.target_offset + (offset - sync.source_offset)
        for later in history[chosen + 1 :]:  # the next sync of the same run caps it (a gap ends a run)
            if later.source_offset > sync.source_offset and later.target_topic == sync.target_topic:
                target = min(target, later.target_offset)
                break
        return sync.target_topic, target


def read_offset_syncs(
    bootstrap: str, config: ConsumerConfig | Mapping[str, str] | None = None, *, timeout: float = 30.0
) -> OffsetSyncStore:
    """Every sync in the target cluster's syncs topic (read up to its end offset at the call); an
    empty store when the topic does not exist."""
    consumer = Consumer(bootstrap, config)
    try:
        metadata = consumer.cluster.refresh_metadata([OFFSET_SYNCS_TOPIC])
        topic = metadata.topic(OFFSET_SYNCS_TOPIC)
        if topic is None or topic.error_code or not topic.partitions:
            return OffsetSyncStore()
        partitions = [
            TopicPartition(OFFSET_SYNCS_TOPIC, p) for p in sorted(p.partition for p in topic.partitions)
        ]
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        store = OffsetSyncStore()
        records: list[ConsumerRecord] = []
        pending = {tp for tp in partitions if ends.get(tp, 0) > 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for record in consumer.poll(0.5):
                records.append(record)
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
        records.sort(key=lambda r: (r.partition, r.offset))
        for record in records:
            sync = decode_sync(record.value)
            if sync is not None:
                store.add(sync)
        return store
    finally:
        consumer.close()
