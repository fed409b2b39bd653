"""Resetting ("rewinding") a consumer group's committed offsets, as ``kafka-consumer-groups.sh
--reset-offsets`` does: the strategies, the plan of committed -> new offset per partition, and its
execution.

::

    with AdminClient("127.0.0.1:9092") as admin:
        groups = GroupAdmin(admin)
        to_start = ToPoint(OffsetPoint(PointKind.BEGINNING))
        plan = plan_rewind(groups, "billing", to_start, topics={"orders": None})   # None: all partitions
        for p in plan.offsets:
            print(p.topic_partition, p.current, "->", p.target, p.note or p.error or "")
        if plan.executable:
            codes = execute(groups, plan)                   # OffsetCommit, generation -1

Strategies: ``ToPoint`` (a point of ``kctl.client.offsets_spec``: earliest, latest, an offset, +N/-N,
a time, a duration ago), ``ToCurrent`` (the committed offset), ``ShiftBy`` (the committed offset
moved by N), ``ToGroup`` (another group's committed offsets) and ``ToOffsets`` (given offsets, e.g.
read with ``parse_offsets_csv`` from the CSV ``kafka-consumer-groups.sh --export`` writes).

The partitions: those of ``topics`` (topic -> partitions, None: all of the topic's), or with
``all_topics`` every partition the group has committed offsets for; by default ``all_topics``,
except for ``ToGroup``/``ToOffsets``, which default to the partitions the other group or the given
offsets name. A new offset below the log start is clamped to it (with a note); one past the log end
is refused, never clamped to the end (the partition's ``error``, ``past_end`` set): moving a group
there skips every record, and a mistyped offset must not do that silently. A group with active
members is refused (``GroupNotEmptyError``): its members would overwrite the offsets.

The work is split so that the decisions can be checked without a cluster: ``plan_rewind`` gathers
what the cluster knows and hands it to the pure steps ``select_partitions``, ``rewind_targets`` and
``plan_offsets``.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from kctl.client.admin import OffsetResult
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.admin import GroupAdmin, GroupNotEmptyError
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.client.offsets_spec import OffsetAndTimestamp, OffsetPoint, PointKind, past_end, resolve_points
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import error_name

UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PARTITION"

# ----------------------------------------------------------------------------------------- strategies


@dataclasses.dataclass(frozen=True)
class ToPoint:
    """Every partition to one point: beginning, end, an offset, +N/-N, a time, a duration ago."""

    point: OffsetPoint


@dataclasses.dataclass(frozen=True)
class ToCurrent:
    """Each partition to its committed offset (e.g. to give new partitions an offset)."""


@dataclasses.dataclass(frozen=True)
class ShiftBy:
    """Each committed offset moved by ``delta`` (negative: back); not below 0."""

    delta: int


@dataclasses.dataclass(frozen=True)
class ToGroup:
    """Each partition to the committed offset of another group."""

    group_id: str


@dataclasses.dataclass(frozen=True)
class ToOffsets:
    """Each partition to the offset given for it (e.g. from an exported CSV plan)."""

    offsets: Mapping[TopicPartition, int]


Strategy = ToPoint | ToCurrent | ShiftBy | ToGroup | ToOffsets

# ----------------------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class PlannedOffset:
    """One partition of an offset reset: the committed offset now (None: none), the new one, the
    log's bounds, and what happened on the way (``note``: e.g. clamped) or went wrong (``error``;
    ``past_end``: the target offset lies past the log end, so it is refused)."""

    topic_partition: TopicPartition
    current: int | None
    target: int | None
    log_start: int | None
    log_end: int | None
    note: str | None = None
    error: str | None = None
    past_end: bool = False

    @property
    def lag_before(self) -> int | None:
        return None if self.current is None or self.log_end is None else max(self.log_end - self.current, 0)

    @property
    def lag_after(self) -> int | None:
        return None if self.target is None or self.log_end is None else max(self.log_end - self.target, 0)

    def row(self, group_id: str, executed: bool, codes: Mapping[TopicPartition, int]) -> dict[str, object]:
        """The entry as a table row of ``group_id``'s plan; its status ``planned``, or once
        ``executed`` ``committed`` or the error of its code in ``codes`` (the OffsetCommit's)."""
        if self.error is not None:
            status = "error"
        elif executed:
            code = codes.get(self.topic_partition, 0)
            status = "committed" if not code else error_name(code)
        else:
            status = "planned"
        return {
            "group": group_id,
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "current_offset": self.current,
            "new_offset": self.target,
            "log_start_offset": self.log_start,
            "log_end_offset": self.log_end,
            "lag_before": self.lag_before,
            "lag_after": self.lag_after,
            "status": status,
            "note": self.error or self.note,
        }


@dataclasses.dataclass(frozen=True)
class TopicError:
    """A named topic that cannot be reset at all (e.g. UNKNOWN_TOPIC_OR_PARTITION)."""

    topic: str
    error: str


@dataclasses.dataclass(frozen=True)
class PartitionSelection:
    """The partitions to reset, those already known to fail (partition -> error text), and the
    topics that failed as a whole."""

    partitions: list[TopicPartition]
    errors: dict[TopicPartition, str] = dataclasses.field(default_factory=dict)
    topic_errors: list[TopicError] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class RewindPlan:
    """A worked-out reset of ``group_id``'s committed offsets, one entry per partition."""

    group_id: str
    offsets: list[PlannedOffset]
    topic_errors: list[TopicError] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> list[PlannedOffset]:
        """The partitions that cannot be reset (they have an ``error``)."""
        return [p for p in self.offsets if p.error is not None]

    @property
    def past_end(self) -> list[PlannedOffset]:
        """The partitions refused because their target offset lies past the log end."""
        return [p for p in self.offsets if p.past_end]

    @property
    def executable(self) -> bool:
        """Whether ``execute`` may commit it: something to reset and nothing failed."""
        return bool(self.offsets) and not self.failed and not self.topic_errors


class NothingToRewindError(KafkaError):
    """The group (with ``all_topics``), or the other group of ``ToGroup``, has no committed offsets
    to work from."""


class OffsetsFileError(ValueError):
    """A CSV plan that cannot be read (a malformed line, or no offsets for the group)."""


# ----------------------------------------------------------------------------------------- planning


def plan_rewind(
    groups: GroupAdmin,
    group_id: str,
    strategy: Strategy,
    *,
    topics: Mapping[str, Sequence[int] | None] | None = None,
    all_topics: bool = False,
    timeout: float | None = None,
    now_ms: int | None = None,
) -> RewindPlan:
    """Work out the reset of ``group_id``'s committed offsets by ``strategy`` (see the module
    docstring). Raises ``GroupNotEmptyError`` when the group has members, ``NothingToRewindError``
    when there is nothing to work from, ``BrokerResponseError`` when the group cannot be described."""
    if topics and all_topics:
        raise ValueError("give topics or all_topics, not both")
    if isinstance(strategy, ToGroup) and strategy.group_id == group_id:
        raise ValueError("ToGroup names the group itself")
    if not topics and not all_topics and not isinstance(strategy, ToGroup | ToOffsets):
        all_topics = True
    [description] = groups.describe_groups([group_id], timeout=timeout)
    if not description.ok:
        raise BrokerResponseError(
            description.error_code, description.error_message, context=f"group {group_id!r}"
        )
    if description.active:
        raise GroupNotEmptyError(description)
    committed = groups.committed_offsets(group_id, timeout=timeout) if description.exists else {}
    if all_topics and not description.exists and not committed:
        raise NothingToRewindError(f"group {group_id!r} does not exist (--all-topics has nothing to reset)")
    known = groups.partitions_of(list(topics), timeout=timeout) if topics and not all_topics else {}
    other: dict[TopicPartition, OffsetAndMetadata | None] = {}
    if isinstance(strategy, ToGroup):
        other = groups.committed_offsets(strategy.group_id, timeout=timeout)
    selection = select_partitions(
        strategy, topics=topics, all_topics=all_topics, committed=committed, known=known, other=other
    )
    targets = rewind_targets(strategy, selection, committed, other)
    offsets = _plan_reset(groups, group_id, targets, timeout=timeout, now_ms=now_ms) if targets else []
    return RewindPlan(group_id, offsets, selection.topic_errors)


def execute(
    groups: GroupAdmin, plan: RewindPlan, *, timeout: float | None = None
) -> dict[TopicPartition, int]:
    """Commit the plan's new offsets (OffsetCommit with generation -1, as an admin tool: the
    coordinator accepts it only while the group has no members). Returns the error code of each
    committed partition (0: done). A plan with errors is not executed (ValueError)."""
    if not plan.executable:
        raise ValueError(f"the rewind of group {plan.group_id!r} has errors or nothing to reset")
    offsets = {p.topic_partition: OffsetAndMetadata(p.target) for p in plan.offsets if p.target is not None}
    return groups.alter_offsets(plan.group_id, offsets, timeout=timeout)


def select_partitions(
    strategy: Strategy,
    *,
    topics: Mapping[str, Sequence[int] | None] | None,
    all_topics: bool,
    committed: Mapping[TopicPartition, OffsetAndMetadata | None],
    known: Mapping[str, Sequence[TopicPartition] | str],
    other: Mapping[TopicPartition, OffsetAndMetadata | None],
) -> PartitionSelection:
    """The partitions to reset: every committed one (``all_topics``), those of ``topics`` (checked
    against ``known``: topic -> its partitions or its error name), or else those the other group
    (``ToGroup``, whose committed offsets are ``other``) or the given offsets (``ToOffsets``) name."""
    partitions: list[TopicPartition] = []
    errors: dict[TopicPartition, str] = {}
    topic_errors: list[TopicError] = []
    if all_topics:
        partitions = sorted(committed)
    elif topics:
        for topic, wanted in topics.items():
            found = known.get(topic)
            if isinstance(found, str) or found is None:
                topic_errors.append(TopicError(topic, found or UNKNOWN_TOPIC))
                continue
            if wanted is None:
                partitions += found
                continue
            for p in wanted:
                tp = TopicPartition(topic, p)
                partitions.append(tp)
                if tp not in found:
                    errors[tp] = f"{UNKNOWN_TOPIC}: topic {topic!r} has no partition {p}"
    if isinstance(strategy, ToGroup) and not topics and not all_topics:
        partitions = sorted(other)
        if not partitions:
            raise NothingToRewindError(f"group {strategy.group_id!r} has no committed offsets")
    if isinstance(strategy, ToOffsets) and not topics and not all_topics:
        partitions = sorted(strategy.offsets)
    return PartitionSelection(list(dict.fromkeys(partitions)), errors, topic_errors)


def rewind_targets(
    strategy: Strategy,
    selection: PartitionSelection,
    committed: Mapping[TopicPartition, OffsetAndMetadata | None],
    other: Mapping[TopicPartition, OffsetAndMetadata | None] | None = None,
) -> dict[TopicPartition, OffsetPoint | str]:
    """Each selected partition's target: an ``OffsetPoint``, or the text of why it has none."""
    targets: dict[TopicPartition, OffsetPoint | str] = {}
    for tp in selection.partitions:
        if tp in selection.errors:
            targets[tp] = selection.errors[tp]
            continue
        current = committed.get(tp)
        if isinstance(strategy, ToPoint):
            targets[tp] = strategy.point
        elif isinstance(strategy, ToCurrent):
            targets[tp] = (
                OffsetPoint(PointKind.OFFSET, current.offset)
                if current is not None
                else "no committed offset"
            )
        elif isinstance(strategy, ShiftBy):
            targets[tp] = (
                OffsetPoint(PointKind.OFFSET, max(current.offset + strategy.delta, 0))
                if current is not None
                else "no committed offset to shift"
            )
        elif isinstance(strategy, ToGroup):
            value = (other or {}).get(tp)
            targets[tp] = (
                OffsetPoint(PointKind.OFFSET, value.offset)
                if value is not None
                else f"group {strategy.group_id!r} has no committed offset here"
            )
        else:
            offset = strategy.offsets.get(tp)
            targets[tp] = (
                OffsetPoint(PointKind.OFFSET, offset)
                if offset is not None and offset >= 0
                else "not in the file"
            )
    return targets


def plan_offsets(
    targets: Mapping[TopicPartition, OffsetPoint | str],
    committed: Mapping[TopicPartition, OffsetAndMetadata | None],
    start: Mapping[TopicPartition, OffsetResult],
    end: Mapping[TopicPartition, OffsetResult],
    list_times: Callable[[dict[TopicPartition, int]], Mapping[TopicPartition, OffsetResult]],
    *,
    now_ms: int | None = None,
) -> list[PlannedOffset]:
    """The plan, sorted by partition: each target resolved against the log's bounds (``start``,
    ``end``: ListOffsets earliest/latest of the partitions with a point; ``list_times`` looks up
    offsets by time), clamped up to the log start with a note; an offset past the log end is the
    partition's error (``past_end``), not clamped."""
    partitions = sorted(TopicPartition(*tp) for tp in targets)
    points = {tp: p for tp, p in targets.items() if isinstance(p, OffsetPoint)}
    bounds_error = {
        tp: next(r.error for r in (start[tp], end[tp]) if not r.ok)
        for tp in sorted(points)
        if not (start[tp].ok and end[tp].ok)
    }
    resolvable = {tp: p for tp, p in points.items() if tp not in bounds_error}
    lookup = _BoundsLookup(start, end, list_times)
    resolved = resolve_points(resolvable, None, lookup, now_ms=now_ms) if resolvable else {}
    plan = []
    for tp in partitions:
        value = committed.get(tp)
        current = value.offset if value is not None else None
        target = targets[tp]
        s = start[tp].offset if tp in start and start[tp].ok else None
        e = end[tp].offset if tp in end and end[tp].ok else None
        if not isinstance(target, OffsetPoint):
            plan.append(PlannedOffset(tp, current, None, s, e, error=str(target)))
        elif tp in bounds_error:
            plan.append(PlannedOffset(tp, current, None, s, e, error=bounds_error[tp]))
        elif tp in lookup.errors:
            plan.append(PlannedOffset(tp, current, None, s, e, error=lookup.errors[tp]))
        elif (beyond := past_end(target, start[tp].offset, end[tp].offset)) is not None:
            error = f"offset {beyond} is past the end of {tp} (high watermark {e}): refused, not clamped"
            plan.append(PlannedOffset(tp, current, None, s, e, error=error, past_end=True))
        else:
            new = resolved[tp]
            note = None
            if target.kind is PointKind.OFFSET and new != target.value:
                note = f"{target.value} clamped to the log start"
            elif target.is_time and new == e:
                note = "no record at or after that time: the log end"
            plan.append(PlannedOffset(tp, current, new, s, e, note=note))
    return plan


def _plan_reset(
    groups: GroupAdmin,
    group_id: str,
    targets: Mapping[TopicPartition, OffsetPoint | str],
    *,
    timeout: float | None,
    now_ms: int | None,
) -> list[PlannedOffset]:
    """Look up what ``plan_offsets`` needs: the group (still without members), its committed
    offsets of the partitions, and the log bounds of those with a point."""
    [group] = groups.describe_groups([group_id], timeout=timeout)
    if not group.ok:
        raise BrokerResponseError(group.error_code, group.error_message, context=f"group {group_id!r}")
    if group.active:
        raise GroupNotEmptyError(group)
    partitions = sorted(TopicPartition(*tp) for tp in targets)
    committed = groups.committed_offsets(group_id, partitions, timeout=timeout) if group.exists else {}
    valid = sorted(tp for tp, p in targets.items() if isinstance(p, OffsetPoint))
    admin = groups.admin
    start = admin.list_offsets(valid, "earliest", timeout=timeout) if valid else {}
    end = admin.list_offsets(valid, "latest", timeout=timeout) if valid else {}
    return plan_offsets(
        targets,
        committed,
        start,
        end,
        lambda timestamps: admin.list_offsets(timestamps, timeout=timeout),
        now_ms=now_ms,
    )


class _BoundsLookup:
    """``OffsetLookup`` over offsets already listed, with per-partition errors of time lookups."""

    def __init__(
        self,
        start: Mapping[TopicPartition, OffsetResult],
        end: Mapping[TopicPartition, OffsetResult],
        list_times: Callable[[dict[TopicPartition, int]], Mapping[TopicPartition, OffsetResult]],
    ) -> None:
        self.start = start
        self.end = end
        self.list_times = list_times
        self.errors: dict[TopicPartition, str] = {}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.start[tp].offset for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.end[tp].offset for tp in partitions}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        results = self.list_times(dict(timestamps))
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, r in results.items():
            if not r.ok:
                self.errors[tp] = r.error or error_name(r.error_code)
                out[tp] = None
            else:
                out[tp] = OffsetAndTimestamp(r.offset, r.timestamp) if r.offset >= 0 else None
        return out


# ----------------------------------------------------------------------------------------- CSV plans


def parse_offsets_csv(text: str, group_id: str, *, source: str = "<offsets>") -> dict[TopicPartition, int]:
    """A CSV plan as ``kafka-consumer-groups.sh --export`` writes it: ``topic,partition,offset``
    lines (or ``group,topic,partition,offset`` for several groups: only ``group_id``'s lines are
    used); a header line and ``#`` comments are skipped. ``source`` names the text in errors."""
    offsets: dict[TopicPartition, int] = {}
    for number, row in enumerate(csv.reader(text.splitlines()), 1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        if len(cells) == 4:
            if cells[0] != group_id:
                continue
            cells = cells[1:]
        if len(cells) != 3:
            raise OffsetsFileError(f"{source}:{number}: expected topic,partition,offset")
        topic, partition, offset = cells
        try:
            offsets[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            if number == 1:
                continue  # a header line
            raise OffsetsFileError(f"{source}:{number}: partition and offset must be integers") from None
    if not offsets:
        raise OffsetsFileError(f"{source}: no offsets for group {group_id!r}")
    return offsets


def format_offsets_csv(plan: Sequence[PlannedOffset]) -> str:
    """The plan's new offsets as ``topic,partition,offset`` lines (readable by ``parse_offsets_csv``);
    partitions with an error or no new offset are left out."""
    return "".join(
        f"{p.topic_partition.topic},{p.topic_partition.partition},{p.target}\n"
        for p in plan
        if p.error is None and p.target is not None
    )
