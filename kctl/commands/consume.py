"""`kctl consume TOPIC...`: read records from a running cluster and write them to stdout.

The command parses what to read (topics by name or `--pattern`, `--partition`) and where (the
offset grammar of `kctl.client.offsets_spec`: `--offset`, `--until`), reads with the console
consumer of `kctl.console` (`ReadLoop`, or `consume_as_group` with `--group`) and renders each
record as it arrives (table, json, jsonl, raw or a template), flushing after every record (jsonl
and raw: after the records of each fetch, written in one piece) so that pipelines see records at once.
The client library is imported inside the command, so that `kctl consume --help` starts fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import enum
import json
import os
import re
import select
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO, TextIO

import typer

from kctl.commands.clients import (
    CONSUMER_DEFAULTS,
    client_errors,
    connect,
    consumer_config,
    zookeeper_bootstrap,
)
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    ClusterOptions,
    cluster_options,
    known_properties,
    load_config,
)
from kctl.commands.output import format_cell, info
from kctl.console.formats import JsonLinesEncoder, RecordTemplate, readable_timestamp, record_envelope

if TYPE_CHECKING:
    from types import TracebackType

    from kctl.client.consumer import ConsumerRecord
    from kctl.client.offsets_spec import OffsetPoint, OffsetSpec

app = typer.Typer(  # one command: its help is the docstring of `consume`
    invoke_without_command=True,
    subcommand_metavar="",
    context_settings={"allow_interspersed_args": True},
)

FORMAT_NAMES = ("table", "json", "jsonl", "raw")


# -- output ----------------------------------------------------------------------------------------
class Writer:
    """Writes records to stdout in one format; `flush` writes out what `write` kept back, `close`
    ends the output. Used as a context manager, it flushes on the way out, also on an interrupt."""

    def write(self, record: ConsumerRecord) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Write out the records `write` kept back (the writers that write in chunks)."""

    def close(self) -> None:
        """Finish the output (e.g. the closing bracket of a JSON array)."""

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.flush()
            return
        with contextlib.suppress(OSError, ValueError):  # stdout gone: the error on its way out says it
            self.flush()  # an interrupt: the records read so far still go out


class ChunkWriter(Writer):
    """Keeps each record's bytes and writes them in one piece per `flush` (after each fetch): the
    machine formats (jsonl, raw) of millions of records, without a write and flush per record."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.pending: list[bytes] = []

    def flush(self) -> None:
        if self.pending:
            self.out.write(b"".join(self.pending))
            self.pending.clear()
            self.out.flush()

    def close(self) -> None:
        self.flush()


class JsonLinesWriter(ChunkWriter):
    """One JSON object per line (`kctl.console.formats.JsonLinesEncoder`: the envelope, fast)."""

    def __init__(self, out: BinaryIO) -> None:
        super().__init__(out)
        self.encode = JsonLinesEncoder().encode

    def write(self, record: ConsumerRecord) -> None:
        self.pending.append(self.encode(record))


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


class RawWriter(ChunkWriter):
    """Each value's bytes and a newline (a null value: an empty line)."""

    def write(self, record: ConsumerRecord) -> None:
        value = record.value
        self.pending.append(value + b"\n" if value is not None else b"\n")


class TableWriter(Writer):
    """Aligned text, one line per record as it arrives: TOPIC PARTITION OFFSET TIMESTAMP KEY HEADERS
    VALUE; control characters escaped, non-UTF-8 bytes as \\x escapes, absent values as `-`."""

    KEY_WIDTH_CAP = 32
    HEADERS_WIDTH_CAP = 40

    def __init__(self, out: TextIO, topics: Sequence[str]) -> None:
        self.out = out
        self.topic_width = max([5, *(len(t) for t in topics)])
        self.key_width = 3
        self.headers_width = 7
        self.started = False

    def _line(
        self, topic: str, partition: str, offset: str, timestamp: str, key: str, headers: str, value: str
    ) -> str:
        # Streamed rows: a column grows (up to its cap) when a wider cell comes, and never shrinks.
        if len(key) > self.key_width:
            self.key_width = min(len(key), self.KEY_WIDTH_CAP)
        if len(headers) > self.headers_width:
            self.headers_width = min(len(headers), self.HEADERS_WIDTH_CAP)
        return (
            f"{topic:<{self.topic_width}}  {partition:>9}  {offset:>10}  {timestamp:<24}  "
            f"{key:<{self.key_width}}  {headers:<{self.headers_width}}  {value}".rstrip()
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


class TemplateWriter(Writer):
    """Each record in a template (`kctl.console.formats.RecordTemplate`), as raw bytes."""

    def __init__(self, out: BinaryIO, template: str) -> None:
        self.out = out
        self.render = RecordTemplate(template).render

    def write(self, record: ConsumerRecord) -> None:
        self.out.write(self.render(record))
        self.out.flush()


def make_writer(fmt: str, topics: Sequence[str]) -> Writer:
    """The writer for a `--format` value (raises KctlError USAGE for an unknown one); no value: a
    table on a terminal, JSON lines otherwise (a pipe or a file gets what a program can read)."""
    if not fmt:
        fmt = "table" if sys.stdout.isatty() else "jsonl"
    name = fmt.strip().lower()
    if "%" not in fmt and "\\" not in fmt:
        if name == "jsonl":
            return JsonLinesWriter(sys.stdout.buffer)
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


# -- configuration ----------------------------------------------------------------------------------
def topic_names(arguments: list[str] | None, options: list[str] | None) -> list[str]:
    """The topics named as arguments or with -t/--topic (kcat's way); both at once must agree."""
    named = list(dict.fromkeys(arguments or []))
    flagged = list(dict.fromkeys(options or []))
    if named and flagged and set(named) != set(flagged):
        raise KctlError(
            f"topics named twice, differently: {', '.join(named)} as arguments and "
            f"{', '.join(flagged)} with -t; name them one way",
            ExitCode.USAGE,
        )
    return named or flagged


def group_properties(
    config_file: Path | None,
    overrides: list[str] | None,
    bootstrap_server: str,
    group: str,
    offset: str | None,
    zookeeper: str | None = None,
) -> tuple[str, dict[str, str]]:
    """Bootstrap servers and the consumer + group properties for `--group` (both property sets are
    accepted; `--offset beginning|end` sets auto.offset.reset for partitions without a committed offset).
    `zookeeper` (or -X zookeeper.connect) makes it a ZooKeeper-coordinated group, whose properties
    (`ZkGroupConfig`: offsets.storage, dual.commit.enabled, ...) are then accepted too."""
    from kctl.client.config import ClientConfigError
    from kctl.client.consumer import ConsumerConfig
    from kctl.client.group_config import GroupConfig
    from kctl.client.zkgroup import ZkGroupConfig

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
    zk_keys = ZkGroupConfig.known_keys() - GroupConfig.known_keys() - ConsumerConfig.known_keys()
    known = ConsumerConfig.known_keys() | GroupConfig.known_keys() | zk_keys
    properties = known_properties(resolved, known, "consumer")
    properties["group.id"] = group
    if zookeeper is not None:
        properties["zookeeper.connect"] = zookeeper
    if not properties.get("zookeeper.connect") and zk_keys & set(properties):
        raise KctlError(
            f"{', '.join(sorted(zk_keys & set(properties)))}: ZooKeeper-mode properties need --zookeeper",
            ExitCode.USAGE,
        )
    try:  # before connecting: bad settings are a usage error, not an unexpected one
        (ZkGroupConfig if properties.get("zookeeper.connect") else GroupConfig).from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid consumer property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, properties


def _group_until_end(end_point: OffsetPoint | None) -> bool:
    """Whether a group member drains to the end (`--group G --until end`); any other --until is a
    usage error with --group."""
    from kctl.client.offsets_spec import PointKind

    if end_point is None:
        return False
    if end_point.kind is not PointKind.END:
        raise KctlError(
            "with --group, --until takes only `end` (drain the assigned partitions and exit)", ExitCode.USAGE
        )
    return True


# -- the reader of stdout --------------------------------------------------------------------------
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


# -- the command -----------------------------------------------------------------------------------
class Isolation(enum.StrEnum):
    """`--isolation`: Kafka's isolation.level values."""

    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


@app.callback()
@cluster_options
def consume(
    topics: Annotated[
        list[str] | None,
        typer.Argument(metavar="[TOPIC]...", help="Topics to read (or --pattern).", show_default=False),
    ] = None,
    topic_options: Annotated[
        list[str] | None,
        typer.Option(
            "--topic",
            "-t",
            metavar="TOPIC",
            help="A topic to read, as kcat's -t: the same as naming it as an argument (repeatable).",
        ),
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
                "Where to start, or a range START:END — beginning, end, N, -N (N before the end), "
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
    exit_at_end: Annotated[
        bool,
        typer.Option("--exit-at-end", "-e", help="kcat's -e: the same as --until end."),
    ] = False,
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
                "starts at its committed offsets (else --offset beginning|end) and commits as it goes. "
                "With --until end: drain the assigned partitions to their end offsets, commit, leave "
                "the group and exit 0."
            ),
        ),
    ] = None,
    zookeeper: Annotated[
        str | None,
        typer.Option(
            "--zookeeper",
            metavar="HOST:PORT[/CHROOT]",
            envvar="KCTL_ZOOKEEPER",
            help=(
                "With --group: a ZooKeeper-coordinated group (the seeds' consumer: registered under "
                "/consumers/GROUP, offsets in ZooKeeper unless -X offsets.storage=kafka); the "
                "brokers are found there too (/brokers/ids) unless -b names them."
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
                "%h headers, %% percent; \\t \\n escapes, e.g. '%k\\t%v\\n'. Default: table on a "
                "terminal, jsonl when stdout is a pipe or a file."
            ),
            show_default=False,
        ),
    ] = "",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr at the end.")] = False,
    isolation: Annotated[
        Isolation | None,
        typer.Option(
            "--isolation",
            case_sensitive=False,
            help=(
                "read_committed: only the records of committed transactions (up to the last stable "
                "offset, no aborted record); read_uncommitted (the default, as Kafka): every record. "
                "Wins over -X isolation.level."
            ),
            show_default=False,
        ),
    ] = None,
    *,
    cluster: ClusterOptions,
) -> None:
    """Read records from topics and write them to stdout as they arrive.

    Without --until or a range, reads until interrupted (Ctrl-C, exit status 130). Offsets use one
    grammar everywhere: `--offset beginning --until end` copies what a topic holds now;
    `--offset @-1h` starts an hour ago; `--offset 100:200` reads offsets 100 to 199 (a range's end is
    exclusive, and applies to every partition read: an END offset a partition has not reached yet
    is waited for); times without a zone are UTC. A START past the end starts at the end. As in
    kcat, `-t TOPIC` names a topic too and `-e` exits at the end (`--until end`).

    jsonl writes {"topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
    "headers"}: keys, values and header values as strings when valid UTF-8, else {"base64": ...};
    headers as [key, value] pairs. `kctl produce --format jsonl` reads it back. Records are flushed
    as they are written (jsonl and raw: the records of each fetch at once); a closed stdout (`| head`)
    ends the command quietly.

    Client properties use Kafka's consumer names (fetch.max.wait.ms, max.partition.fetch.bytes,
    check.crcs, ...) in --config or -X. `--isolation read_committed` reads what transactional producers
    committed and never what they aborted (`--until end` is then the last stable offset). Exit status
    2 for a bad offset spec or option, 3 when a topic or partition does not exist or no broker can be
    reached."""
    from kctl.client.consumer import Consumer
    from kctl.client.offsets_spec import (
        OffsetSpecError,
        parse_offset_point,
        parse_offset_spec,
        resolve_ranges,
    )
    from kctl.console.consume import ReadLoop, consume_as_group, default_spec
    from kctl.console.selection import assign_ranges, select_partitions, select_topics

    names = topic_names(topics, topic_options)
    if exit_at_end:
        if until is not None and until.strip().lower() != "end":
            raise KctlError(f"-e is --until end: not both -e and --until {until}", ExitCode.USAGE)
        until = "end"
    if any(not n for n in names):
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    if not names and pattern is None:
        raise KctlError(
            "name at least one topic, or give --pattern (see kctl consume --help)", ExitCode.USAGE
        )
    regex = None
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise KctlError(f"invalid --pattern {pattern!r}: {error}", ExitCode.USAGE) from None
    try:
        spec: OffsetSpec = parse_offset_spec(default_spec(offset, until))
    except OffsetSpecError as error:
        raise KctlError(f"invalid --offset: {error}", ExitCode.USAGE) from None
    try:
        end_point: OffsetPoint | None = parse_offset_point(until) if until is not None else None
    except OffsetSpecError as error:
        raise KctlError(f"invalid --until: {error}", ExitCode.USAGE) from None
    if spec.end is not None and end_point is not None:
        raise KctlError(f"--offset {spec} has an END already; drop --until or the range", ExitCode.USAGE)
    if zookeeper is not None and group is None:
        raise KctlError("--zookeeper goes with --group", ExitCode.USAGE)
    if group == "":
        raise KctlError("a group id must not be empty", ExitCode.USAGE)
    if group is not None:
        until_end = _group_until_end(end_point)
        if partitions or spec.end is not None:
            raise KctlError("--group cannot be combined with a range or --partition", ExitCode.USAGE)
        if names and pattern is not None:
            raise KctlError("with --group, name topics or give --pattern, not both", ExitCode.USAGE)
        bootstrap, properties = group_properties(*cluster, group, offset, zookeeper)
        if isolation is not None:
            properties["isolation.level"] = isolation.value
        if until_end and properties.get("zookeeper.connect"):
            raise KctlError("--until end needs a broker-coordinated group, not ZooKeeper", ExitCode.USAGE)
        if zookeeper is not None:  # the brokers registered there, unless named
            found = zookeeper_bootstrap(cluster, zookeeper)
            bootstrap = bootstrap if found is cluster else found.bootstrap_server
        writer = make_writer(fmt, names)
        with client_errors(), writer:
            count = consume_as_group(
                bootstrap,
                properties,
                names,
                pattern,
                writer.write,
                max_records,
                PipeWatch(sys.stdout).check,
                writer.flush,
                until_end=until_end,
            )
            writer.close()
        if not quiet:
            drained = " (drained to the end offsets)" if until_end else ""
            info(f"consumed {count} record{'s' if count != 1 else ''} as a member of group {group}{drained}")
        return
    bootstrap, config = consumer_config(*cluster)
    if isolation is not None:
        config = dataclasses.replace(config, isolation_level=isolation.value)
    consumer = connect(Consumer, bootstrap, config)
    count = 0
    with client_errors(), consumer:
        selected = select_topics(consumer.cluster, names, regex)
        tps = select_partitions(consumer.cluster, selected, partitions or [])
        ranges = resolve_ranges(spec, tps, consumer, until=end_point)
        writer = make_writer(fmt, selected)
        assign_ranges(consumer, ranges)
        with writer:
            loop = ReadLoop(
                consumer, ranges, writer.write, max_records, PipeWatch(sys.stdout).check, writer.flush
            )
            count = loop.run()
            writer.close()
    if not quiet:
        info(f"consumed {count} record{'s' if count != 1 else ''} from {len(ranges)} partition(s)")
