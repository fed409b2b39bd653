"""The offset grammar (kctl.client.offsets_spec): parsing, error messages, and resolving against a
partition's beginning, end and offsets-for-times (a fake lookup here; the broker in test_cli_consume)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from kctl.client.offsets_spec import (
    AdminLookup,
    OffsetAndTimestamp,
    OffsetPastEndError,
    OffsetPoint,
    OffsetRange,
    OffsetSpec,
    OffsetSpecError,
    PointKind,
    parse_offset_point,
    parse_offset_spec,
    past_end,
    resolve_points,
    resolve_ranges,
)
from kctl.common.topic_partition import TopicPartition

H = 3_600_000
NOV22 = 1_795_305_600_000  # 2026-11-22T00:00:00Z


def point(kind: PointKind, value: int = 0) -> tuple[PointKind, int]:
    return (kind, value)


def parsed(text: str) -> tuple[tuple[PointKind, int], tuple[PointKind, int] | None]:
    spec = parse_offset_spec(text)
    end = (spec.end.kind, spec.end.value) if spec.end is not None else None
    return (spec.start.kind, spec.start.value), end


# ----------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("beginning", point(PointKind.BEGINNING)),
        ("BEGINNING", point(PointKind.BEGINNING)),
        ("earliest", point(PointKind.BEGINNING)),
        ("end", point(PointKind.END)),
        ("End", point(PointKind.END)),
        ("latest", point(PointKind.END)),
        ("0", point(PointKind.OFFSET, 0)),
        ("42", point(PointKind.OFFSET, 42)),
        ("  42  ", point(PointKind.OFFSET, 42)),
        ("-10", point(PointKind.BEFORE_END, 10)),
        ("-0", point(PointKind.BEFORE_END, 0)),
        ("+5", point(PointKind.AFTER_BEGINNING, 5)),
        ("@0", point(PointKind.TIMESTAMP, 0)),
        ("@1700000000000", point(PointKind.TIMESTAMP, 1_700_000_000_000)),
        ("@2026-11-22", point(PointKind.TIMESTAMP, NOV22)),
        ("@2026-11-22T10:00", point(PointKind.TIMESTAMP, NOV22 + 10 * H)),
        ("@2026-11-22T10:00:00", point(PointKind.TIMESTAMP, NOV22 + 10 * H)),
        ("@2026-11-22T10:00:00Z", point(PointKind.TIMESTAMP, NOV22 + 10 * H)),
        ("@2026-11-22t10:00:00z", point(PointKind.TIMESTAMP, NOV22 + 10 * H)),
        ("@2026-11-22 10:00:00Z", point(PointKind.TIMESTAMP, NOV22 + 10 * H)),
        ("@2026-11-22T10:00:00.250Z", point(PointKind.TIMESTAMP, NOV22 + 10 * H + 250)),
        ("@2026-11-22T10:00:00.123456Z", point(PointKind.TIMESTAMP, NOV22 + 10 * H + 123)),
        ("@2026-11-22T10:00:00+01:00", point(PointKind.TIMESTAMP, NOV22 + 9 * H)),
        ("@2026-11-22T10:00:00-0230", point(PointKind.TIMESTAMP, NOV22 + 12 * H + 30 * 60_000)),
        ("@1969-12-31T23:59:59Z", point(PointKind.TIMESTAMP, -1000)),
        ("@-1h", point(PointKind.AGO, H)),
        ("@-30m", point(PointKind.AGO, 30 * 60_000)),
        ("@-2d", point(PointKind.AGO, 2 * 24 * H)),
        ("@-1w", point(PointKind.AGO, 7 * 24 * H)),
        ("@-90s", point(PointKind.AGO, 90_000)),
        ("@-500ms", point(PointKind.AGO, 500)),
        ("@-1h30m", point(PointKind.AGO, H + 30 * 60_000)),
        ("@-1H", point(PointKind.AGO, H)),
        ("@-0s", point(PointKind.AGO, 0)),
    ],
)
def test_single_points(text: str, start: tuple[PointKind, int]) -> None:
    assert parsed(text) == (start, None)
    spec = parse_offset_spec(text)
    assert not spec.is_range
    assert str(spec) == text.strip()


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("beginning:end", point(PointKind.BEGINNING), point(PointKind.END)),
        ("100:200", point(PointKind.OFFSET, 100), point(PointKind.OFFSET, 200)),
        ("-10:end", point(PointKind.BEFORE_END, 10), point(PointKind.END)),
        ("+5:-5", point(PointKind.AFTER_BEGINNING, 5), point(PointKind.BEFORE_END, 5)),
        ("@-1h:end", point(PointKind.AGO, H), point(PointKind.END)),
        ("@-1h:@-30m", point(PointKind.AGO, H), point(PointKind.AGO, 30 * 60_000)),
        ("beginning:@2026-11-22", point(PointKind.BEGINNING), point(PointKind.TIMESTAMP, NOV22)),
        (
            "@2026-11-22:@2026-11-22T10:00:00Z",
            point(PointKind.TIMESTAMP, NOV22),
            point(PointKind.TIMESTAMP, NOV22 + 10 * H),
        ),
        ("@2026-11-22T10:00:00Z:end", point(PointKind.TIMESTAMP, NOV22 + 10 * H), point(PointKind.END)),
        (
            "@2026-11-22T10:00:00Z:200",
            point(PointKind.TIMESTAMP, NOV22 + 10 * H),
            point(PointKind.OFFSET, 200),
        ),
        (
            "@2026-11-22T10:00:00+01:00:-5",
            point(PointKind.TIMESTAMP, NOV22 + 9 * H),
            point(PointKind.BEFORE_END, 5),
        ),
        ("@2026-11-22T10:00:100", point(PointKind.TIMESTAMP, NOV22 + 10 * H), point(PointKind.OFFSET, 100)),
        (
            "@1700000000000:@1700000001000",
            point(PointKind.TIMESTAMP, 1_700_000_000_000),
            point(PointKind.TIMESTAMP, 1_700_000_001_000),
        ),
        (" 1 : 2 ", point(PointKind.OFFSET, 1), point(PointKind.OFFSET, 2)),
    ],
)
def test_ranges(text: str, start: tuple[PointKind, int], end: tuple[PointKind, int]) -> None:
    assert parsed(text) == (start, end)
    assert parse_offset_spec(text).is_range


def test_a_time_with_seconds_wins_over_a_range() -> None:
    # documented: the whole text is tried as one point first
    assert parsed("@2026-11-22T10:00:30") == (point(PointKind.TIMESTAMP, NOV22 + 10 * H + 30_000), None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty offset spec"),
        ("   ", "empty offset spec"),
        ("foo", "bad offset 'foo'"),
        ("begining", "bad offset"),
        ("1.5", "bad offset"),
        ("-x", "bad relative offset '-x'"),
        ("+", "bad relative offset"),
        ("--1", "bad relative offset"),
        ("@", "nothing after '@'"),
        ("@yesterday", "bad time 'yesterday'"),
        ("@-1y", "bad duration '-1y'"),
        ("@-h", "bad duration"),
        ("@-", "bad duration"),
        ("@2026-13-01", "month must be in 1..12"),
        ("@2026-02-30", "day is out of range"),
        ("@2026-11-22T25:00", "hour must be in 0..23"),
        ("@2026-11-22T10", "bad time"),
        ("@26-11-22", "bad time"),
        ("1:", "missing END"),
        (":2", "missing START"),
        (":", "missing"),
        ("beginning:foo", "bad offset 'foo' in 'beginning:foo'"),
        ("foo:end", "bad offset 'foo' in 'foo:end'"),
        ("@2026-11-22T10:00:00Q:end", "bad offset '00Q:end'"),
        ("1:2:3", "bad offset"),
        ("99999999999999999999", "too large"),
    ],
)
def test_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(OffsetSpecError) as info:
        parse_offset_spec(text)
    assert message in str(info.value), str(info.value)


def test_error_messages_list_the_grammar() -> None:
    with pytest.raises(OffsetSpecError) as info:
        parse_offset_spec("nope")
    text = str(info.value)
    for word in ("beginning", "end", "-N", "@TIME", "START:END"):
        assert word in text


def test_parse_point_rejects_ranges_and_is_a_value_error() -> None:
    assert parse_offset_point("end") == OffsetPoint(PointKind.END, 0, "end")
    assert parse_offset_point("@-1h").kind is PointKind.AGO
    with pytest.raises(OffsetSpecError):
        parse_offset_point("1:2")
    assert issubclass(OffsetSpecError, ValueError)


def test_canonical_forms_parse_back() -> None:
    for text in ["beginning", "end", "7", "-3", "+2", "@1700000000000", "@-1h", "@2026-11-22"]:
        p = parse_offset_spec(text).start
        again = parse_offset_point(p.canonical())
        assert (again.kind, again.value) == (p.kind, p.value)
    spec = OffsetSpec(OffsetPoint(PointKind.OFFSET, 1), OffsetPoint(PointKind.END))
    assert str(spec) == "1:end"


def test_point_timestamps() -> None:
    assert parse_offset_point("@-1h").timestamp(now_ms=10 * H) == 9 * H
    assert parse_offset_point("@123").timestamp() == 123
    assert parse_offset_point("end").timestamp() is None
    assert parse_offset_point("@-1h").is_time and not parse_offset_point("5").is_time


# ----------------------------------------------------------------------------------------- resolving


class FakeLookup:
    """Partitions with a log [begin, end) whose record i has timestamp ts0 + i * step."""

    def __init__(
        self, logs: Mapping[TopicPartition, tuple[int, int]], ts0: int = 1_000_000, step: int = 1000
    ):
        self.logs = dict(logs)
        self.ts0 = ts0
        self.step = step
        self.calls: list[str] = []

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("beginning")
        return {tp: self.logs[tp][0] for tp in partitions}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("end")
        return {tp: self.logs[tp][1] for tp in partitions}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self.calls.append("times")
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            begin, end = self.logs[tp]
            found = None
            for offset in range(begin, end):
                if self.ts0 + offset * self.step >= ts:
                    found = OffsetAndTimestamp(offset, self.ts0 + offset * self.step)
                    break
            out[tp] = found
        return out


P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
LOOKUP_LOGS = {P0: (10, 110), P1: (0, 0)}  # P0 holds offsets 10..109, P1 is empty


def ranges(
    text: str, *, until: str | None = None, now: int = 10_000_000
) -> dict[TopicPartition, OffsetRange]:
    lookup = FakeLookup(LOOKUP_LOGS)
    end_point = parse_offset_point(until) if until else None
    return resolve_ranges(parse_offset_spec(text), [P0, P1], lookup, until=end_point, now_ms=now)


@pytest.mark.parametrize(
    ("text", "p0", "p1"),
    [
        ("beginning", OffsetRange(10), OffsetRange(0)),
        ("end", OffsetRange(110), OffsetRange(0)),
        ("50", OffsetRange(50), OffsetRange(0)),
        ("5", OffsetRange(10), OffsetRange(0)),  # below the log start: clamped up
        ("500", OffsetRange(110), OffsetRange(0)),  # past the end: clamped down
        ("-10", OffsetRange(100), OffsetRange(0)),
        ("-1000", OffsetRange(10), OffsetRange(0)),
        ("+5", OffsetRange(15), OffsetRange(0)),
        ("+1000", OffsetRange(110), OffsetRange(0)),
        ("@1050000", OffsetRange(50), OffsetRange(0)),  # ts0 + 50 * step
        ("@1050001", OffsetRange(51), OffsetRange(0)),
        ("@0", OffsetRange(10), OffsetRange(0)),
        ("@99999999", OffsetRange(110), OffsetRange(0)),  # after the last record: the end
        ("@-8950s", OffsetRange(50), OffsetRange(0)),  # now 10_000_000 - 8_950_000 = 1_050_000
        ("beginning:end", OffsetRange(10, 110), OffsetRange(0, 0)),
        ("20:30", OffsetRange(20, 30), OffsetRange(0, 30)),
        ("20:500", OffsetRange(20, 500), OffsetRange(0, 500)),  # an END past the end waits for it
        ("-10:end", OffsetRange(100, 110), OffsetRange(0, 0)),
        ("beginning:-10", OffsetRange(10, 100), OffsetRange(0, 0)),
        ("beginning:+5", OffsetRange(10, 15), OffsetRange(0, 5)),
        ("@1050000:@1060000", OffsetRange(50, 60), OffsetRange(0, 0)),
        ("beginning:@1060000", OffsetRange(10, 60), OffsetRange(0, 0)),
        # an END time after every record but in the past: the current end
        ("beginning:@9000000", OffsetRange(10, 110), OffsetRange(0, 0)),
        # an END time in the future: read until a record reaches it
        ("beginning:@20000000", OffsetRange(10, None, 20_000_000), OffsetRange(0, None, 20_000_000)),
        ("@-8950s:@-8940s", OffsetRange(50, 60), OffsetRange(0, 0)),
    ],
)
def test_resolve_ranges(text: str, p0: OffsetRange, p1: OffsetRange) -> None:
    assert ranges(text) == {P0: p0, P1: p1}


def test_until_is_the_end_of_a_range() -> None:
    assert ranges("beginning", until="end") == ranges("beginning:end")
    assert ranges("-5", until="@1108000") == {P0: OffsetRange(105, 108), P1: OffsetRange(0, 0)}
    with pytest.raises(OffsetSpecError, match="has an END already"):
        ranges("1:2", until="end")


def test_ranges_know_when_they_are_done() -> None:
    r = OffsetRange(10, 20)
    assert not r.empty and not r.reached(19, 0) and r.reached(20, 0)
    assert OffsetRange(10, 10).empty and OffsetRange(10, 5).empty and not OffsetRange(10).empty
    timed = OffsetRange(0, None, 5000)
    assert not timed.reached(100, 4999) and timed.reached(100, 5000)
    assert not OffsetRange(0).reached(10**12, 10**15)


def test_lookups_are_batched() -> None:
    lookup = FakeLookup({TopicPartition("t", p): (0, 100) for p in range(8)})
    tps = list(lookup.logs)
    resolve_ranges(parse_offset_spec("@-1h:@-30m"), tps, lookup, now_ms=10**7)
    assert lookup.calls == ["beginning", "end", "times", "times"]  # one per kind, not per partition
    lookup.calls.clear()
    resolve_ranges(parse_offset_spec("beginning:end"), tps, lookup)
    assert lookup.calls == ["beginning", "end"]


def test_resolve_points_one_or_per_partition() -> None:
    lookup = FakeLookup(LOOKUP_LOGS)
    assert resolve_points(parse_offset_point("-5"), [P0, P1], lookup) == {P0: 105, P1: 0}
    per = {P0: parse_offset_point("@1020000"), P1: parse_offset_point("end")}
    assert resolve_points(per, None, lookup) == {P0: 20, P1: 0}
    assert resolve_points(parse_offset_point("end"), [], lookup) == {}
    with pytest.raises(TypeError):
        resolve_points(parse_offset_point("end"), None, lookup)


def test_a_destructive_target_past_the_end_is_refused_not_clamped() -> None:
    lookup = FakeLookup(LOOKUP_LOGS)  # P0: 10..109 (end 110), P1: empty (end 0)
    assert resolve_points(parse_offset_point("500"), [P0], lookup) == {P0: 110}  # reading: clamped
    with pytest.raises(OffsetPastEndError) as refused:
        resolve_points(parse_offset_point("500"), [P0, P1], lookup, refuse_past_end=True)
    assert [(p.topic_partition, p.offset, p.high_watermark) for p in refused.value.partitions] == [
        (P0, 500, 110),
        (P1, 500, 0),
    ]
    assert str(refused.value) == (
        "offset 500 is past the end of t-0 (high watermark 110), t-1 (high watermark 0)"
    )
    with pytest.raises(OffsetPastEndError, match=r"t-0 \(high watermark 110\)$"):
        resolve_points(parse_offset_point("+101"), [P0], lookup, refuse_past_end=True)  # 10 + 101
    # the end itself, points inside the log, -N beyond the start and times are not refused
    inside = (("110", 110), ("+100", 110), ("end", 110), ("-1000", 10), ("5", 10), ("@99999999", 110))
    for text, expected in inside:
        assert resolve_points(parse_offset_point(text), [P0], lookup, refuse_past_end=True) == {P0: expected}
    assert past_end(parse_offset_point("111"), 10, 110) == 111
    assert past_end(parse_offset_point("+101"), 10, 110) == 111
    assert past_end(parse_offset_point("110"), 10, 110) is None
    assert past_end(parse_offset_point("-1"), 10, 110) is None


class FakeAdmin:
    """An AdminClient's list_offsets over FakeLookup's logs."""

    def __init__(self, lookup: FakeLookup) -> None:
        self.lookup = lookup

    def list_offsets(self, specs, spec="latest", *, timeout=None):
        from kctl.client.admin import OffsetResult

        if isinstance(specs, Mapping):
            found = self.lookup.offsets_for_times(specs)
            return {
                tp: OffsetResult(tp, f.offset, f.timestamp) if f else OffsetResult(tp, -1, -1)
                for tp, f in found.items()
            }
        source = self.lookup.beginning_offsets if spec == "earliest" else self.lookup.end_offsets
        return {tp: OffsetResult(tp, o) for tp, o in source(specs).items()}


def test_admin_lookup_adapter() -> None:
    lookup = AdminLookup(FakeAdmin(FakeLookup(LOOKUP_LOGS)))
    assert resolve_ranges(parse_offset_spec("@1050000:end"), [P0, P1], lookup) == {
        P0: OffsetRange(50, 110),
        P1: OffsetRange(0, 0),
    }


@pytest.mark.parametrize(
    "text", ["5:3", "+10:+2", "-2:-10", "@2026-11-22:@2026-11-21", "@-1h:@-2h", "end:beginning"]
)
def test_a_range_that_ends_before_it_starts_is_an_error(text: str) -> None:
    with pytest.raises(OffsetSpecError, match="ends before it starts"):
        parse_offset_spec(text)


@pytest.mark.parametrize(
    "text", ["3:5", "5:5", "+2:+10", "-10:-2", "@-2h:@-1h", "beginning:end", "10:end", "end:5"]
)
def test_ranges_in_order_or_not_comparable_without_the_broker_parse(text: str) -> None:
    assert parse_offset_spec(text).is_range
