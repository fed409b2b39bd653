"""`kctl produce TOPIC`: read records from stdin and send them to a topic with `kctl.client.Producer`.

Input (`--format`): `lines` (default) makes one record of every line (optionally `KEY<SEP>VALUE` with
`--key-separator`); `jsonl` reads the objects `kctl consume --format jsonl` writes. stdin is read as
a stream (constant memory: the producer's `buffer.memory` applies back-pressure), each record is
sent as soon as it is parsed, and the command waits for every acknowledgement before it exits.

Records that cannot be parsed or are not delivered are reported on stderr with their line number
(`kctl: error: line 7: ...`) and make the exit status 1; 3 means the broker cannot be reached or
the topic does not exist (and is not auto-created); 2 a usage error.
"""

from __future__ import annotations

import collections
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from kctl.client import BrokerResponseError, ClientConfigError, KafkaError
from kctl.client.cluster import ClusterClient
from kctl.client.producer import Producer, ProducerConfig, RecordFuture
from kctl.commands.clients import client_errors
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_BOOTSTRAP_SERVER,
    DEFAULT_FORMAT,
    BootstrapServerOption,
    ConfigFileOption,
    ConfigOverrideOption,
    known_properties,
    load_config,
)
from kctl.commands.output import OutputFormat, bytes_from_json, info, stderr_console
from kctl.protocol import ErrorCode

app = typer.Typer(  # one command: its help is the docstring of `produce`
    invoke_without_command=True,
    no_args_is_help=True,
    subcommand_metavar="",
    context_settings={"allow_interspersed_args": True},
)

MAX_ERRORS_SHOWN = 20
"""Failed records reported one by one on stderr; after that only the count."""
MAX_UNREPORTED = 1_000_000
"""Records sent whose outcome is not reported yet (kept in input order); more make reading wait."""

Headers = list[tuple[str, bytes | None]]
Record = tuple[
    bytes | None, bytes | None, Headers, int | None, int | None
]  # key, value, headers, partition, ts


# -- input -----------------------------------------------------------------------------------------
class InputError(ValueError):
    """A line that is not a record."""


def _strip_newline(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\n") else line


def line_parser(
    key_separator: bytes | None, null_marker: bytes | None, headers: Headers
) -> Callable[[bytes], Record]:
    """`--format lines`: the line is the value; with a separator, the key is what precedes its first
    occurrence (a line without it has a null key); a value equal to the null marker is null."""

    def parse(line: bytes) -> Record:
        line = _strip_newline(line)
        key: bytes | None = None
        value: bytes | None = line
        if key_separator is not None:
            before, found, after = line.partition(key_separator)
            if found:
                key, value = before, after
        if null_marker is not None and value == null_marker:
            value = None
        return key, value, headers, None, None

    return parse


def _json_bytes(document: dict[str, Any], field: str) -> bytes | None:
    value = document.get(field)
    if value is None:
        return None
    try:
        return bytes_from_json(value)
    except (ValueError, TypeError) as error:  # binascii.Error is a ValueError
        raise InputError(f'"{field}": {error}') from None


def _json_headers(raw: Any) -> Headers:
    if raw is None:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    if not isinstance(raw, dict | list):
        raise InputError('"headers" must be a list of [key, value] pairs or an object')
    headers: Headers = []
    for item in items:
        if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[0], str):
            raise InputError(f'"headers": expected [key, value] with a string key, got {item!r}')
        name, value = item
        try:
            headers.append((name, None if value is None else bytes_from_json(value)))
        except (ValueError, TypeError) as error:
            raise InputError(f'"headers": {name!r}: {error}') from None
    return headers


def jsonl_parser(
    keep_partition: bool, keep_timestamp: bool, extra: Headers
) -> Callable[[bytes], Record | None]:
    """`--format jsonl`: {"key", "value", "headers", "partition", "timestamp", ...} (other fields,
    e.g. topic and offset, are ignored); a blank line is skipped (None)."""

    def parse(line: bytes) -> Record | None:
        text = line.strip()
        if not text:
            return None
        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            raise InputError(f"invalid JSON: {error}") from None
        if not isinstance(document, dict):
            raise InputError(f"expected a JSON object, got {type(document).__name__}")
        key = _json_bytes(document, "key")
        value = _json_bytes(document, "value")
        headers = _json_headers(document.get("headers"))
        if extra:
            headers += extra
        partition = None
        if keep_partition:
            partition = document.get("partition")
            if partition is not None and (type(partition) is not int or partition < 0):
                raise InputError(f'"partition" must be an integer >= 0, got {partition!r}')
        timestamp = None
        if keep_timestamp:
            timestamp = document.get("timestamp")
            if timestamp is not None and type(timestamp) is not int:
                raise InputError(f'"timestamp" must be an integer (ms since the epoch), got {timestamp!r}')
            if timestamp is not None and timestamp < 0:
                timestamp = None
        return key, value, headers, partition, timestamp

    return parse


# -- the report ------------------------------------------------------------------------------------
class Report:
    """Where each delivered record went (`--print-offsets`), streamed in input order."""

    def __init__(self, fmt: str, out: TextIO) -> None:
        self.fmt = fmt
        self.out = out
        self.count = 0

    def row(self, line: int, topic: str, partition: int, offset: int, timestamp: int) -> None:
        row = {"line": line, "topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp}
        if self.fmt == "jsonl":
            self.out.write(json.dumps(row, separators=(",", ":")) + "\n")
        elif self.fmt == "json":
            text = json.dumps(row, separators=(", ", ": "))
            self.out.write(("[\n  " if not self.count else ",\n  ") + text)
        else:
            if not self.count:
                self.out.write(f"{'LINE':>8}  {'PARTITION':>9}  {'OFFSET':>12}  {'TIMESTAMP':>14}\n")
            self.out.write(f"{line:>8}  {partition:>9}  {offset:>12}  {timestamp:>14}\n")
        self.count += 1

    def close(self) -> None:
        if self.fmt == "json":
            self.out.write("[]\n" if not self.count else "\n]\n")
        self.out.flush()


# -- configuration ---------------------------------------------------------------------------------
def producer_config(
    config_file: Path | None,
    overrides: list[str] | None,
    bootstrap_server: str,
    explicit: dict[str, str],
) -> tuple[str, ProducerConfig]:
    """The bootstrap servers and producer settings from --config, -X, --bootstrap-server and the
    command's own options (`explicit`, which win)."""
    resolved = load_config(config_file, overrides, bootstrap_server=bootstrap_server)
    known = ProducerConfig.known_keys()
    properties = known_properties(resolved, known, "producer")
    properties.update(explicit)
    try:
        config = ProducerConfig.from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid producer property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, config  # type: ignore[return-value]


def _headers_option(values: list[str] | None) -> Headers:
    headers: Headers = []
    for text in values or ():
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise KctlError(f"invalid -H {text!r}: expected KEY=VALUE", ExitCode.USAGE)
        headers.append((key, value.encode("utf-8")))
    return headers


def check_topic(bootstrap: str, config: ProducerConfig, topic: str, partition: int | None = None) -> None:
    """Fail fast (exit 3) when no broker answers, the topic does not exist and is not created, or it
    has no ``partition``."""
    try:
        cluster = ClusterClient(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    try:
        with client_errors():
            metadata = cluster.refresh_metadata([topic], allow_auto_create=True)
    finally:
        cluster.close()
    found = metadata.topic(topic)
    code = found.error_code if found is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise KctlError(
            f"topic {topic!r} does not exist (and the broker does not create topics on demand)",
            ExitCode.NOT_FOUND,
        )
    if code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
        raise KctlError(str(BrokerResponseError(code, context=f"topic {topic!r}")), ExitCode.FAILURE)
    if (
        found is not None
        and partition is not None
        and found.partitions
        and found.partition(partition) is None
    ):
        count = len(found.partitions)
        raise KctlError(
            f"topic {topic!r} has no partition {partition} (it has {count}: 0-{count - 1})",
            ExitCode.NOT_FOUND,
        )


# -- the command -----------------------------------------------------------------------------------
class Session:
    """Sends parsed records and reports each outcome in input order."""

    def __init__(self, producer: Producer, topic: str, report: Report | None) -> None:
        self.producer = producer
        self.topic = topic
        self.report = report
        self.unreported: collections.deque[tuple[int, RecordFuture]] = collections.deque()
        self.delivered = 0
        self.failed = 0

    def error(self, line: int, message: str) -> None:
        self.failed += 1
        if self.failed <= MAX_ERRORS_SHOWN:
            stderr_console.print(
                f"kctl: error: line {line}: {message}", markup=False, highlight=False, soft_wrap=True
            )

    def _finish(self, line: int, future: RecordFuture) -> None:
        error = future.exception()
        if error is not None:
            self.error(line, f"not delivered: {error}")
            return
        self.delivered += 1
        if self.report is not None:
            metadata = future.result()
            self.report.row(line, metadata.topic, metadata.partition, metadata.offset, metadata.timestamp)

    def finish(self) -> None:
        self.producer.flush()
        while self.unreported:
            self._finish(*self.unreported.popleft())
        if self.report is not None:
            self.report.close()

    def run(
        self,
        lines: Iterable[tuple[int, bytes]],
        parse: Callable[[bytes], Record | None],
        partition: int | None,
    ) -> None:
        """Parse and send every line; report outcomes as they come (in input order)."""
        send, topic = self.producer.send, self.topic
        unreported = self.unreported
        remember, oldest, finish = unreported.append, unreported.popleft, self._finish
        for number, line in lines:
            try:
                record = parse(line)
            except InputError as error:
                self.error(number, str(error))
                continue
            if record is None:
                continue
            key, value, headers, record_partition, timestamp = record
            try:
                future = send(
                    topic,
                    value,
                    key,
                    headers or None,
                    partition if partition is not None else record_partition,
                    timestamp,
                )
            except (TypeError, ValueError) as error:
                self.error(number, str(error))
                continue
            except KafkaError as error:  # the buffer stayed full (broker gone): stop reading
                self.error(number, f"not sent: {error}")
                raise KctlError(f"stopped reading at line {number}") from None
            remember((number, future))
            while unreported and unreported[0][1].done():
                finish(*oldest())
            if len(unreported) > MAX_UNREPORTED:
                finish(*oldest())  # waits for the oldest


@app.callback()
def produce(
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="The topic to write to.", show_default=False)],
    fmt: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            "-f",
            case_sensitive=False,
            help=(
                "jsonl: read one JSON object per line (what `kctl consume --format jsonl` writes); "
                "table or json: read lines. Also the format of the --print-offsets report."
            ),
        ),
    ] = DEFAULT_FORMAT,
    key_separator: Annotated[
        str | None,
        typer.Option(
            "--key-separator",
            "-K",
            metavar="SEP",
            help="lines: the key is the text before the first SEP, the value what follows.",
        ),
    ] = None,
    null_marker: Annotated[
        str | None,
        typer.Option(
            "--null-marker",
            metavar="TEXT",
            help="lines: a value equal to TEXT is sent as null (a tombstone), e.g. --null-marker NULL.",
        ),
    ] = None,
    headers: Annotated[
        list[str] | None,
        typer.Option(
            "--header", "-H", metavar="KEY=VALUE", help="Add a header to every record (repeatable)."
        ),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option(
            "--partition",
            "-p",
            metavar="N",
            min=0,
            help="Send every record to partition N (default: by key).",
        ),
    ] = None,
    keep_partition: Annotated[
        bool,
        typer.Option("--keep-partition", help='jsonl: send each record to its "partition" field.'),
    ] = False,
    keep_timestamp: Annotated[
        bool,
        typer.Option("--keep-timestamp", help='jsonl: keep each record\'s "timestamp" (default: now).'),
    ] = False,
    compression: Annotated[
        str | None,
        typer.Option(
            "--compression", "-z", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd (compression.type)."
        ),
    ] = None,
    acks: Annotated[
        str | None,
        typer.Option("--acks", "-a", metavar="ACKS", help="all (default), 1 or 0 (acks)."),
    ] = None,
    print_offsets: Annotated[
        bool,
        typer.Option("--print-offsets", help="Write where each record went to stdout, in input order."),
    ] = False,
    report_format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--report-format",
            case_sensitive=False,
            help="The --print-offsets format when it is not --format's: table, json or jsonl.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr at the end.")] = False,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Send records read from stdin to a topic, and wait until each one is acknowledged.

    Lines (the default, with `--format table` or `json`): each line (without its newline) is a
    value; with `--key-separator SEP` the text before the first SEP is the key (a line without SEP
    has no key). `--format jsonl` reads one JSON object per line instead: "key", "value" and header
    values are strings (UTF-8) or {"base64": ...} for binary, null for null; "headers" is a list of
    [key, value] pairs; other fields (topic, offset, ...) are ignored, except "partition" with
    --keep-partition and "timestamp" with --keep-timestamp. So `kctl consume A --offset beginning
    --until end -f jsonl | kctl produce B -f jsonl --keep-partition --keep-timestamp` copies A to B
    exactly.

    Records go to partitions by key (murmur2, as Kafka's clients do), or to --partition N. With
    --print-offsets, stdout gets one row per delivered record (input line, topic, partition,
    offset, timestamp), in input order, in the --format (table: aligned text, json: one array,
    jsonl: one object per line) unless --report-format names another.

    Producer properties use Kafka's names (linger.ms, batch.size, compression.type, acks,
    enable.idempotence, delivery.timeout.ms, ...) in --config or -X; --compression and --acks win
    over them. Exit status 1 when any record was not delivered (each is reported on stderr with
    its line number), 3 when no broker can be reached or the topic does not exist."""
    if not topic:
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    fmt = OutputFormat(fmt)
    input_format = "jsonl" if fmt is OutputFormat.JSONL else "lines"
    report_name = OutputFormat(report_format if report_format is not None else fmt).value
    if input_format == "jsonl" and (key_separator is not None or null_marker is not None):
        raise KctlError(
            "--key-separator and --null-marker apply to lines, not --format jsonl", ExitCode.USAGE
        )
    if input_format == "lines" and (keep_partition or keep_timestamp):
        raise KctlError("--keep-partition and --keep-timestamp need --format jsonl", ExitCode.USAGE)
    if partition is not None and keep_partition:
        raise KctlError("--partition and --keep-partition exclude each other", ExitCode.USAGE)
    if key_separator == "":
        raise KctlError("--key-separator must not be empty", ExitCode.USAGE)
    extra_headers = _headers_option(headers)
    explicit: dict[str, str] = {}
    if compression is not None:
        explicit["compression.type"] = compression
    if acks is not None:
        explicit["acks"] = acks
    bootstrap, config = producer_config(config_file, overrides, bootstrap_server, explicit)
    check_topic(bootstrap, config, topic, partition)

    if input_format == "lines":
        parse: Callable[[bytes], Record | None] = line_parser(
            key_separator.encode() if key_separator is not None else None,
            null_marker.encode() if null_marker is not None else None,
            extra_headers,
        )
    else:
        parse = jsonl_parser(keep_partition, keep_timestamp, extra_headers)
    report = Report(report_name, sys.stdout) if print_offsets else None
    try:
        producer = Producer(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    session = Session(producer, topic, report)
    try:
        with producer:
            try:
                session.run(enumerate(sys.stdin.buffer, 1), parse, partition)
            finally:
                session.finish()
    except KafkaError as error:
        raise KctlError(str(error), ExitCode.FAILURE) from None
    if session.failed > MAX_ERRORS_SHOWN:
        stderr_console.print(
            f"kctl: error: ... {session.failed - MAX_ERRORS_SHOWN} more records failed",
            markup=False,
            highlight=False,
        )
    if not quiet:
        failed = f", {session.failed} failed" if session.failed else ""
        info(f"produced {session.delivered} record{'s' if session.delivered != 1 else ''} to {topic}{failed}")
    if session.failed:
        raise typer.Exit(ExitCode.FAILURE)
