"""Parsing of `kctl group rewind`'s option values into the rewind strategies' inputs: the topic
scope (``orders:0,2-4``, also `kctl group delete --offsets`'s, and the partitions it names),
durations (Kafka's ISO-8601 ``PT1H`` / ``P1DT2H30M`` or kctl's ``1h30m``) and points in time
(RFC 3339, a date, epoch ms). Errors are ``RewindOptionError`` with a message that names the
option."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from kctl.client.offsets_spec import OffsetPoint, OffsetSpecError, PointKind, parse_offset_point
from kctl.common.topic_partition import TopicPartition


class RewindOptionError(ValueError):
    """An option value of a rewind that does not parse."""


_PARTITIONS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def topic_scope(values: Sequence[str]) -> dict[str, list[int] | None]:
    """`--topic` values: topic -> its partitions (None: all of them)."""
    scope: dict[str, list[int] | None] = {}
    for text in values:
        topic, sep, spec = text.partition(":")
        if not topic:
            raise RewindOptionError(f"invalid --topic {text!r}: no topic name")
        if not sep:
            scope[topic] = None
            continue
        spec = spec.replace(" ", "")
        if not _PARTITIONS.match(spec):
            raise RewindOptionError(f"invalid --topic {text!r}: expected TOPIC:P,P or TOPIC:FIRST-LAST")
        partitions: list[int] = []
        for item in spec.split(","):
            first, _, last = item.partition("-")
            low, high = int(first), int(last or first)
            if high < low:
                raise RewindOptionError(f"invalid --topic {text!r}: {item} is an empty range")
            partitions += range(low, high + 1)
        known = scope.get(topic, [])
        scope[topic] = None if known is None and topic in scope else sorted({*(known or []), *partitions})
    return scope


def partitions_in_scope(
    committed: Iterable[TopicPartition], scope: Mapping[str, list[int] | None]
) -> list[TopicPartition]:
    """The partitions a `--topic` scope names: those of ``committed`` in a topic it names whole or
    among its partitions, then every partition it names that ``committed`` lacks."""
    partitions = [
        tp
        for tp in committed
        if tp.topic in scope and (scope[tp.topic] is None or tp.partition in (scope[tp.topic] or []))
    ]
    for topic, wanted in scope.items():
        for p in wanted or []:
            tp = TopicPartition(topic, p)
            if tp not in partitions:
                partitions.append(tp)
    return partitions


def duration_ms(text: str) -> int:
    """`--by-duration`: Kafka's ISO-8601 form (PT1H, P1DT2H30M) or kctl's (1h30m, 2d, 90s)."""
    value = text.strip()
    match = _ISO_DURATION.match(value)
    if match and any(match.groupdict().values()):
        parts = {k: float(v) for k, v in match.groupdict().items() if v}
        seconds = (
            parts.get("d", 0) * 86400 + parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)
        )
        return int(seconds * 1000)
    try:
        point = parse_offset_point(f"@-{value.lstrip('-')}")
    except OffsetSpecError:
        raise RewindOptionError(
            f"invalid --by-duration {text!r}: expected an ISO-8601 duration (PT1H, P1DT12H) or 1h30m, 2d, 45s"
        ) from None
    if point.kind is not PointKind.AGO:
        raise RewindOptionError(f"invalid --by-duration {text!r}")
    return point.value


def datetime_point(text: str) -> OffsetPoint:
    """`--to-datetime`: 2026-11-22T10:00:00[.sss][Z|+01:00] (no zone: UTC), a date, or epoch ms."""
    value = text.strip().removeprefix("@")
    try:
        point = parse_offset_point(f"@{value}")
    except OffsetSpecError:
        point = None
    if point is None or point.kind is not PointKind.TIMESTAMP:
        raise RewindOptionError(
            f"invalid --to-datetime {text!r}: expected YYYY-MM-DDTHH:MM:SS[.sss][ZONE] (UTC without a zone), "
            "YYYY-MM-DD or epoch milliseconds"
        )
    return point
