"""`kctl produce TOPIC`: read records from stdin and send them to a topic (`kctl.console.produce`).

Input (`--format`): `lines` (default) makes one record of every line (optionally `KEY<SEP>VALUE` with
`--key-separator`); `jsonl` reads the objects `kctl consume --format jsonl` writes, `json` the one
array `kctl consume --format json` writes (read whole). Lines and JSON lines are read as
a stream (constant memory: the producer's `buffer.memory` applies back-pressure), each record is
sent as soon as it is parsed, and the command waits for every acknowledgement before it exits.

Records that cannot be parsed or are not delivered are reported on stderr with their line number
(`kctl: error: line 7: ...`) and make the exit status 1; 3 means the broker cannot be reached or
the topic does not exist (and is not auto-created); 2 a usage error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from kctl.commands.clients import connect, producer_config, require_topic
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    AcksOption,
    ClusterOptions,
    CompressionOption,
    cluster_options,
)
from kctl.commands.output import OutputFormat, info, stderr_console

if TYPE_CHECKING:
    from collections.abc import Iterable

    from kctl.client.producer import RecordMetadata
    from kctl.console.produce import Headers

app = typer.Typer(  # one command: its help is the docstring of `produce`
    invoke_without_command=True,
    subcommand_metavar="",
    context_settings={"allow_interspersed_args": True},
)

MAX_ERRORS_SHOWN = 20
"""Failed records reported one by one on stderr; after that only the count."""


class Report:
    """Where each delivered record went (`--print-offsets`), streamed in input order."""

    def __init__(self, fmt: str, out: TextIO) -> None:
        self.fmt = fmt
        self.out = out
        self.count = 0

    def row(self, line: int, metadata: RecordMetadata) -> None:
        topic, partition, offset = metadata.topic, metadata.partition, metadata.offset
        timestamp = metadata.timestamp
        row = {"line": line, "topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp}
        if self.fmt == "jsonl":
            self.out.write(json.dumps(row, separators=(",", ":")) + "\n")
        elif self.fmt == "json":
            text = json.dumps(row, separators=(", ", ": "))
            self.out.write(("[\n  " if not self.count else ",\n  ") + text)
        else:  # a table: ISO times, as consume's table shows them (epoch ms in JSON)
            width = max(5, len(topic))
            if not self.count:
                heading = f"{'LINE':>8}  {'TOPIC':<{width}}  {'PARTITION':>9}  {'OFFSET':>12}  TIMESTAMP"
                self.out.write(heading + "\n")
            from kctl.console.formats import readable_timestamp

            when = readable_timestamp(timestamp)
            self.out.write(f"{line:>8}  {topic:<{width}}  {partition:>9}  {offset:>12}  {when}\n")
        self.count += 1

    def close(self) -> None:
        if self.fmt == "json":
            self.out.write("[]\n" if not self.count else "\n]\n")
        self.out.flush()


class ErrorLines:
    """`kctl: error: line N: ...` on stderr for the first MAX_ERRORS_SHOWN failed records."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, line: int, message: str) -> None:
        self.count += 1
        if self.count <= MAX_ERRORS_SHOWN:
            stderr_console.print(
                f"kctl: error: line {line}: {message}", markup=False, highlight=False, soft_wrap=True
            )


def _headers_option(values: list[str] | None) -> Headers:
    from kctl.console.produce import parse_header

    headers: Headers = []
    for text in values or ():
        try:
            headers.append(parse_header(text))
        except ValueError as error:
            raise KctlError(f"invalid -H {text!r}: {error}", ExitCode.USAGE) from None
    return headers


def _delimiter_option(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        from kctl.console.produce import parse_delimiter

        return parse_delimiter(text)
    except ValueError as error:
        raise KctlError(f"invalid --delimiter {text!r}: {error}", ExitCode.USAGE) from None


def _topic_and_files(
    argument: str | None, files: list[Path] | None, option: str | None
) -> tuple[str, list[Path] | None]:
    """The topic and the FILE arguments. With -t TOPIC every argument is a FILE, as in kcat, except
    a first argument that repeats TOPIC; a first argument that is neither TOPIC nor an existing file
    is a second, different topic: a usage error."""
    if option is None:
        if argument is None:
            raise KctlError("name the topic to write to: TOPIC or -t TOPIC", ExitCode.USAGE)
        topic = argument
    else:
        topic = option
        if argument is not None and argument != option:
            if not Path(argument).exists():
                raise KctlError(
                    f"two topics given: {argument!r} as an argument and {option!r} with -t; with -t, "
                    "arguments are FILEs to send",
                    ExitCode.USAGE,
                )
            files = [Path(argument), *(files or [])]
    if not topic:
        raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    return topic, files


@app.callback()
@cluster_options
def produce(
    topic: Annotated[
        str | None,
        typer.Argument(
            metavar="TOPIC", help="The topic to write to (or -t TOPIC, as kcat).", show_default=False
        ),
    ] = None,
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="FILE",
            help="Send each FILE's whole content as one record (kcat -P FILE...), instead of reading stdin.",
            show_default=False,
        ),
    ] = None,
    topic_option: Annotated[
        str | None,
        typer.Option(
            "--topic",
            "-t",
            metavar="TOPIC",
            help="The topic, as kcat's -t; then every argument is a FILE (kcat -P -t TOPIC FILE...).",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help=(
                "table: read lines; jsonl: one JSON object per line (what `kctl consume --format jsonl` "
                "writes); json: one JSON array of them (`kctl consume --format json`); or a template "
                "like rpk's, e.g. '%k %v\\n' (%k key, %v value, %h headers k=v,k2=v2, %p partition, "
                "%T timestamp; the last literal ends each record). Also the format of the "
                "--print-offsets report (a template: table)."
            ),
        ),
    ] = "table",
    key_separator: Annotated[
        str | None,
        typer.Option(
            "--key-separator",
            "-K",
            metavar="SEP",
            help="lines: the key is the text before the first SEP, the value what follows.",
        ),
    ] = None,
    delimiter: Annotated[
        str | None,
        typer.Option(
            "--delimiter",
            "-D",
            metavar="DELIM",
            help=(
                "lines: split the input into records at DELIM instead of newlines (kcat -D); escapes "
                "\\t \\n \\r \\0 \\xHH (and two backslashes for one), e.g. -D '\\0' or -D ';;'."
            ),
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
    compression: CompressionOption = None,
    acks: AcksOption = None,
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
    transactional_id: Annotated[
        str | None,
        typer.Option(
            "--transactional-id",
            metavar="ID",
            help=(
                "Send the input in transactions (transactional.id ID): each chunk of "
                "--transaction-size input records is committed whole, or aborted on an error."
            ),
            show_default=False,
        ),
    ] = None,
    transaction_size: Annotated[
        int,
        typer.Option(
            "--transaction-size",
            metavar="N",
            min=1,
            help="With --transactional-id: the input records (lines, objects, files) per transaction.",
        ),
    ] = 1000,
    *,
    cluster: ClusterOptions,
) -> None:
    """Send records read from stdin to a topic, and wait until each one is acknowledged.

    Lines (the default, `--format table`): each line (without its newline) is a
    value; with `--key-separator SEP` the text before the first SEP is the key (a line without SEP
    has no key). With `--delimiter DELIM` the records are the bytes between DELIMs instead (newlines
    are then data; what follows the last DELIM is one more record unless it is empty).
    `--format jsonl` reads one JSON object per line instead: "key", "value" and header
    values are strings (UTF-8) or {"base64": ...} for binary, null for null; "headers" is a list of
    [key, value] pairs; other fields (topic, offset, ...) are ignored, except "partition" with
    --keep-partition and "timestamp" with --keep-timestamp; `--format json` reads the same objects
    in one JSON array (the whole input). So `kctl consume A --offset beginning
    --until end -f jsonl | kctl produce B -f jsonl --keep-partition --keep-timestamp` copies A to B
    exactly.

    Records go to partitions by key (murmur2, as Kafka's clients do), or to --partition N. With
    --print-offsets, stdout gets one row per delivered record (input line, topic, partition,
    offset, timestamp), in input order, in the --format (table: aligned text, json: one array,
    jsonl: one object per line) unless --report-format names another.

    Producer properties use Kafka's names (linger.ms, batch.size, compression.type, acks,
    enable.idempotence, delivery.timeout.ms, ...) in --config or -X; --compression and --acks win
    over them. Exit status 1 when any record was not delivered (each is reported on stderr with
    its line number), 3 when no broker can be reached or the topic does not exist.

    With --transactional-id ID each chunk of --transaction-size N input records is one transaction:
    read_committed consumers (`kctl consume --isolation read_committed`) see the chunk whole or not
    at all. A chunk with a line that cannot be parsed or a record not delivered is aborted, and
    stderr says which input lines were not written (exit status 1); the next chunk goes on. A
    producer fenced by another with the same ID stops there."""
    from kctl.client import KafkaError
    from kctl.client.producer import Producer
    from kctl.console.produce import (
        InputError,
        Parser,
        ProduceSession,
        StoppedReading,
        json_array_items,
        json_array_parser,
        jsonl_parser,
        line_parser,
        read_files,
        split_records,
        template_parser,
        whole_file_parser,
    )
    from kctl.console.produce_txn import TransactionalSession

    topic, files = _topic_and_files(topic, files, topic_option)
    template = fmt if "%" in fmt else None
    if template is None and fmt.strip().lower() not in ("table", "json", "jsonl"):
        raise KctlError(
            f"unknown --format {fmt!r}: expected table, json, jsonl or a template such as '%k %v\\n'",
            ExitCode.USAGE,
        )
    name = "table" if template is not None else fmt.strip().lower()
    input_format = {"jsonl": "jsonl", "json": "json"}.get(name, "lines")
    template_parse: tuple[bytes, Parser] | None = None
    if template is not None:
        input_format = "template"
        try:  # before any connection: a template that cannot read records is a usage error
            template_parse = template_parser(template, _headers_option(headers))
        except ValueError as error:
            raise KctlError(f"invalid --format template '{template}': {error}", ExitCode.USAGE) from None
    report_name = OutputFormat(report_format if report_format is not None else name).value
    if input_format != "lines" and (
        key_separator is not None or null_marker is not None or delimiter is not None
    ):  # a template names its own delimiter and fields
        raise KctlError(
            f"--key-separator, --null-marker and --delimiter apply to lines, not --format {input_format}",
            ExitCode.USAGE,
        )
    record_delimiter = _delimiter_option(delimiter)
    if files and (input_format != "lines" or record_delimiter is not None or key_separator is not None):
        raise KctlError(
            "FILE arguments send whole files as values: not with --format json/jsonl, --delimiter "
            "or --key-separator",
            ExitCode.USAGE,
        )
    for path in files or ():
        if not path.is_file():
            raise KctlError(f"no such file: {path}", ExitCode.NOT_FOUND)
    if input_format == "lines" and (keep_partition or keep_timestamp):
        raise KctlError("--keep-partition and --keep-timestamp need --format jsonl or json", ExitCode.USAGE)
    if partition is not None and keep_partition:
        raise KctlError("--partition and --keep-partition exclude each other", ExitCode.USAGE)
    if key_separator == "":
        raise KctlError("--key-separator must not be empty", ExitCode.USAGE)
    extra_headers = _headers_option(headers)
    explicit: dict[str, str] = {}
    if compression is not None:
        explicit["compression.type"] = compression.value
    if acks is not None:
        explicit["acks"] = acks.value
    if transactional_id is not None:
        if not transactional_id:
            raise KctlError("--transactional-id must not be empty", ExitCode.USAGE)
        explicit["transactional.id"] = transactional_id
    bootstrap, config = producer_config(*cluster, explicit)
    require_topic(bootstrap, config, topic, partition)

    parse: Parser
    if template_parse is not None:
        record_delimiter, parse = template_parse
    elif files:
        parse = whole_file_parser(extra_headers)
    elif input_format == "lines":
        parse = line_parser(
            key_separator.encode() if key_separator is not None else None,
            null_marker.encode() if null_marker is not None else None,
            extra_headers,
            strip_newline=record_delimiter is None,
        )
    elif input_format == "jsonl":
        parse = jsonl_parser(keep_partition, keep_timestamp, extra_headers)
    else:
        parse = json_array_parser(keep_partition, keep_timestamp, extra_headers)
        try:
            items = json_array_items(sys.stdin.buffer.read())
        except InputError as error:
            raise KctlError(str(error), ExitCode.USAGE) from None
    report = Report(report_name, sys.stdout) if print_offsets else None
    producer = connect(Producer, bootstrap, config)
    on_delivered = report.row if report is not None else None
    session: ProduceSession | TransactionalSession
    if transactional_id is not None:
        session = TransactionalSession(
            producer, topic, transaction_size, on_error=ErrorLines(), on_delivered=on_delivered
        )
    else:
        session = ProduceSession(producer, topic, on_error=ErrorLines(), on_delivered=on_delivered)
    try:
        with producer:
            try:
                if files:
                    lines: Iterable[tuple[int, bytes]] = read_files(files)
                elif input_format == "json":
                    lines = items
                elif record_delimiter is not None:
                    lines = split_records(sys.stdin.buffer, record_delimiter)
                else:
                    lines = enumerate(sys.stdin.buffer, 1)
                session.run(lines, parse, partition)
            finally:
                session.finish()
                if report is not None:
                    report.close()
    except StoppedReading as error:
        raise KctlError(str(error)) from None
    except KafkaError as error:
        raise KctlError(str(error), ExitCode.FAILURE) from None
    if session.failed > MAX_ERRORS_SHOWN and not isinstance(session, TransactionalSession):
        stderr_console.print(
            f"kctl: error: ... {session.failed - MAX_ERRORS_SHOWN} more records failed",
            markup=False,
            highlight=False,
        )
    if not quiet:
        failed = f", {session.failed} failed" if session.failed else ""
        if isinstance(session, TransactionalSession):
            failed += f" ({session.transactions} transactions committed, {session.aborted} aborted)"
        info(f"produced {session.delivered} record{'s' if session.delivered != 1 else ''} to {topic}{failed}")
    if session.failed:
        raise typer.Exit(ExitCode.FAILURE)
