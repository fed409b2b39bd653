"""`kctl topic`: create, list, describe, alter and delete topics on a running cluster.

Each command parses its options, calls `kctl.client.AdminClient` and renders the results; per-topic
failures are reported one by one (`kctl: error: topic 'x': NAME: message` on stderr) and decide the
exit status: 0 when everything succeeded, 3 when every named topic was missing, 1 for any other
failure (also when only some topics failed), 2 for usage errors.

Client properties use Kafka's client names (`client.id`, `request.timeout.ms`,
`default.api.timeout.ms`, ...) in the `--config` file or with `-X`; topic configs are given with
`--topic-config KEY=VALUE` (kafka-topics.sh calls that option `--config`, which in kctl names the
client properties file on every command).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    BytesOption,
    ClusterOptions,
    FormatOption,
    OverrideSyntaxError,
    cluster_options,
    parse_override,
)
from kctl.commands.output import (
    Column,
    OutputFormat,
    info,
    render_documents,
    render_rows,
    stderr_console,
    warn,
)

if TYPE_CHECKING:
    from kctl.client import AdminClient, Result, TopicDescription, TopicPartition

app = typer.Typer(
    help="Create, list, describe, alter and delete topics (talks to a running cluster).",
    no_args_is_help=True,
)

UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PARTITION"

TopicsArgument = Annotated[list[str], typer.Argument(metavar="TOPIC...", help="Topic names.")]
TopicConfigOption = Annotated[
    list[str] | None,
    typer.Option(
        "--topic-config",
        metavar="KEY=VALUE",
        help="Set a topic config, e.g. retention.ms=86400000 (repeatable; Kafka's topic config names).",
    ),
]
PartitionsOption = Annotated[
    int | None,
    typer.Option(
        "--partitions", "-p", metavar="N", min=1, help="Number of partitions (default: the broker's)."
    ),
]
ValidateOnlyOption = Annotated[
    bool,
    typer.Option("--validate-only", help="Ask the broker to check the request without applying it."),
]


def _unique(names: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(names))
    for name in names:
        if not name:
            raise KctlError("a topic name must not be empty", ExitCode.USAGE)
    return names


def _topic_configs(values: list[str] | None, option: str = "--topic-config") -> dict[str, str]:
    configs: dict[str, str] = {}
    for text in values or ():
        try:
            key, value = parse_override(text)
        except OverrideSyntaxError as error:
            raise KctlError(f"invalid {option}: {error}", ExitCode.USAGE) from None
        configs[key] = value
    return configs


def _error(message: str) -> None:
    stderr_console.print(f"kctl: error: {message}", markup=False, highlight=False, soft_wrap=True)


def _failure_text(result: Result) -> str:
    message = result.error_message
    if not message and result.error == UNKNOWN_TOPIC:
        message = "the topic does not exist"
    return f"topic {result.name!r}: {result.error}" + (f": {message}" if message else "")


def _finish(results: Sequence[Result]) -> None:
    """Report each failure on stderr and end with the exit status the failures call for."""
    failures = [r for r in results if not r.ok]
    for result in failures:
        _error(_failure_text(result))
    if not failures:
        return
    if len(failures) == len(results) and all(r.error == UNKNOWN_TOPIC for r in failures):
        raise typer.Exit(ExitCode.NOT_FOUND)
    raise typer.Exit(ExitCode.FAILURE)


def _ids(values: Sequence[int] | None) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _leader(value: int) -> str:
    return str(value) if value >= 0 else "none"


def _leader_cell(partition: dict[str, Any]) -> str:
    """The leader, "none" without one, "ID(unreachable)" for one that did not answer."""
    leader = partition["leader"]
    return _leader(leader) + ("(unreachable)" if leader >= 0 and not partition["available"] else "")


STATUS_COLUMNS = [Column("topic"), Column("status"), Column("message")]


# -- create ----------------------------------------------------------------------------------------
@app.command("create")
@cluster_options
def create(
    topics: TopicsArgument,
    partitions: PartitionsOption = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            "--replication-factor",
            "-r",
            metavar="N",
            min=1,
            help="Replicas of each partition (default: the broker's default.replication.factor).",
        ),
    ] = None,
    topic_configs: TopicConfigOption = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="A topic that exists already is not an error.")
    ] = False,
    validate_only: ValidateOnlyOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Create topics with a number of partitions, a replication factor and topic configs.

    Prints one row per topic: its status (created, valid with --validate-only, exists with
    --if-not-exists, or Kafka's error name), partitions, replication factor and topic id.
    Exit status 1 if any topic could not be created."""
    from kctl.client import NewTopic, Result

    names = _unique(topics)
    configs = _topic_configs(topic_configs)
    new = [NewTopic(n, partitions or -1, replication_factor or -1, configs) for n in names]
    with admin_session(*cluster) as admin:
        results = admin.create_topics(new, validate_only=validate_only)
    rows = []
    reported: list[Result] = []
    for result in results:
        row: dict[str, Any] = {"topic": result.name, "message": result.error_message}
        if result.ok:
            row |= {
                "status": "valid" if validate_only else "created",
                "partitions": result.num_partitions,
                "replication_factor": result.replication_factor,
                "topic_id": str(result.topic_id) if result.topic_id else None,
            }
            if not validate_only:
                info(f"created topic {result.name!r}")
        elif if_not_exists and result.error == "TOPIC_ALREADY_EXISTS":
            row["status"] = "exists"
            row["message"] = None
        else:
            row["status"] = result.error
        reported.append(Result(result.name) if row["status"] == "exists" else result)
        rows.append(row)
    render_rows(
        rows,
        [
            Column("topic"),
            Column("status"),
            Column("partitions"),
            Column("replication_factor"),
            Column("topic_id"),
            Column("message"),
        ],
        fmt,
    )
    _finish(reported)


# -- list ------------------------------------------------------------------------------------------
@app.command("list")
@cluster_options
def list_topics(
    internal: Annotated[
        bool, typer.Option("--internal", "-i", help="Include internal topics (e.g. __consumer_offsets).")
    ] = False,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern", metavar="REGEX", help="Only topics whose whole name matches this regular expression."
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """List topics with their partition count and replication factor, sorted by name."""
    regex = _compile(pattern)
    with admin_session(*cluster) as admin:
        topics = admin.list_topics(include_internal=internal)
    rows = [
        {
            "topic": t.name,
            "partitions": len(t.partitions),
            "replication_factor": t.replication_factor,
            "internal": t.internal,
        }
        for t in topics
        if regex is None or regex.fullmatch(t.name)
    ]
    columns = [Column("topic"), Column("partitions"), Column("replication_factor")]
    if internal:
        columns.append(Column("internal"))
    render_rows(rows, columns, fmt)


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as error:
        raise KctlError(f"invalid --pattern {pattern!r}: {error}", ExitCode.USAGE) from None


# -- describe --------------------------------------------------------------------------------------
TOPIC_COLUMNS = [
    Column("topic"),
    Column("topic_id"),
    Column("partition_count", "PARTITIONS"),
    Column("replication_factor"),
    Column("configs", formatter=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "-"),
]
PARTITION_COLUMNS = [
    Column("topic"),
    Column("partition"),
    Column("leader_cell", "LEADER"),
    Column("leader_epoch", "EPOCH"),
    Column("replicas", formatter=_ids),
    Column("isr", formatter=_ids),
    Column("offline_replicas", "OFFLINE", formatter=_ids),
    Column("log_start_offset", "LOG-START"),
    Column("high_watermark", "HIGH-WATERMARK"),
    Column("size", "SIZE", size=True),
]


CONFIG_COLUMNS = [
    Column("topic"),
    Column("name"),
    Column("value"),
    Column("default"),
    Column("source"),
    Column("read_only", "READ-ONLY"),
]


@app.command("describe")
@cluster_options
def describe(
    topics: Annotated[
        list[str] | None,
        typer.Argument(metavar="TOPIC...", help="Topic names (or --all).", show_default=False),
    ] = None,
    all_topics: Annotated[bool, typer.Option("--all", "-a", help="Describe every topic.")] = False,
    internal: Annotated[
        bool, typer.Option("--internal", "-i", help="With --all, include internal topics.")
    ] = False,
    under_replicated: Annotated[
        bool,
        typer.Option(
            "--under-replicated", help="Only partitions whose ISR is smaller than their replica set."
        ),
    ] = False,
    unavailable: Annotated[
        bool,
        typer.Option(
            "--unavailable",
            help="Only partitions without a leader (offline) or whose leader does not answer.",
        ),
    ] = False,
    under_min_isr: Annotated[
        bool,
        typer.Option(
            "--under-min-isr",
            help="Only partitions whose ISR is smaller than the topic's min.insync.replicas.",
        ),
    ] = False,
    all_configs: Annotated[
        bool,
        typer.Option(
            "--all-configs",
            help="Also every config of each topic: value, built-in default, source, read-only "
            "(kafka-configs.sh --describe --all).",
        ),
    ] = False,
    exit_zero: Annotated[
        bool,
        typer.Option(
            "--exit-zero", help="Exit 0 even when a health filter finds partitions (to list them only)."
        ),
    ] = False,
    exact_bytes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Describe topics and their partitions.

    Per topic: id, partition count, replication factor and non-default configs; per partition: the
    leader, leader epoch, replicas, in-sync replicas, offline replicas, log start offset, high
    watermark and size on disk at the leader (segments and their records; - when the leader cannot
    say; human-readable in tables, exact bytes with --bytes and in JSON).

    The table format prints a topics table, then a partitions table; json/jsonl print one nested
    object per topic ("partitions" is a list; "configs" maps each config whose value does not come
    from the built-in default to its value; with --all-configs "all_configs" lists every config
    with its value, default and source, and tables get a third, configs table).

    --under-replicated, --unavailable and --under-min-isr (kafka-topics.sh's
    --under-replicated-partitions, --unavailable-partitions, --under-min-isr-partitions; together:
    partitions matching any) show only those partitions, and only the topics that have one, and
    fail if any: exit 1 when a partition is found, 0 when none (--exit-zero: 0 either way).

    A broker that does not answer (killed or hung) is waited for at most request.timeout.ms: the
    others' answers are shown, its partitions with leader ID(unreachable) ("available": false in
    JSON) and no offsets or size, and stderr names it; the exit status is then 1 (incomplete).
    Exit status 3 if no named topic exists, 1 if only some do."""

    names = _unique(topics or [])
    if all_topics and names:
        raise KctlError("give topic names or --all, not both", ExitCode.USAGE)
    if not all_topics and not names:
        raise KctlError("name at least one topic, or give --all", ExitCode.USAGE)
    if internal and not all_topics:
        raise KctlError("--internal goes with --all", ExitCode.USAGE)
    from kctl.client.admin.topic_report import HealthFilter, topic_report

    health = HealthFilter(under_replicated, unavailable, under_min_isr)
    with admin_session(*cluster) as admin:
        if all_topics:
            results: list[TopicDescription] = admin.list_topics(include_internal=internal)
        else:
            results = admin.describe_topics(names)
        report = topic_report(admin, [t for t in results if t.ok], health, all_configs=all_configs)
    documents = report.documents
    if fmt is OutputFormat.TABLE:
        render_rows(documents, TOPIC_COLUMNS, fmt, title="topics")
        sys.stdout.write("\n")
        partition_rows = [
            {"topic": d["topic"], **p, "leader_cell": _leader_cell(p)}
            for d in documents
            for p in d["partitions"]
        ]
        render_rows(partition_rows, PARTITION_COLUMNS, fmt, title="partitions", exact_sizes=exact_bytes)
        if all_configs:
            sys.stdout.write("\n")
            config_rows = [{"topic": d["topic"], **c} for d in documents for c in d["all_configs"]]
            render_rows(config_rows, CONFIG_COLUMNS, fmt, title="configs")
    else:
        render_documents(documents, fmt)
    for line in report.warnings:
        warn(line)
    for broker_id, reason in report.not_answering.items():
        warn(f"broker {broker_id} did not answer ({reason}): its partitions have no offsets or sizes")
    _finish(results)
    if report.incomplete or (report.matched and not exit_zero):
        raise typer.Exit(ExitCode.FAILURE)


# -- delete ----------------------------------------------------------------------------------------
@app.command("delete")
@cluster_options
def delete(
    topics: TopicsArgument,
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="A topic that does not exist is not an error.")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Delete topics and all their records.

    Prints one row per topic: deleted, absent (with --if-exists) or Kafka's error name. Exit status 3
    if no named topic exists (without --if-exists), 1 for any other failure."""
    from kctl.client import Result

    names = _unique(topics)
    with admin_session(*cluster) as admin:
        results = admin.delete_topics(names)
    rows = []
    reported: list[Result] = []
    for result in results:
        status: str | None
        message: str | None
        if result.ok:
            status, message = "deleted", None
            info(f"deleted topic {result.name!r}")
        elif if_exists and result.error == UNKNOWN_TOPIC:
            status, message = "absent", None
        else:
            status, message = result.error, result.error_message
        rows.append({"topic": result.name, "status": status, "message": message})
        reported.append(Result(result.name) if status == "absent" else result)
    render_rows(rows, STATUS_COLUMNS, fmt)
    _finish(reported)


# -- alter -----------------------------------------------------------------------------------------
@app.command("alter")
@cluster_options
def alter(
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="The topic to change.")],
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions", "-p", metavar="N", min=1, help="Grow the topic to N partitions (never shrinks)."
        ),
    ] = None,
    topic_configs: TopicConfigOption = None,
    delete_configs: Annotated[
        list[str] | None,
        typer.Option(
            "--delete-config",
            metavar="KEY",
            help="Remove a topic config override: back to the default (repeatable).",
        ),
    ] = None,
    validate_only: ValidateOnlyOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Add partitions to a topic and set or remove its configs.

    Other configs keep their values (IncrementalAlterConfigs). Prints one row per change: the
    partitions, then the configs (all config changes apply together or not at all). Exit status 3
    if the topic does not exist, 1 if a change failed."""

    (name,) = _unique([topic])
    configs = _topic_configs(topic_configs)
    deletes = list(dict.fromkeys(delete_configs or []))
    both = sorted(set(configs) & set(deletes))
    if both:
        raise KctlError(f"both set and deleted: {', '.join(both)}", ExitCode.USAGE)
    if partitions is None and not configs and not deletes:
        raise KctlError(
            "nothing to change: give --partitions, --topic-config or --delete-config", ExitCode.USAGE
        )
    rows: list[dict[str, Any]] = []
    results: list[Result] = []
    with admin_session(*cluster) as admin:
        if partitions is not None:
            result = admin.create_partitions(name, partitions, validate_only=validate_only)
            rows.append(_change_row(result, f"partitions={partitions}", validate_only))
            results.append(result)
        if (configs or deletes) and (not results or results[-1].error != UNKNOWN_TOPIC):
            result = admin.alter_configs(name, set=configs, delete=deletes, validate_only=validate_only)
            change = " ".join([*(f"{k}={v}" for k, v in configs.items()), *(f"-{k}" for k in deletes)])
            rows.append(_change_row(result, change, validate_only))
            results.append(result)
    render_rows(rows, [Column("topic"), Column("change"), Column("status"), Column("message")], fmt)
    if all(r.ok for r in results) and not validate_only:
        info(f"altered topic {name!r}")
    _finish(results)


def _change_row(result: Result, change: str, validate_only: bool) -> dict[str, Any]:
    status = ("valid" if validate_only else "altered") if result.ok else result.error
    return {"topic": result.name, "change": change, "status": status, "message": result.error_message}


# -- offsets and trim ------------------------------------------------------------------------------
PartitionSelectOption = Annotated[
    list[int] | None,
    typer.Option(
        "--partition", "-p", metavar="N", min=0, help="Only partition N of each topic (repeatable)."
    ),
]


def _point(text: str, option: str) -> Any:
    from kctl.client.offsets_spec import OffsetSpecError, parse_offset_point

    try:
        return parse_offset_point(text)
    except OffsetSpecError as error:
        raise KctlError(f"invalid {option}: {error}", ExitCode.USAGE) from None


def _selected_partitions(
    admin: AdminClient, names: list[str], partitions: list[int] | None
) -> tuple[list[TopicPartition], list[Result]]:
    """The partitions of the named topics (only ``partitions`` of each, when given) and the topics'
    results; a named partition a topic lacks exits 3."""
    from kctl.client import TopicPartition

    described = admin.describe_topics(names)
    wanted = set(partitions or [])
    tps: list[TopicPartition] = []
    for topic in described:
        if not topic.ok:
            continue
        present = {p.partition for p in topic.partitions}
        absent = sorted(wanted - present)
        if absent:
            raise KctlError(
                f"topic {topic.name!r} has no partition {', '.join(map(str, absent))} "
                f"(it has {len(present)})",
                ExitCode.NOT_FOUND,
            )
        tps.extend(TopicPartition(topic.name, p) for p in sorted(present) if not wanted or p in wanted)
    return tps, list(described)


def _timestamp_cell(ms: int) -> str:
    from kctl.console.formats import readable_timestamp

    return readable_timestamp(ms)


@app.command("offsets")
@cluster_options
def offsets(
    topics: TopicsArgument,
    time_spec: Annotated[
        str | None,
        typer.Option(
            "--time",
            metavar="SPEC",
            help=(
                "A point of the offset grammar: beginning, end, N, -N, +N, @TIME (epoch ms, "
                "2026-11-22, 2026-11-22T10:00:00Z, @-1h). Default: the earliest and latest offsets."
            ),
        ),
    ] = None,
    partitions: PartitionSelectOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show each partition's offsets (kcat -Q, kafka-get-offsets.sh).

    Without --time: one row per partition with its earliest offset (the log start offset) and its
    latest (the high watermark, the next offset to be written). With --time SPEC: the offset SPEC
    names, resolved as `consume --offset` resolves it (clamped into earliest..latest; a time after
    the last record is the latest offset), and for a time the timestamp of the record there (ISO in
    tables, epoch ms in JSON). Exit status 3 if no named topic (or a named partition) exists, 1 if
    only some topics do."""
    from kctl.client.admin.overview import log_offsets, partition_offsets

    names = _unique(topics)
    point = _point(time_spec, "--time") if time_spec is not None else None
    with admin_session(*cluster) as admin:
        tps, results = _selected_partitions(admin, names, partitions)
        if point is None:
            rows: list[dict[str, Any]] = [
                {
                    "topic": o.topic_partition.topic,
                    "partition": o.topic_partition.partition,
                    "earliest": o.log_start_offset,
                    "latest": o.high_watermark,
                }
                for o in log_offsets(admin, tps)
            ]
            columns = [Column("topic"), Column("partition"), Column("earliest"), Column("latest")]
        else:
            rows = [
                {
                    "topic": p.topic_partition.topic,
                    "partition": p.topic_partition.partition,
                    "offset": p.offset,
                    "timestamp": p.timestamp,
                }
                for p in partition_offsets(admin, tps, point)
            ]
            columns = [
                Column("topic"),
                Column("partition"),
                Column("offset"),
                Column("timestamp", formatter=_timestamp_cell),
            ]
    render_rows(rows, columns, fmt)
    _finish(results)


TRIM_COLUMNS = [
    Column("topic"),
    Column("partition"),
    Column("log_start_offset", "LOG-START"),
    Column("new_log_start_offset", "NEW-LOG-START"),
    Column("high_watermark", "HIGH-WATERMARK"),
    Column("removed", "RECORDS-REMOVED"),
    Column("status"),
]


@app.command("trim")
@cluster_options
def trim(
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="The topic to trim.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="SPEC",
            help=(
                "Delete every record before this point of the offset grammar: N, -N (keep the last "
                "N), +N, @TIME (epoch ms, 2026-11-22, 2026-11-22T10:00:00Z, @-1h), end (everything)."
            ),
        ),
    ],
    partitions: PartitionSelectOption = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Delete the records (without it: only show the plan).")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Delete the records of a topic's partitions before an offset (kafka-delete-records.sh, rpk
    topic trim-prefix): the log start offset moves up to it.

    Prints the plan, one row per partition: the log start offset now, the new one (SPEC resolved as
    `consume --offset` resolves it), the high watermark and how many offsets fall below the new
    start (records, unless compaction left gaps). An offset N or +N past a partition's high
    watermark is refused (exit 2, nothing deleted) rather than clamped: `--to end` deletes every
    record; -N beyond the log start and a time before the first record change nothing. Nothing
    changes without --execute, which sends DeleteRecords and reports the log start offset each
    leader answers (status trimmed, unchanged, or Kafka's error name). Exit status 3 if the topic or
    a named partition does not exist, 1 if a partition could not be trimmed."""
    from kctl.client.admin.overview import execute_trim, trim_plan
    from kctl.client.offsets_spec import OffsetPastEndError

    (name,) = _unique([topic])
    point = _point(to, "--to")
    with admin_session(*cluster) as admin:
        tps, results = _selected_partitions(admin, [name], partitions)
        if not all(r.ok for r in results):
            _finish(results)
        try:
            plan = trim_plan(admin, tps, point)
        except OffsetPastEndError as error:
            where = ", ".join(map(str, error.partitions))
            raise KctlError(
                f"--to {to} is past the end of {where}: nothing trimmed (--to end deletes every record)",
                ExitCode.USAGE,
            ) from None
        steps = execute_trim(admin, plan) if execute else plan
    rows = []
    for step in steps:
        if step.error is not None:
            status = step.error
        elif not step.changes:
            status = "unchanged"
        else:
            status = "trimmed" if execute else "to trim"
        new_start = step.new_log_start_offset
        if step.result_log_start_offset is not None:
            new_start = step.result_log_start_offset
        rows.append(
            {
                "topic": step.topic_partition.topic,
                "partition": step.topic_partition.partition,
                "log_start_offset": step.log_start_offset,
                "new_log_start_offset": new_start,
                "high_watermark": step.high_watermark,
                "removed": step.removed,
                "status": status,
            }
        )
    render_rows(rows, TRIM_COLUMNS, fmt)
    failed = [s for s in steps if s.error is not None]
    for step in failed:
        _error(
            f"partition {step.topic_partition}: {step.error}"
            + (f": {step.error_message}" if step.error_message else "")
        )
    total = sum(s.removed for s in steps if s.error is None)
    changed = sum(1 for s in steps if s.changes and s.error is None)
    if not execute:
        info(
            f"would remove {total} record(s) from {changed} partition(s); "
            "nothing changed: add --execute to delete them"
        )
    else:
        info(f"removed {total} record(s) from {changed} partition(s)")
    if failed:
        raise typer.Exit(ExitCode.FAILURE)
