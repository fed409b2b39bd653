"""The rewind plan (kctl.client.group.rewind) without a broker: which partitions a strategy resets,
each partition's target, resolving against the log's bounds (clamped up to the log start, refused
past its end) with the notes and errors the plan shows, and the CSV plans of --export/--from-file.
`kctl group rewind` against a real broker is in test_cli_group."""

from __future__ import annotations

import pytest

from kctl.client.admin import OffsetResult
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.client.group.rewind import (
    NothingToRewindError,
    OffsetsFileError,
    PartitionSelection,
    PlannedOffset,
    RewindPlan,
    ShiftBy,
    ToCurrent,
    ToGroup,
    ToOffsets,
    TopicError,
    ToPoint,
    format_offsets_csv,
    parse_offsets_csv,
    plan_offsets,
    rewind_targets,
    select_partitions,
)
from kctl.client.offsets_spec import OffsetPoint, PointKind
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ErrorCode

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))
B0 = TopicPartition("b", 0)
EARLIEST = ToPoint(OffsetPoint(PointKind.BEGINNING))


def committed(**by_key: int) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """committed(a0=5, b0=7): partition -> its committed offset."""
    return {TopicPartition(k[0], int(k[1:])): OffsetAndMetadata(v) for k, v in by_key.items()}


def listed(offsets: dict[TopicPartition, int], **errors: int) -> dict[TopicPartition, OffsetResult]:
    out = {tp: OffsetResult(topic_partition=tp, offset=o) for tp, o in offsets.items()}
    for key, code in errors.items():
        tp = TopicPartition(key[0], int(key[1:]))
        out[tp] = OffsetResult(topic_partition=tp, error_code=code)
    return out


def no_times(timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetResult]:
    raise AssertionError(f"no time lookup expected, got {timestamps}")


# ----------------------------------------------------------------------------------------- partitions


def test_all_topics_takes_every_committed_partition_sorted() -> None:
    selection = select_partitions(
        EARLIEST, topics=None, all_topics=True, committed=committed(b0=1, a1=2, a0=3), known={}, other={}
    )
    assert selection == PartitionSelection([A0, A1, B0])


def test_topics_are_checked_against_the_cluster() -> None:
    selection = select_partitions(
        EARLIEST,
        topics={"a": [0, 7], "b": None, "gone": None, "denied": [0]},
        all_topics=False,
        committed={},
        known={"a": [A0, A1], "b": [B0], "denied": "TOPIC_AUTHORIZATION_FAILED"},
        other={},
    )
    seven = TopicPartition("a", 7)
    assert selection.partitions == [A0, seven, B0]
    assert selection.errors == {seven: "UNKNOWN_TOPIC_OR_PARTITION: topic 'a' has no partition 7"}
    assert selection.topic_errors == [
        TopicError("gone", "UNKNOWN_TOPIC_OR_PARTITION"),
        TopicError("denied", "TOPIC_AUTHORIZATION_FAILED"),
    ]


def test_to_group_and_to_offsets_default_to_the_partitions_they_name() -> None:
    other = committed(b0=4, a2=9)
    by_group = select_partitions(
        ToGroup("other"), topics=None, all_topics=False, committed=committed(a0=1), known={}, other=other
    )
    assert by_group.partitions == [A2, B0]
    by_file = select_partitions(
        ToOffsets({B0: 3, A1: 2}), topics=None, all_topics=False, committed={}, known={}, other={}
    )
    assert by_file.partitions == [A1, B0]
    # with topics, the topics say which partitions; the other group only gives the targets
    scoped = select_partitions(
        ToGroup("other"), topics={"a": [0]}, all_topics=False, committed={}, known={"a": [A0]}, other=other
    )
    assert scoped.partitions == [A0]


def test_to_group_without_committed_offsets_is_nothing_to_rewind() -> None:
    with pytest.raises(NothingToRewindError, match="group 'other' has no committed offsets"):
        select_partitions(ToGroup("other"), topics=None, all_topics=False, committed={}, known={}, other={})


# ----------------------------------------------------------------------------------------- targets


def test_each_strategy_gives_each_partition_a_target_or_a_reason() -> None:
    selection = PartitionSelection([A0, A1, A2], errors={A2: "UNKNOWN_TOPIC_OR_PARTITION: no such"})
    current = committed(a0=10)
    offset = PointKind.OFFSET
    assert rewind_targets(EARLIEST, selection, current) == {
        A0: EARLIEST.point,
        A1: EARLIEST.point,
        A2: "UNKNOWN_TOPIC_OR_PARTITION: no such",
    }
    assert rewind_targets(ToCurrent(), selection, current) == {
        A0: OffsetPoint(offset, 10),
        A1: "no committed offset",
        A2: "UNKNOWN_TOPIC_OR_PARTITION: no such",
    }
    shifted = rewind_targets(ShiftBy(-3), selection, current)
    assert shifted[A0] == OffsetPoint(offset, 7)
    assert shifted[A1] == "no committed offset to shift"
    assert rewind_targets(ShiftBy(-30), selection, current)[A0] == OffsetPoint(offset, 0)  # not below 0
    from_other = rewind_targets(ToGroup("other"), selection, current, committed(a1=4))
    assert from_other[A0] == "group 'other' has no committed offset here"
    assert from_other[A1] == OffsetPoint(offset, 4)
    from_file = rewind_targets(ToOffsets({A0: 2, A1: -1}), selection, current)
    assert from_file[A0] == OffsetPoint(offset, 2)
    assert from_file[A1] == "not in the file"


# ----------------------------------------------------------------------------------------- plan


def test_plan_resolves_and_clamps_up_to_the_log_start_with_notes() -> None:
    targets = {
        A0: OffsetPoint(PointKind.OFFSET, 50),
        A1: OffsetPoint(PointKind.OFFSET, 1),
        A2: OffsetPoint(PointKind.BEFORE_END, 3),
        B0: OffsetPoint(PointKind.BEGINNING),
    }
    start = listed({A0: 0, A1: 5, A2: 0, B0: 20})
    end = listed({A0: 50, A1: 60, A2: 10, B0: 30})
    plan = plan_offsets(targets, committed(a0=40, b0=25), start, end, no_times)
    assert plan == [
        PlannedOffset(A0, 40, 50, 0, 50),
        PlannedOffset(A1, None, 5, 5, 60, note="1 clamped to the log start"),
        PlannedOffset(A2, None, 7, 0, 10),
        PlannedOffset(B0, 25, 20, 20, 30),
    ]
    assert (plan[0].lag_before, plan[0].lag_after) == (10, 0)
    assert (plan[1].lag_before, plan[1].lag_after) == (None, 55)


def test_an_offset_past_the_log_end_is_refused_not_clamped() -> None:
    targets = {
        A0: OffsetPoint(PointKind.OFFSET, 1000),
        A1: OffsetPoint(PointKind.AFTER_BEGINNING, 56),  # 5 + 56 = 61
        A2: OffsetPoint(PointKind.OFFSET, 10),  # the end itself
    }
    start = listed({A0: 0, A1: 5, A2: 0})
    end = listed({A0: 50, A1: 60, A2: 10})
    plan = plan_offsets(targets, committed(a0=40), start, end, no_times)
    refused = "is past the end of {} (high watermark {}): refused, not clamped"
    assert plan == [
        PlannedOffset(A0, 40, None, 0, 50, error="offset 1000 " + refused.format(A0, 50), past_end=True),
        PlannedOffset(A1, None, None, 5, 60, error="offset 61 " + refused.format(A1, 60), past_end=True),
        PlannedOffset(A2, None, 10, 0, 10),
    ]
    rewind = RewindPlan("g", plan)
    assert rewind.past_end == plan[:2] and rewind.failed == plan[:2]
    assert not rewind.executable


def test_plan_by_time_uses_the_lookup_and_reports_its_errors() -> None:
    targets = {
        A0: OffsetPoint(PointKind.TIMESTAMP, 1_000),
        A1: OffsetPoint(PointKind.TIMESTAMP, 2_000),
        A2: OffsetPoint(PointKind.AGO, 60_000),
    }
    start, end = listed({A0: 0, A1: 0, A2: 0}), listed({A0: 9, A1: 9, A2: 9})
    asked: list[dict[TopicPartition, int]] = []

    def list_times(timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetResult]:
        asked.append(timestamps)
        return {
            A0: OffsetResult(topic_partition=A0, offset=4, timestamp=1_200),
            A1: OffsetResult(topic_partition=A1, offset=-1),  # no record at or after the time
            A2: OffsetResult(topic_partition=A2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        }

    plan = plan_offsets(targets, {}, start, end, list_times, now_ms=100_000)
    assert asked == [{A0: 1_000, A1: 2_000, A2: 40_000}]
    assert plan == [
        PlannedOffset(A0, None, 4, 0, 9),
        PlannedOffset(A1, None, 9, 0, 9, note="no record at or after that time: the log end"),
        PlannedOffset(A2, None, None, 0, 9, error="NOT_LEADER_OR_FOLLOWER"),
    ]


def test_plan_carries_partition_and_bounds_errors() -> None:
    targets = {A0: "no committed offset", A1: OffsetPoint(PointKind.END)}
    start = listed({}, a1=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    end = listed({A1: 3})
    plan = plan_offsets(targets, committed(a0=2), start, end, no_times)
    assert plan == [
        PlannedOffset(A0, 2, None, None, None, error="no committed offset"),
        PlannedOffset(A1, None, None, None, 3, error="UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    rewind = RewindPlan("g", plan)
    assert rewind.failed == plan
    assert not rewind.executable


def test_a_plan_is_executable_only_with_offsets_and_no_errors() -> None:
    ok = PlannedOffset(A0, 1, 0, 0, 5)
    assert RewindPlan("g", [ok]).executable
    assert not RewindPlan("g", []).executable
    assert not RewindPlan("g", [ok], [TopicError("gone", "UNKNOWN_TOPIC_OR_PARTITION")]).executable


# ----------------------------------------------------------------------------------------- CSV


def test_csv_plans_round_trip_and_pick_the_group() -> None:
    plan = [
        PlannedOffset(A0, 1, 0, 0, 5),
        PlannedOffset(A1, 1, None, 0, 5, error="no committed offset"),
        PlannedOffset(B0, None, 7, 0, 9),
    ]
    text = format_offsets_csv(plan)
    assert text == "a,0,0\nb,0,7\n"
    assert parse_offsets_csv(text, "g") == {A0: 0, B0: 7}
    several = "group,topic,partition,offset\n# a comment\ng,a,1,3\nother,a,1,9\n\ng, b , 0 , 4\n"
    assert parse_offsets_csv(several, "g") == {A1: 3, B0: 4}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,0\n", "plan.csv:1: expected topic,partition,offset"),
        ("topic,partition,offset\na,x,1\n", "plan.csv:2: partition and offset must be integers"),
        ("other,a,0,1\n", "plan.csv: no offsets for group 'g'"),
        ("", "plan.csv: no offsets for group 'g'"),
    ],
)
def test_bad_csv_plans_say_where(text: str, message: str) -> None:
    with pytest.raises(OffsetsFileError) as caught:
        parse_offsets_csv(text, "g", source="plan.csv")
    assert str(caught.value) == message


def test_a_plan_entry_as_a_row_says_planned_committed_or_the_error() -> None:
    entry = PlannedOffset(A0, 5, 2, 1, 9, note="clamped up to the log start")
    row = entry.row("g", False, {})
    assert row == {
        "group": "g",
        "topic": "a",
        "partition": 0,
        "current_offset": 5,
        "new_offset": 2,
        "log_start_offset": 1,
        "log_end_offset": 9,
        "lag_before": 4,
        "lag_after": 7,
        "status": "planned",
        "note": "clamped up to the log start",
    }
    assert entry.row("g", True, {})["status"] == "committed"
    assert entry.row("g", True, {A0: ErrorCode.UNKNOWN_MEMBER_ID})["status"] == "UNKNOWN_MEMBER_ID"
    refused = PlannedOffset(A1, 5, None, 0, 9, note="ignored", error="past the log end")
    assert (refused.row("g", True, {})["status"], refused.row("g", True, {})["note"]) == (
        "error",
        "past the log end",
    )


def test_a_topic_scope_names_committed_partitions_and_those_it_lists() -> None:
    from kctl.client.group.rewind_options import partitions_in_scope, topic_scope

    have = [A0, A1, B0, TopicPartition("c", 0)]
    assert partitions_in_scope(have, topic_scope(["a"])) == [A0, A1]
    assert partitions_in_scope(have, topic_scope(["a:1-2", "b"])) == [A1, B0, A2]
    assert partitions_in_scope(have, topic_scope(["d:0"])) == [TopicPartition("d", 0)]
    assert partitions_in_scope([], topic_scope(["a"])) == []
