"""Consumer group offsets carried over to the target: a group committed on the source resumes on
the target just after where it was (``kctl.mirror.offset_syncs`` says where each source offset went).

``translate_groups`` plans, per group and partition, the target offset of the group's committed
source offset — never past what the mirror has copied (its own committed position), and never
moving a group backwards on the target. With ``execute`` it commits the plan on the target
(OffsetCommit without members); a group with active members on the target is left alone (it is
consuming there already), as Kafka's MirrorMaker 2 does.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kctl.client import GroupAdmin, TopicPartition
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.mirror.offset_syncs import OffsetSyncStore
from kctl.protocol import error_name

__all__ = ["GroupTranslation", "translate_groups"]


@dataclass(frozen=True)
class GroupTranslation:
    """One partition of one group: the source committed offset, where it is on the target, what the
    target had, and what happened (``committed``, ``planned``, or why it was skipped)."""

    group: str
    topic: str
    partition: int
    source_offset: int
    target_topic: str | None
    target_offset: int | None
    previous_target_offset: int | None
    outcome: str


def translate_groups(
    source_groups: GroupAdmin,
    target_groups: GroupAdmin,
    store: OffsetSyncStore,
    cluster: str,
    mirrored: Mapping[TopicPartition, int],
    *,
    groups: Collection[str] | None = None,
    exclude: Collection[str] = (),
    pattern: str = ".*",
    execute: bool = False,
) -> list[GroupTranslation]:
    """Translate ``groups`` (default: every group of the source matching ``pattern``, but
    ``exclude``) for the partitions in ``mirrored`` (source partition -> the mirror's committed
    position). Returns one row per group and partition."""
    if groups is None:
        matcher = re.compile(pattern)
        names = [
            g.group_id
            for g in source_groups.list_groups()
            if g.group_id not in exclude and matcher.fullmatch(g.group_id)
        ]
    else:
        names = list(groups)
    rows: list[GroupTranslation] = []
    for group in names:
        committed = source_groups.committed_offsets(group)
        plan: dict[TopicPartition, int] = {}
        planned_rows: list[GroupTranslation] = []
        targets: dict[TopicPartition, int | None] = {}
        translated: dict[TopicPartition, tuple[str, int] | None] = {}
        for tp, value in sorted(committed.items()):
            if value is None or value.offset < 0 or tp not in mirrored:
                continue
            translated[tp] = store.translate(
                cluster, tp.topic, tp.partition, value.offset, mirrored=mirrored[tp]
            )
        wanted = [TopicPartition(t[0], tp.partition) for tp, t in translated.items() if t is not None]
        if wanted:
            existing = target_groups.committed_offsets(group, wanted)
            targets = {tp: (v.offset if v is not None else None) for tp, v in existing.items()}
        active = False
        if wanted and execute:
            (description,) = target_groups.describe_groups([group])
            active = description.ok and bool(description.members)
        for tp, result in translated.items():
            source_offset = committed[tp].offset  # type: ignore[union-attr]
            if result is None:
                rows.append(
                    GroupTranslation(
                        group, tp.topic, tp.partition, source_offset, None, None, None, "not mirrored yet"
                    )
                )
                continue
            target_tp = TopicPartition(result[0], tp.partition)
            previous = targets.get(target_tp)
            if previous is not None and previous >= result[1]:
                outcome = "up to date" if previous == result[1] else "target ahead"
            elif active:
                outcome = "group active on target"
            else:
                outcome = "planned"
                plan[target_tp] = result[1]
            planned_rows.append(
                GroupTranslation(
                    group, tp.topic, tp.partition, source_offset, result[0], result[1], previous, outcome
                )
            )
        if execute and plan:
            codes = target_groups.alter_offsets(group, {tp: OffsetAndMetadata(o) for tp, o in plan.items()})
            planned_rows = [
                _with_outcome(r, codes.get(TopicPartition(r.target_topic or "", r.partition)))
                if r.outcome == "planned"
                else r
                for r in planned_rows
            ]
        rows.extend(planned_rows)
    return rows


def _with_outcome(row: GroupTranslation, code: int | None) -> GroupTranslation:
    outcome = "committed" if code == 0 else error_name(code) if code else "not answered"
    return GroupTranslation(
        row.group,
        row.topic,
        row.partition,
        row.source_offset,
        row.target_topic,
        row.target_offset,
        row.previous_target_offset,
        outcome,
    )
