"""`kctl consume TOPIC...`: read records from a running cluster and write them to stdout.

The command resolves what to read (topics by name or `--pattern`, `--partition`), positions each
partition with the offset grammar of `kctl.client.offsets_spec` (`--offset`, `--until`), reads with
`kctl.client.Consumer` and renders each record as it arrives (table, json, jsonl, raw or a
template), flushing after every record so that pipelines see records at once. Consumer groups
(`--group`) plug in where the partitions are assigned (`_assign`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO

import typer

from kctl.client import (
    BrokerResponseError,
    ClientConfigError,
    TopicPartition,
)
from kctl.client.cluster import ClusterClient
from kctl.client.consumer import Consumer, ConsumerConfig
from kctl.client.fetcher import ConsumerRecord
from kctl.client.group import GroupConsumer
from kctl.client.group_config import GroupConfig
from kctl.client.offsets_spec import (
    OffsetPoint,
    OffsetRange,
    OffsetSpec,
    OffsetSpecError,
    parse_offset_point,
    parse_offset_spec,
    resolve_ranges,
)
from kctl.commands.clients import client_errors
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServerOption,
    ConfigFileOption,
    ConfigOverrideOption,
    known_properties,
    load_config,
)
from kctl.commands.output import format_cell, info, json_safe
from kctl.protocol import ErrorCode

app = typer.Typer(  # one command: its help is the docstring of `consume`
    invoke_without_command=True,
    no_args_is_help=True,
    subcommand_metavar="",
    context_settings={"allow_interspersed_args": True},
)

CONSUMER_DEFAULTS = {"auto.offset.reset": "earliest"}
"""Client properties the command sets unless --config or -X do: records deleted under a running
`kctl consume` make it go on from the log start rather than jump to the end."""

FORMAT_NAMES = ("table", "json", "jsonl", "raw")


# -- output ----------------------------------------------------------------------------------------
def readable_timestamp(ms: int) -> str:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds (`2026-11-22T10:00:00.123Z`); `-` if none."""
    if ms < 0:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def record_envelope(record: ConsumerRecord) -> dict[str, Any]:
    """The JSON object of a record (what `--format jsonl` writes and `kctl produce --format jsonl`
    reads): key, value and header values as a string when valid UTF-8, else {"base64": ...}; headers
    as a list of [key, value] pairs (keys may repeat, values may be null)."""
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": record.timestamp_type.label,
        "key": json_safe(record.key),
        "value": json_safe(record.value),
        "headers": [[k, json_safe(v)] for k, v in record.headers],
    }


class Writer:
    """Writes records to stdout in one format; `close` ends the output."""

    def write(self, record: ConsumerRecord) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish the output (e.g. the closing bracket of a JSON array)."""


class JsonLinesWriter(Writer):
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, record: ConsumerRecord) -> None:
        self.out.write(json.dumps(record_envelope(record), ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()


class JsonArrayWriter(Writer):
    """One JSON array, streamed: each record one line, written (and flushed) as it comes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0

    def write(self, record: ConsumerRecord) -> None:
        text = json.dumps(record_envelope(record), ensure_ascii=False)
        self.out.write(("[\n  " if not self.count else ",\n  ") + text)
        self.out.flush()
        self.count += 1

    def close(self) -> None:
        self.out.write("[]\n" if not self.count else "\n]\n")
        self.out.flush()


class RawWriter(Writer):
    """Each value's bytes and a newline (a null value: an empty line)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out

    def write(self, record: ConsumerRecord) -> None:
        value = record.value
        self.out.write(value + b"\n" if value is not None else b"\n")
        self.out.flush()


class TableWriter(Writer):
    """Aligned text, one line per record as it arrives: TOPIC PARTITION OFFSET TIMESTAMP KEY HEADERS
    VALUE; control characters escaped, non-UTF-8 bytes as \\x escapes, absent values as `-`."""

    KEY_WIDTH_CAP = 32

    def __init__(self, out: TextIO, topics: Sequence[str]) -> None:
        self.out = out
        self.topic_width = max([5, *(len(t) for t in topics)])
        self.key_width = 3
        self.started = False

    def _line(
        self, topic: str, partition: str, offset: str, timestamp: str, key: str, headers: str, value: str
    ) -> str:
        if len(key) > self.key_width:
            self.key_width = min(len(key), self.KEY_WIDTH_CAP)
        return (
            f"{topic:<{self.topic_width}}  {partition:>9}  {offset:>10}  {timestamp:<24}  "
            f"{key:<{self.key_width}}  {headers}  {value}".rstrip()
            + "\n"
        )

    def write(self, record: ConsumerRecord) -> None:
        if not self.started:
            self.started = True
            self.out.write(self._line("TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "HEADERS", "VALUE"))
        headers = ",".join(f"{k}={format_cell(v)}" for k, v in record.headers) or "-"
        self.out.write(
            self._line(
                record.topic,
                str(record.partition),
                str(record.offset),
                readable_timestamp(record.timestamp),
                format_cell(record.key),
                headers,
                format_cell(record.value),
            )
        )
        self.out.flush()


_TEMPLATE_ESCAPES = {"t": b"\t", "n": b"\n", "r": b"\r", "0": b"\0", "\\": b"\\"}
_TEMPLATE_FIELDS = "tpoTkvh"


def _headers_bytes(record: ConsumerRecord) -> bytes:
    return b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in record.headers)


_FIELD_BYTES: dict[str, Callable[[ConsumerRecord], bytes]] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: b"%d" % r.partition,
    "o": lambda r: b"%d" % r.offset,
    "T": lambda r: b"%d" % r.timestamp,
    "k": lambda r: r.key if r.key is not None else b"",
    "v": lambda r: r.value if r.value is not None else b"",
    "h": _headers_bytes,
}


def compile_template(template: str) -> list[bytes | Callable[[ConsumerRecord], bytes]]:
    """Parse a `--format` template into literal bytes and field getters. `%t` topic, `%p` partition,
    `%o` offset, `%T` timestamp (epoch ms), `%k` key, `%v` value (raw bytes; null as empty), `%h`
    headers (`k=v,k2=v2`), `%%` a percent sign; escapes `\\t`, `\\n`, `\\r`, `\\0`, `\\\\`.
    Raises ValueError for an unknown field or escape."""
    parts: list[bytes | Callable[[ConsumerRecord], bytes]] = []
    literal = bytearray()
    i = 0
    while i < len(template):
        ch = template[i]
        if ch in "%\\" and i + 1 >= len(template):
            raise ValueError(f"template ends with a lone {ch!r}")
        if ch == "%":
            name = template[i + 1]
            if name == "%":
                literal += b"%"
            elif name in _FIELD_BYTES:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(_FIELD_BYTES[name])
            else:
                raise ValueError(f"unknown field %{name} (known: %t %p %o %T %k %v %h %%)")
            i += 2
        elif ch == "\\":
            name = template[i + 1]
            if name not in _TEMPLATE_ESCAPES:
                raise ValueError(f"unknown escape \\{name} (known: \\t \\n \\r \\0 \\\\)")
            literal += _TEMPLATE_ESCAPES[name]
            i += 2
        else:
            literal += ch.encode()
            i += 1
    if literal:
        parts.append(bytes(literal))
    return parts


class TemplateWriter(Writer):
    def __init__(self, out: BinaryIO, template: str) -> None:
        self.out = out
        self.parts = compile_template(template)

    def write(self, record: ConsumerRecord) -> None:
        self.out.write(b"".join(p if type(p) is bytes else p(record) for p in self.parts))  # type: ignore[operator,misc]
        self.out.flush()


def make_writer(fmt: str, topics: Sequence[str]) -> Writer:
    """The writer for a `--format` value (raises KctlError USAGE for an unknown one)."""
    name = fmt.strip().lower()
    if "%" not in fmt and "\\" not in fmt:
        if name == "jsonl":
            return JsonLinesWriter(sys.stdout)
        if name == "json":
            return JsonArrayWriter(sys.stdout)
        if name == "raw":
            return RawWriter(sys.stdout.buffer)
        if name == "table":
            return TableWriter(sys.stdout, topics)
        hint = difflib.get_close_matches(name, FORMAT_NAMES, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise KctlError(
            f"unknown --format {fmt!r}{suggestion}: expected table, json, jsonl, raw, "
            "or a template such as '%k\\t%v\\n'",
            ExitCode.USAGE,
        )
    try:
        return TemplateWriter(sys.stdout.buffer, fmt)
    except ValueError as error:
        raise KctlError(f"invalid --format template {fmt!r}: {error}", ExitCode.USAGE) from None


# -- configuration and partitions ------------------------------------------------------------------
def consumer_config(
    config_file: Path | None, overrides: list[str] | None, bootstrap_server: str
) -> tuple[str, ConsumerConfig]:
    """The bootstrap servers and consumer settings from --config, -X and --bootstrap-server."""
    resolved = load_config(config_file, overrides, CONSUMER_DEFAULTS, bootstrap_server=bootstrap_server)
    known = ConsumerConfig.known_keys()
    properties = known_properties(resolved, known, "consumer")
    try:
        config = ConsumerConfig.from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid consumer property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, config  # type: ignore[return-value]


def group_properties(
    config_file: Path | None,
    overrides: list[str] | None,
    bootstrap_server: str,
    group: str,
    offset: str | None,
) -> tuple[str, dict[str, str]]:
    """Bootstrap servers and the consumer + group properties for `--group` (both property sets are
    accepted; `--offset beginning|end` sets auto.offset.reset for partitions without a committed offset)."""
    defaults = dict(CONSUMER_DEFAULTS)
    if offset is not None:
        reset = {"beginning": "earliest", "end": "latest"}.get(offset.strip().lower())
        if reset is None:
            raise KctlError(
                "with --group, --offset is beginning or end (where a group without "
                "committed offsets starts); use `kctl group rewind` to move a group",
                ExitCode.USAGE,
            )
        defaults["auto.offset.reset"] = reset
    resolved = load_config(config_file, overrides, defaults, bootstrap_server=bootstrap_server)
    known = ConsumerConfig.known_keys() | GroupConfig.known_keys()
    properties = known_properties(resolved, known, "consumer")
    properties["group.id"] = group
    return resolved.bootstrap_servers, properties


def consume_as_group(
    bootstrap: str,
    properties: dict[str, str],
    names: list[str],
    pattern: str | None,
    writer: Writer,
    max_records: int | None,
) -> int:
    """Read as a member of the group until --max records or Ctrl-C; offsets are committed as it
    goes (enable.auto.commit) and when it leaves the group."""
    count = 0
    pipe = PipeWatch(sys.stdout)
    with GroupConsumer(bootstrap, properties) as consumer:
        if pattern is not None:
            consumer.subscribe(pattern=pattern)
        else:
            consumer.subscribe(names)
        while max_records is None or count < max_records:
            records = consumer.poll(1.0, max_records=None if max_records is None else max_records - count)
            if not records:
                pipe.check()
            for record in records:
                writer.write(record)
                count += 1
        consumer.commit()
    writer.close()
    return count


def select_topics(cluster: ClusterClient, names: Sequence[str], pattern: re.Pattern[str] | None) -> list[str]:
    """The named topics (each must exist) and the non-internal topics whose whole name matches
    `pattern`, in that order without duplicates."""
    selected: list[str] = []
    if names:
        metadata = cluster.refresh_metadata(names)
        missing = []
        for name in names:
            topic = metadata.topic(name)
            if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                missing.append(name)
            elif topic.error_code:
                raise BrokerResponseError(topic.error_code, context=f"topic {name!r}")
        if missing:
            listing = ", ".join(repr(n) for n in missing)
            raise KctlError(f"topic {listing} does not exist", ExitCode.NOT_FOUND)
        selected += names
    if pattern is not None:
        metadata = cluster.refresh_metadata(None)
        matched = sorted(
            t.name
            for t in metadata.topics.values()
            if not t.is_internal and not t.error_code and pattern.fullmatch(t.name)
        )
        if not matched:
            raise KctlError(f"no topic matches --pattern {pattern.pattern!r}", ExitCode.NOT_FOUND)
        selected += [t for t in matched if t not in selected]
    return selected


def select_partitions(
    cluster: ClusterClient, topics: Sequence[str], wanted: Sequence[int]
) -> list[TopicPartition]:
    """Every partition of the topics, or those numbered in `wanted` (each topic must have them)."""
    partitions: list[TopicPartition] = []
    for name in topics:
        topic = cluster.topic_metadata(name)
        numbers = [p.partition for p in topic.partitions]
        if wanted:
            absent = [p for p in wanted if p not in numbers]
            if absent:
                raise KctlError(
                    f"topic {name!r} has no partition {', '.join(map(str, absent))} "
                    f"(it has {len(numbers)}: 0-{len(numbers) - 1})",
                    ExitCode.NOT_FOUND,
                )
            numbers = [p for p in numbers if p in wanted]
        partitions += [TopicPartition(name, p) for p in numbers]
    return partitions


def _assign(consumer: Consumer, ranges: dict[TopicPartition, OffsetRange]) -> None:
    """Assign the partitions and seek each to its start. (Group mode replaces this with a
    subscription whose positions come from the group's committed offsets.)"""
    consumer.assign(list(ranges))
    for tp, offset_range in ranges.items():
        consumer.seek(tp, offset_range.start)


# -- the read loop ---------------------------------------------------------------------------------
class PipeWatch:
    """Notices, without writing, that the reader of a stdout pipe has gone (`| head` exited while
    the command waits for new records): the pipe's write end then reports POLLERR."""

    def __init__(self, stream: TextIO) -> None:
        self.poller: select.poll | None = None
        try:
            fd = stream.fileno()
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                self.poller = select.poll()
                self.poller.register(fd, select.POLLOUT)
        except (OSError, ValueError, AttributeError):
            self.poller = None

    def check(self) -> None:
        """Raise BrokenPipeError if nobody reads the pipe any more (the command ends quietly, 0)."""
        if self.poller is not None:
            for _, events in self.poller.poll(0):
                if events & (select.POLLERR | select.POLLHUP):
                    raise BrokenPipeError("stdout was closed")


class ReadLoop:
    """Polls the consumer and writes records until every partition reached its range's end, `--max`
    records were written, or forever. A partition whose end is reached is paused."""

    def __init__(
        self,
        consumer: Consumer,
        ranges: dict[TopicPartition, OffsetRange],
        writer: Writer,
        max_records: int | None,
    ) -> None:
        self.consumer = consumer
        self.writer = writer
        self.max_records = max_records
        self.count = 0
        self.bounded = {
            tp: r for tp, r in ranges.items() if r.stop is not None or r.stop_timestamp is not None
        }
        self.follow = len(self.bounded) < len(ranges)  # some partition has no end
        self.done: set[TopicPartition] = {tp for tp, r in self.bounded.items() if r.empty}
        self.pipe = PipeWatch(sys.stdout)

    def finished(self) -> bool:
        if self.max_records is not None and self.count >= self.max_records:
            return True
        return not self.follow and len(self.done) >= len(self.bounded)

    def _finish(self, tp: TopicPartition) -> None:
        self.done.add(tp)
        self.consumer.pause([tp])

    def run(self) -> int:
        consumer, write, bounded, done = self.consumer, self.writer.write, self.bounded, self.done
        if self.done:
            consumer.pause(list(self.done))
        while not self.finished():
            records = consumer.poll(1.0)
            if not records:
                self.pipe.check()
            for record in records:
                end = None
                if bounded:
                    tp = TopicPartition(record.topic, record.partition)
                    if tp in done:
                        continue
                    end = bounded.get(tp)
                    if end is not None and end.reached(record.offset, record.timestamp):
                        self._finish(tp)
                        continue
                write(record)
                self.count += 1
                if self.max_records is not None and self.count >= self.max_records:
                    return self.count
                if end is not None and end.stop is not None and record.offset + 1 >= end.stop:
                    self._finish(tp)
            for tp, end in bounded.items():  # ends reached without a record (control batches, gaps)
                if tp not in done and end.stop is not None and consumer.position(tp) >= end.stop:
                    self._finish(tp)
        return self.count


# -- the command -----------------------------------------------------------------------------------
def _default_spec(offset: str | None, until: str | None) -> str:
    """Without --offset: `end` (new records, as kcat and kafka-console-consumer do), but `beginning`
    when an end is given with --until (`--until end` alone dumps what is there)."""
    if offset is not None:
        return offset
    return "beginning" if until is not None else "end"


@app.callback()
def consume(
    topics: Annotated[
        list[str] | None,
        typer.Argument(metavar="[TOPIC]...", help="Topics to read (or --pattern).", show_default=False),
    ] = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern",
            metavar="REGEX",
            help="Also read every topic whose whole name matches REGEX (internal topics excluded).",
        ),
    ] = None,
    partitions: Annotated[
        list[int] | None,
        typer.Option(
            "--partition", "-p", metavar="N", min=0, help="Read only partition N of each topic (repeatable)."
        ),
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option(
            "--offset",
            "-o",
            metavar="SPEC",
            help=(
                "Where to start, or a range START:END: beginning, end, N, -N (N before the end), "
                "+N (N after the beginning), @TIME (epoch ms, 2026-11-22, 2026-11-22T10:00:00Z, "
                "@-1h), e.g. @-1h:end. Default: end, or beginning with --until."
            ),
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            "-u",
            metavar="END",
            help=(
                "Stop each partition before END (same grammar): `end` is the end offset when the "
                "command starts. Exit when every partition is done."
            ),
        ),
    ] = None,
    max_records: Annotated[
        int | None, typer.Option("--max", "-n", metavar="N", min=1, help="Exit after N records.")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            metavar="GROUP",
            help=(
                "Read as a member of consumer group GROUP: the group assigns the partitions, reading "
                "starts at its committed offsets (else --offset beginning|end) and commits as it goes."
            ),
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help=(
                "table, json, jsonl (one JSON object per record), raw (values, one per line), or a "
                "template: %t topic, %p partition, %o offset, %T timestamp, %k key, %v value, "
                "%h headers, %% percent; \\t \\n escapes, e.g. '%k\\t%v\\n'."
            ),
        ),
    ] = "table",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr at the end.")] = False,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Read records from topics and write them to stdout as they arrive.

    Without --until or a range, reads until interrupted (Ctrl-C, exit status 130). Offsets use one
    grammar everywhere: `--offset beginning --until end` copies what a topic holds now;
    `--offset @-1h` starts an hour ago; `--offset 100:200` reads offsets 100 to 199 (a range's end is
    exclusive, and applies to every partition read: an END offset a partition has not reached yet
    is waited for); times without a zone are UTC. A START past the end starts at the end.

    jsonl writes {"topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
    "headers"}: keys, values and header values as strings when valid UTF-8, else {"base64": ...};
    headers as [key, value] pairs. `kctl produce --format jsonl` reads it back. Every record is
    flushed as it is written; a closed stdout (`| head`) ends the command quietly.

    Client properties use Kafka's consumer names (fetch.max.wait.ms, max.partition.fetch.bytes,
    check.crcs, ...) in --config or -X. Exit status 2 for a bad offset spec or option, 3 when a
    topic or partition does not exist or no broker can be reached."""
    names = list(dict.fromkeys(topics or []))
    if any(not n for n in names):
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    if not names and pattern is None:
        raise KctlError("name at least one topic, or give --pattern", ExitCode.USAGE)
    regex = None
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise KctlError(f"invalid --pattern {pattern!r}: {error}", ExitCode.USAGE) from None
    try:
        spec: OffsetSpec = parse_offset_spec(_default_spec(offset, until))
    except OffsetSpecError as error:
        raise KctlError(f"invalid --offset: {error}", ExitCode.USAGE) from None
    try:
        end_point: OffsetPoint | None = parse_offset_point(until) if until is not None else None
    except OffsetSpecError as error:
        raise KctlError(f"invalid --until: {error}", ExitCode.USAGE) from None
    if spec.end is not None and end_point is not None:
        raise KctlError(f"--offset {spec} has an END already; drop --until or the range", ExitCode.USAGE)
    if group is not None:
        if until is not None or partitions or spec.end is not None:
            raise KctlError("--group cannot be combined with --until, a range or --partition", ExitCode.USAGE)
        if names and pattern is not None:
            raise KctlError("with --group, name topics or give --pattern, not both", ExitCode.USAGE)
        bootstrap, properties = group_properties(config_file, overrides, bootstrap_server, group, offset)
        with client_errors():
            count = consume_as_group(
                bootstrap, properties, names, pattern, make_writer(fmt, names), max_records
            )
        if not quiet:
            info(f"consumed {count} record{'s' if count != 1 else ''} as a member of group {group}")
        return
    bootstrap, config = consumer_config(config_file, overrides, bootstrap_server)
    try:
        consumer = Consumer(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    count = 0
    with client_errors(), consumer:
        selected = select_topics(consumer.cluster, names, regex)
        tps = select_partitions(consumer.cluster, selected, partitions or [])
        ranges = resolve_ranges(spec, tps, consumer, until=end_point)
        writer = make_writer(fmt, selected)
        _assign(consumer, ranges)
        count = ReadLoop(consumer, ranges, writer, max_records).run()
        writer.close()
    if not quiet:
        info(f"consumed {count} record{'s' if count != 1 else ''} from {len(ranges)} partition(s)")
