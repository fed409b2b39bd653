"""The one offset grammar of kctl: where to start reading a partition and, optionally, where to stop.

Used by ``kctl consume --offset`` and ``--until``, and by every other command that positions a
consumer (e.g. rewinding a group). A spec is parsed once (``parse_offset_spec``) into an immutable
``OffsetSpec`` and resolved per partition (``resolve_ranges``/``resolve_points``) against the
partition's log start offset, its end offset (high watermark) and offsets-for-times lookups.

Grammar (keywords are case-insensitive)::

    SPEC   := POINT | POINT ":" POINT               a single start, or a range START:END
    POINT  := "beginning" | "earliest"              the log start offset
            | "end" | "latest"                      the end offset (the next offset to be written)
            | N                                     the absolute offset N
            | "-" N                                 N records before the end
            | "+" N                                 N records after the beginning
            | "@" TIME                              the first record at or after TIME
    TIME   := MILLIS                                epoch milliseconds: @1700000000000
            | DATE                                  a day, midnight UTC: @2026-11-22
            | DATE ("T"|" ") HH:MM[:SS[.fff]][ZONE] RFC 3339: @2026-11-22T10:00:00Z (no zone: UTC)
            | "-" DURATION                          that long before now: @-1h, @-30m, @-2d, @-1h30m
    ZONE   := "Z" | ("+"|"-") HH[:]MM
    DURATION := (N UNIT)+ with UNIT one of ms, s, m, h, d, w

Semantics. A range's END is exclusive, like a Python slice: ``100:200`` is offsets 100 to 199,
``beginning:end`` is everything present when the range is resolved, ``@-1h:@-30m`` is the records of
that half hour. A START is clamped into ``[beginning, end]`` (an offset past the end starts at the
end; a time after the last record starts at the end) — where a position is read from. Where the
point is a target that deletes or skips records (trimming a log, moving a group's offsets),
``resolve_points(..., refuse_past_end=True)`` refuses an absolute offset (``N``, or ``+N``) past the
end instead (``OffsetPastEndError``): clamped, a typo would name the end, i.e. every record. An END
that is an absolute offset (or ``+N``) past the current end is kept, so the reader waits for it; an
END time with no record at or after it yet stops at the current end if the time has passed, and
otherwise at the first later record whose timestamp reaches it (``OffsetRange.stop_timestamp``).

RFC 3339 times contain colons; in a range the longest valid START wins, so ``@2026-11-22T10:00:00:end``
is the range from that time to the end. Write the seconds of a START time when END is a small number.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from kctl.common.topic_partition import TopicPartition

__all__ = [
    "AdminLookup",
    "OffsetAndTimestamp",
    "OffsetLookup",
    "OffsetPastEndError",
    "OffsetPoint",
    "OffsetRange",
    "OffsetSpec",
    "OffsetSpecError",
    "PastEnd",
    "PointKind",
    "parse_offset_point",
    "parse_offset_spec",
    "past_end",
    "resolve_points",
    "resolve_ranges",
]


class OffsetSpecError(ValueError):
    """An offset spec that does not follow the grammar (the message says what is wrong)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PastEnd:
    """A partition whose end (high watermark) lies before the offset a point names."""

    topic_partition: TopicPartition
    offset: int
    high_watermark: int

    def __str__(self) -> str:
        return f"{self.topic_partition} (high watermark {self.high_watermark})"


class OffsetPastEndError(ValueError):
    """A target offset past the end of partitions' logs, refused rather than clamped to the end
    (``resolve_points(..., refuse_past_end=True)``); ``partitions`` says which, and their ends."""

    def __init__(self, point: OffsetPoint, partitions: Sequence[PastEnd]) -> None:
        self.point = point
        self.partitions = list(partitions)
        named = ", ".join(str(p) for p in self.partitions)
        super().__init__(f"offset {point} is past the end of {named}")


class PointKind(enum.StrEnum):
    """What an ``OffsetPoint`` is relative to."""

    BEGINNING = "beginning"
    END = "end"
    OFFSET = "offset"  # value: the absolute offset
    AFTER_BEGINNING = "after-beginning"  # value: N of +N
    BEFORE_END = "before-end"  # value: N of -N
    TIMESTAMP = "timestamp"  # value: epoch milliseconds
    AGO = "ago"  # value: milliseconds before now


class OffsetAndTimestamp(NamedTuple):
    """The answer of an offsets-for-times lookup: the first offset at or after a time, and its
    record's timestamp."""

    offset: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetPoint:
    """One position of the grammar: ``kind`` and its number (see ``PointKind``); ``text`` as given."""

    kind: PointKind
    value: int = 0
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.canonical()

    def canonical(self) -> str:
        """The point written in the grammar (``@`` times as epoch milliseconds)."""
        kind = self.kind
        if kind is PointKind.BEGINNING:
            return "beginning"
        if kind is PointKind.END:
            return "end"
        if kind is PointKind.OFFSET:
            return str(self.value)
        if kind is PointKind.AFTER_BEGINNING:
            return f"+{self.value}"
        if kind is PointKind.BEFORE_END:
            return f"-{self.value}"
        if kind is PointKind.TIMESTAMP:
            return f"@{self.value}"
        return f"@-{self.value}ms"

    @property
    def is_time(self) -> bool:
        """Whether the point is resolved with an offsets-for-times lookup."""
        return self.kind in (PointKind.TIMESTAMP, PointKind.AGO)

    def timestamp(self, now_ms: int | None = None) -> int | None:
        """The epoch-millisecond time of an ``@`` point (``now_ms`` default: the clock); None otherwise."""
        if self.kind is PointKind.TIMESTAMP:
            return self.value
        if self.kind is PointKind.AGO:
            return (now_ms if now_ms is not None else _now_ms()) - self.value
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed spec: where to start, and where to stop (exclusive; None: no end)."""

    start: OffsetPoint
    end: OffsetPoint | None = None
    text: str = ""

    def __str__(self) -> str:
        return self.text or (
            self.start.canonical() + (f":{self.end.canonical()}" if self.end is not None else "")
        )

    @property
    def is_range(self) -> bool:
        return self.end is not None


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetRange:
    """A spec resolved for one partition: read from ``start``; stop before ``stop`` (None: never),
    or at the first record whose timestamp is at least ``stop_timestamp`` (None: no such bound)."""

    start: int
    stop: int | None = None
    stop_timestamp: int | None = None

    @property
    def empty(self) -> bool:
        """Whether nothing is to be read (the stop offset is at or before the start)."""
        return self.stop is not None and self.stop <= self.start

    def reached(self, offset: int, timestamp: int) -> bool:
        """Whether a record at ``offset`` with ``timestamp`` lies at or past the end of the range."""
        if self.stop is not None and offset >= self.stop:
            return True
        return self.stop_timestamp is not None and timestamp >= self.stop_timestamp


class OffsetLookup(Protocol):
    """What resolving needs; ``kctl.client.Consumer`` provides it (``AdminLookup`` adapts an admin client)."""

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]: ...


# ----------------------------------------------------------------------------------------- parsing

_KEYWORDS: dict[str, PointKind] = {
    "beginning": PointKind.BEGINNING,
    "earliest": PointKind.BEGINNING,
    "end": PointKind.END,
    "latest": PointKind.END,
}
_INTEGER = re.compile(r"[0-9]+")
_DATE = r"(?P<date>\d{4}-\d{2}-\d{2})"
_CLOCK = r"(?P<clock>\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)"
_ZONE = r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})"
_DATETIME = re.compile(rf"{_DATE}(?:[Tt ]{_CLOCK}{_ZONE}?)?")
_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w))+", re.IGNORECASE)
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w)", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_MAX_OFFSET = 2**63 - 1
_HELP = (
    "expected beginning, end, N, -N, +N, @TIME (epoch ms, 2026-11-22, 2026-11-22T10:00:00Z, "
    "or a duration ago like @-1h), or a range START:END"
)


def _in(original: str) -> str:
    """`` in '<spec>'`` to name the whole spec in a message about one of its parts."""
    return f" in {original.strip()!r}" if ":" in original else ""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _integer(text: str, what: str, original: str) -> int:
    value = int(text)
    if value > _MAX_OFFSET:
        raise OffsetSpecError(f"{what} {text}{_in(original)} is too large")
    return value


def _parse_time(body: str, original: str) -> tuple[PointKind, int]:
    if not body:
        raise OffsetSpecError(f"nothing after '@'{_in(original)}: {_HELP}")
    if body.startswith("-"):
        duration = body[1:]
        if not _DURATION.fullmatch(duration):
            raise OffsetSpecError(
                f"bad duration {body!r}{_in(original)}: expected '-' then numbers with units "
                "ms, s, m, h, d or w, e.g. @-1h or @-1h30m"
            )
        total = sum(int(n) * _UNIT_MS[unit.lower()] for n, unit in _DURATION_PART.findall(duration))
        return PointKind.AGO, _integer(str(total), "duration", original)
    if _INTEGER.fullmatch(body):
        return PointKind.TIMESTAMP, _integer(body, "timestamp", original)
    match = _DATETIME.fullmatch(body)
    if match is None:
        raise OffsetSpecError(
            f"bad time {body!r}{_in(original)}: expected epoch milliseconds, a date (2026-11-22), "
            "an RFC 3339 time (2026-11-22T10:00:00Z) or a duration ago (-1h)"
        )
    date, clock, zone = match.group("date", "clock", "zone")
    iso = date + (f"T{clock}" if clock else "T00:00")
    if zone and zone not in "Zz":
        iso += zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError as error:
        raise OffsetSpecError(f"bad time {body!r}{_in(original)}: {error}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return PointKind.TIMESTAMP, _epoch_ms(moment)


def _epoch_ms(moment: dt.datetime) -> int:
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _point(text: str, original: str) -> OffsetPoint:
    """Parse one POINT; raises OffsetSpecError."""
    if not text:
        raise OffsetSpecError(f"empty offset{_in(original)}: {_HELP}")
    keyword = _KEYWORDS.get(text.lower())
    if keyword is not None:
        return OffsetPoint(keyword, 0, text)
    head, body = text[0], text[1:]
    if head == "@":
        kind, value = _parse_time(body, original)
        return OffsetPoint(kind, value, text)
    if _INTEGER.fullmatch(text):
        return OffsetPoint(PointKind.OFFSET, _integer(text, "offset", original), text)
    if head in "+-" and _INTEGER.fullmatch(body):
        kind = PointKind.AFTER_BEGINNING if head == "+" else PointKind.BEFORE_END
        return OffsetPoint(kind, _integer(body, "count", original), text)
    if head in "+-":
        raise OffsetSpecError(f"bad relative offset {text!r}{_in(original)}: expected {head}N, e.g. {head}10")
    raise OffsetSpecError(f"bad offset {text!r}{_in(original)}: {_HELP}")


def parse_offset_point(text: str) -> OffsetPoint:
    """Parse a single POINT (no range), e.g. the value of ``--until``. Raises ``OffsetSpecError``."""
    stripped = text.strip()
    return _point(stripped, text)


# Points of one kind that can be compared without asking the broker: (kind, sign) where the sign says
# whether a larger value is later (+1) or earlier (-1).
_COMPARABLE = {
    PointKind.OFFSET: 1,
    PointKind.AFTER_BEGINNING: 1,
    PointKind.TIMESTAMP: 1,
    PointKind.BEFORE_END: -1,
    PointKind.AGO: -1,
}


def _check_order(start: OffsetPoint, end: OffsetPoint, original: str) -> None:
    """A range whose END is before its START is a mistake, not an empty read: say so."""
    reversed_range = (start.kind, end.kind) == (PointKind.END, PointKind.BEGINNING)
    sign = _COMPARABLE.get(start.kind)
    if sign is not None and start.kind == end.kind:
        reversed_range = (end.value - start.value) * sign < 0
    if reversed_range:
        raise OffsetSpecError(
            f"the range {original.strip()!r} ends before it starts: write START:END with END after START"
        )


def parse_offset_spec(text: str) -> OffsetSpec:
    """Parse ``POINT`` or ``START:END``; raises ``OffsetSpecError`` with what is wrong and the grammar."""
    stripped = text.strip()
    if not stripped:
        raise OffsetSpecError(f"empty offset spec: {_HELP}")
    try:
        return OffsetSpec(_point(stripped, text), None, stripped)
    except OffsetSpecError as error:
        first_error = error
    if ":" not in stripped:
        raise first_error
    # A range. RFC 3339 times contain colons: try every colon, the last one first, so the longest
    # START that parses wins.
    colons = [i for i, ch in enumerate(stripped) if ch == ":"]
    start_error: OffsetSpecError | None = None
    end_error: OffsetSpecError | None = None
    for i in reversed(colons):
        head, tail = stripped[:i].strip(), stripped[i + 1 :].strip()
        if not head:
            start_error = OffsetSpecError(
                f"missing START in the range {text!r}: write START:END, e.g. beginning:end"
            )
            continue
        try:
            start = _point(head, text)
        except OffsetSpecError as error:
            start_error = start_error or error
            continue
        if not tail:
            end_error = end_error or OffsetSpecError(
                f"missing END in the range {text!r}: write START:END, e.g. beginning:end"
            )
            continue
        try:
            end = _point(tail, text)
        except OffsetSpecError as error:
            end_error = end_error or error
            continue
        _check_order(start, end, text)
        return OffsetSpec(start, end, stripped)
    if end_error is not None:
        raise end_error
    if _CLOCK_TIME.match(stripped) or start_error is None:
        raise first_error  # a time with a clock: its own error says more than a split of it
    raise start_error


_CLOCK_TIME = re.compile(r"@\d{4}-\d{2}-\d{2}[Tt ]\d")


# ----------------------------------------------------------------------------------------- resolving


def _clamp(value: int, low: int, high: int) -> int:
    return low if value < low else high if value > high else value


def past_end(point: OffsetPoint, beginning: int, end: int) -> int | None:
    """The offset ``point`` names when it is an absolute one (``N``, or ``+N`` from ``beginning``)
    past ``end``; None otherwise (every other kind resolves inside the log, and so does an offset
    at or before the end)."""
    if point.kind is PointKind.OFFSET:
        named = point.value
    elif point.kind is PointKind.AFTER_BEGINNING:
        named = beginning + point.value
    else:
        return None
    return named if named > end else None


def resolve_points(
    points: OffsetPoint | Mapping[TopicPartition, OffsetPoint],
    partitions: Iterable[TopicPartition] | None,
    lookup: OffsetLookup,
    *,
    now_ms: int | None = None,
    refuse_past_end: bool = False,
) -> dict[TopicPartition, int]:
    """The start offset each partition's point names, clamped into ``[beginning, end]``.

    ``points``: one point for every partition of ``partitions``, or a point per partition (then
    ``partitions`` may be None). One lookup of each kind covers all partitions. With
    ``refuse_past_end`` an absolute offset past a partition's end is not clamped: every such
    partition is named in the ``OffsetPastEndError`` raised (a target that deletes or skips
    records)."""
    wanted = _per_partition(points, partitions)
    if not wanted:
        return {}
    now = now_ms if now_ms is not None else _now_ms()
    begin, end, times = _lookups(lookup, {tp: [p] for tp, p in wanted.items()}, now)
    if refuse_past_end:
        beyond = [
            PastEnd(tp, named, end[tp])
            for tp, point in sorted(wanted.items())
            if (named := past_end(point, begin[tp], end[tp])) is not None
        ]
        if beyond:
            first = wanted[beyond[0].topic_partition]
            raise OffsetPastEndError(first, beyond)
    return {tp: _start(point, begin[tp], end[tp], times.get((tp, 0))) for tp, point in wanted.items()}


def resolve_ranges(
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    lookup: OffsetLookup,
    *,
    until: OffsetPoint | None = None,
    now_ms: int | None = None,
) -> dict[TopicPartition, OffsetRange]:
    """Resolve ``spec`` for every partition: where to start and where to stop.

    ``until`` is an END given apart from the spec (``--until``); a spec may not have both."""
    if until is not None and spec.end is not None:
        raise OffsetSpecError(f"the range {spec} has an END already; do not give another one")
    end_point = spec.end if spec.end is not None else until
    tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
    if not tps:
        return {}
    now = now_ms if now_ms is not None else _now_ms()
    points = [spec.start] if end_point is None else [spec.start, end_point]
    begin, end, times = _lookups(lookup, {tp: points for tp in tps}, now)
    ranges = {}
    for tp in tps:
        b, e = begin[tp], end[tp]
        start = _start(spec.start, b, e, times.get((tp, 0)))
        if end_point is None:
            ranges[tp] = OffsetRange(start)
            continue
        found = times.get((tp, 1)) if end_point.is_time else None
        ranges[tp] = _stop(start, end_point, b, e, found, now)
    return ranges


def _per_partition(
    points: OffsetPoint | Mapping[TopicPartition, OffsetPoint], partitions: Iterable[TopicPartition] | None
) -> dict[TopicPartition, OffsetPoint]:
    if isinstance(points, OffsetPoint):
        if partitions is None:
            raise TypeError("give the partitions to resolve one point for")
        return {TopicPartition(*tp): points for tp in partitions}
    return {TopicPartition(*tp): p for tp, p in points.items()}


def _lookups(
    lookup: OffsetLookup, points: Mapping[TopicPartition, Sequence[OffsetPoint]], now: int
) -> tuple[
    dict[TopicPartition, int],
    dict[TopicPartition, int],
    dict[tuple[TopicPartition, int], OffsetAndTimestamp | None],
]:
    """Beginning and end offsets of every partition, and the offsets-for-times lookups the points
    need, keyed by ``(tp, index of the point)``."""
    tps = list(points)
    begin = lookup.beginning_offsets(tps)
    end = lookup.end_offsets(tps)
    # offsets_for_times takes one time per partition: one call per point index
    times: dict[tuple[TopicPartition, int], OffsetAndTimestamp | None] = {}
    width = max((len(p) for p in points.values()), default=0)
    for index in range(width):
        query = {}
        for tp, ps in points.items():
            if index < len(ps) and ps[index].is_time:
                ts = ps[index].timestamp(now)
                query[tp] = max(ts if ts is not None else 0, 0)
        if query:
            for tp, found in lookup.offsets_for_times(query).items():
                times[(tp, index)] = found
    return begin, end, times


def _start(point: OffsetPoint, b: int, e: int, found: OffsetAndTimestamp | None) -> int:
    kind = point.kind
    if kind is PointKind.BEGINNING:
        return b
    if kind is PointKind.END:
        return e
    if kind is PointKind.OFFSET:
        return _clamp(point.value, b, e)
    if kind is PointKind.AFTER_BEGINNING:
        return _clamp(b + point.value, b, e)
    if kind is PointKind.BEFORE_END:
        return _clamp(e - point.value, b, e)
    # a time: the first record at or after it; none: the end
    return _clamp(found.offset, b, e) if found is not None and found.offset >= 0 else e


def _stop(
    start: int, point: OffsetPoint, b: int, e: int, found: OffsetAndTimestamp | None, now: int
) -> OffsetRange:
    kind = point.kind
    if kind is PointKind.BEGINNING:
        return OffsetRange(start, b)
    if kind is PointKind.END:
        return OffsetRange(start, e)
    if kind is PointKind.OFFSET:
        return OffsetRange(start, max(point.value, b))
    if kind is PointKind.AFTER_BEGINNING:
        return OffsetRange(start, b + point.value)
    if kind is PointKind.BEFORE_END:
        return OffsetRange(start, _clamp(e - point.value, b, e))
    ts = point.timestamp(now)
    assert ts is not None
    if found is not None and found.offset >= 0:
        return OffsetRange(start, max(found.offset, b))
    if ts <= now:
        return OffsetRange(start, e)  # every record present is older, and later ones are newer
    return OffsetRange(start, None, ts)


# ----------------------------------------------------------------------------------------- adapters


class AdminLookup:
    """``OffsetLookup`` over an ``AdminClient`` (``list_offsets``), for tools without a consumer."""

    def __init__(self, admin: Any, *, timeout: float | None = None) -> None:
        self.admin = admin
        self.timeout = timeout

    def _list(self, specs: Any, spec: Any = "latest") -> dict[TopicPartition, Any]:
        from kctl.client.errors import BrokerResponseError

        results = self.admin.list_offsets(specs, spec, timeout=self.timeout)
        for tp, result in results.items():
            if not result.ok:
                raise BrokerResponseError(result.error_code, result.error_message, context=f"partition {tp}")
        return results

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: r.offset for tp, r in self._list(list(partitions), "earliest").items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: r.offset for tp, r in self._list(list(partitions), "latest").items()}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        results = self._list(dict(timestamps))
        return {
            tp: OffsetAndTimestamp(r.offset, r.timestamp) if r.offset >= 0 else None
            for tp, r in results.items()
        }
