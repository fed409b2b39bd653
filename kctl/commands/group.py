"""`kctl group`: list, describe, rewind and delete consumer groups on a running cluster.

Mirrors `kafka-consumer-groups.sh` (`--list`, `--describe`, `--reset-offsets`, `--delete`,
`--delete-offsets`) and `rpk group`. Each command parses its options, calls
`kctl.client.group.GroupAdmin` (and, to rewind, `kctl.client.group.rewind`) and renders the results.

Exit status: 0 success; 1 a failure (a group with active members refused, a partition error, a
group that could not be deleted, or only some named groups found); 2 usage error; 3 nothing named
exists (every group or topic named is unknown) or the cluster cannot be reached.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from kctl.commands.clients import group_admin
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    ClusterOptions,
    FormatOption,
    cluster_options,
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
    from kctl.client import TopicPartition
    from kctl.client.group import GroupDescription, PartitionOffsets, PlannedOffset

app = typer.Typer(
    help="List, describe, rewind and delete consumer groups (talks to a running cluster).",
    no_args_is_help=True,
)

GROUP_NOT_FOUND = "GROUP_ID_NOT_FOUND"
STATES = ("Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead")
"""Kafka's group states, as `kctl.client.group.STATES` has them: repeated here for `--state`'s help,
so that `kctl group --help` starts without the client (tests/cli/test_cli_startup.py checks they agree)."""

GroupsArgument = Annotated[list[str], typer.Argument(metavar="GROUP...", help="Group ids.")]
TopicScopeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--topic",
        "-t",
        metavar="TOPIC[:P,...]",
        help="A topic, optionally with partitions (orders:0,1 or orders:0-3) (repeatable).",
    ),
]
ZooKeeperOption = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        envvar="KCTL_ZOOKEEPER",
        help=(
            "The groups of ZooKeeper-coordinated consumers (offsets under /consumers in this "
            "ZooKeeper); the brokers are found there too (/brokers/ids) unless -b names them."
        ),
    ),
]


# -- shared plumbing -------------------------------------------------------------------------------
def _error(message: str) -> None:
    stderr_console.print(f"kctl: error: {message}", markup=False, highlight=False, soft_wrap=True)


def _unique(names: Sequence[str], what: str = "group id") -> list[str]:
    names = list(dict.fromkeys(names))
    for name in names:
        if not name:
            raise KctlError(f"a {what} must not be empty", ExitCode.USAGE)
    return names


def _show_partitions(partitions: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or "-"


def _show_assignment(assignment: list[dict[str, Any]]) -> str:
    from kctl.client import TopicPartition

    return _show_partitions([TopicPartition(x["topic"], p) for x in assignment for p in x["partitions"]])


def _assignment_json(partitions: Sequence[TopicPartition]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _coordinator(group: GroupDescription) -> str | None:
    node = group.coordinator
    return f"{node.node_id} ({node.address})" if node is not None else None


# -- list ------------------------------------------------------------------------------------------
LIST_COLUMNS = [
    Column("group"),
    Column("state"),
    Column("protocol_type"),
    Column("assignor"),
    Column("members"),
    Column("coordinator"),
]


@app.command("list")
@cluster_options
def list_groups(
    states: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            "-s",
            metavar="STATE",
            help=f"Only groups in this state ({', '.join(STATES)}; case-insensitive; repeatable or "
            "comma-separated).",
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    zookeeper: ZooKeeperOption = None,
    *,
    cluster: ClusterOptions,
) -> None:
    """List the consumer groups of the cluster (every broker's ListGroups), sorted by id: state,
    protocol type, assignor, member count and coordinator."""
    wanted = {s.strip() for text in states or () for s in text.split(",") if s.strip()}
    known = {s.lower(): s for s in STATES}
    for state in wanted:
        if state.lower() not in known:
            raise KctlError(f"unknown group state {state!r} (known: {', '.join(STATES)})", ExitCode.USAGE)
    with group_admin(cluster, zookeeper) as groups:
        listed = groups.list_groups(states=wanted or None)
        described = {d.group_id: d for d in groups.describe_groups([g.group_id for g in listed])}
    rows = []
    for g in listed:
        d = described.get(g.group_id)
        rows.append(
            {
                "group": g.group_id,
                "state": (d.state if d is not None and d.ok else None) or g.state,
                "protocol_type": g.protocol_type or None,
                "assignor": (d.protocol or None) if d is not None and d.ok else None,
                "members": len(d.members) if d is not None and d.ok else None,
                "coordinator": g.coordinator if g.coordinator >= 0 else None,
            }
        )
    render_rows(rows, LIST_COLUMNS, fmt)


# -- describe --------------------------------------------------------------------------------------
GROUP_COLUMNS = [
    Column("group"),
    Column("state"),
    Column("assignor"),
    Column("member_count", "MEMBERS"),
    Column("coordinator"),
    Column("total_lag", "LAG"),
]
MEMBER_COLUMNS = [
    Column("group"),
    Column("member_id"),
    Column("instance_id"),
    Column("client_id"),
    Column("host"),
    Column(
        "assignment",
        "PARTITIONS",
        formatter=_show_assignment,
    ),
]
OFFSET_COLUMNS = [
    Column("group"),
    Column("topic"),
    Column("partition"),
    Column("committed_offset", "CURRENT-OFFSET"),
    Column("log_end_offset", "LOG-END-OFFSET"),
    Column("lag"),
    Column("member_id", "CONSUMER-ID"),
    Column("host"),
    Column("client_id"),
]


def _offset_document(p: PartitionOffsets) -> dict[str, Any]:
    return {
        "topic": p.topic_partition.topic,
        "partition": p.topic_partition.partition,
        "committed_offset": p.committed,
        "log_start_offset": p.log_start,
        "log_end_offset": p.log_end,
        "lag": p.lag,
        "metadata": p.metadata or None,
        "member_id": p.member.member_id if p.member else None,
        "client_id": p.member.client_id if p.member else None,
        "host": p.member.host if p.member else None,
    }


def _group_document(group: GroupDescription, offsets: list[PartitionOffsets]) -> dict[str, Any]:
    lags = [p.lag for p in offsets if p.lag is not None]
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type or None,
        "assignor": group.protocol or None,
        "coordinator": _coordinator(group),
        "member_count": len(group.members),
        "total_lag": sum(lags) if lags else None,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "topics": list(m.topics),
                "assignment": _assignment_json(m.assignment),
            }
            for m in group.members
        ],
        "offsets": [_offset_document(p) for p in offsets],
    }


@app.command("describe")
@cluster_options
def describe(
    groups_arg: Annotated[
        list[str] | None,
        typer.Argument(metavar="[GROUP]...", help="Group ids (or --all).", show_default=False),
    ] = None,
    all_groups: Annotated[bool, typer.Option("--all", "-a", help="Describe every group.")] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    zookeeper: ZooKeeperOption = None,
    *,
    cluster: ClusterOptions,
) -> None:
    """Describe consumer groups: state, assignor, coordinator, members (member id, instance id,
    client id, host, assigned partitions) and, per partition, the committed offset, the log end
    offset and the lag.

    The table format prints a groups table, a members table and an offsets table (one row per
    partition with a committed offset or an owner, like `kafka-consumer-groups.sh --describe`);
    json/jsonl print one nested object per group. Exit status 3 if no named group exists, 1 if only
    some do."""
    names = _unique(groups_arg or [])
    if all_groups and names:
        raise KctlError("give group ids or --all, not both", ExitCode.USAGE)
    if not all_groups and not names:
        raise KctlError("name at least one group, or give --all", ExitCode.USAGE)
    documents = []
    failures: list[tuple[str, str]] = []
    with group_admin(cluster, zookeeper) as groups:
        if all_groups:
            names = [g.group_id for g in groups.list_groups()]
        for group in groups.describe_groups(names):
            if not group.ok:
                failures.append(
                    (
                        group.group_id,
                        f"{group.error}" + (f": {group.error_message}" if group.error_message else ""),
                    )
                )
                continue
            offsets = groups.offsets_with_lag(group)
            if not group.exists and not offsets:
                failures.append((group.group_id, f"{GROUP_NOT_FOUND}: the group does not exist"))
                continue
            for p in offsets:
                if p.error:
                    warn(f"group {group.group_id!r} partition {p.topic_partition}: no log offsets: {p.error}")
            documents.append(_group_document(group, offsets))
    if fmt is OutputFormat.TABLE and not documents:
        pass  # nothing found: the errors say why
    elif fmt is OutputFormat.TABLE:
        render_rows(documents, GROUP_COLUMNS, fmt, title="groups")
        sys.stdout.write("\n")
        members = [{"group": d["group"], **m} for d in documents for m in d["members"]]
        render_rows(members, MEMBER_COLUMNS, fmt, title="members")
        sys.stdout.write("\n")
        offsets_rows = [{"group": d["group"], **o} for d in documents for o in d["offsets"]]
        render_rows(offsets_rows, OFFSET_COLUMNS, fmt, title="offsets")
    else:
        render_documents(documents, fmt)
    for group_id, text in failures:
        _error(f"group {group_id!r}: {text}")
    if failures:
        all_missing = len(failures) == len(names) and all(t.startswith(GROUP_NOT_FOUND) for _, t in failures)
        raise typer.Exit(ExitCode.NOT_FOUND if all_missing else ExitCode.FAILURE)


# -- rewind ----------------------------------------------------------------------------------------
A = TypeVar("A")
T = TypeVar("T")


def _parsed(parse: Callable[[A], T], text: A) -> T:
    from kctl.client.group.rewind_options import RewindOptionError

    try:
        return parse(text)
    except RewindOptionError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None


def parse_topic_scope(values: Sequence[str]) -> dict[str, list[int] | None]:
    """`--topic` values: topic -> its partitions (None: all of them)."""
    from kctl.client.group.rewind_options import topic_scope

    return _parsed(topic_scope, values)


def read_offsets_file(path: Path, group: str) -> dict[TopicPartition, int]:
    """A CSV plan as `kafka-consumer-groups.sh --export` writes it: `topic,partition,offset` lines
    (or `group,topic,partition,offset` for several groups: only `group`'s lines are used)."""
    from kctl.client.group import OffsetsFileError
    from kctl.client.group.rewind import parse_offsets_csv

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KctlError(f"offsets file not found: {path}", ExitCode.NOT_FOUND) from None
    except OSError as error:
        raise KctlError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return parse_offsets_csv(text, group, source=str(path))
    except OffsetsFileError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None


PLAN_COLUMNS = [
    Column("group"),
    Column("topic"),
    Column("partition"),
    Column("current_offset"),
    Column("new_offset"),
    Column("log_start_offset", "LOG-START"),
    Column("log_end_offset", "LOG-END"),
    Column("lag_before"),
    Column("lag_after"),
    Column("status"),
    Column("note"),
]


@app.command("rewind")
@cluster_options
def rewind(
    group: Annotated[str, typer.Argument(metavar="GROUP", help="The group whose offsets to reset.")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="To the log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="To the log end offset.")] = False,
    to_current: Annotated[
        bool,
        typer.Option("--to-current", help="To the committed offset (e.g. with --topic for new partitions)."),
    ] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", metavar="N", help="To offset N.")] = None,
    shift_by: Annotated[
        int | None,
        typer.Option("--shift-by", metavar="N", help="Move the committed offset by N (negative: back)."),
    ] = None,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            metavar="TIME",
            help="To the first record at or after TIME: YYYY-MM-DDTHH:MM:SS[.sss][ZONE] (UTC without a "
            "zone), YYYY-MM-DD or epoch ms.",
        ),
    ] = None,
    by_duration: Annotated[
        str | None,
        typer.Option(
            "--by-duration",
            metavar="DURATION",
            help="To the first record at or after DURATION ago: PT1H, P1DT12H (ISO 8601) or 1h30m, 2d.",
        ),
    ] = None,
    to_group: Annotated[
        str | None,
        typer.Option("--to-group", metavar="OTHER", help="To the committed offsets of group OTHER."),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            metavar="FILE",
            dir_okay=False,
            help="To the offsets in a CSV file of topic,partition,offset lines "
            "(as kafka-consumer-groups.sh --export writes).",
        ),
    ] = None,
    to_spec: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="SPEC",
            help="To a point of kctl's offset grammar: beginning, end, N, -N (before the end), +N, "
            "@TIME, @-1h.",
        ),
    ] = None,
    topics: TopicScopeOption = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every partition the group has committed offsets for.")
    ] = False,
    execute: Annotated[
        bool, typer.Option("--execute", help="Commit the new offsets (without it, only print the plan).")
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            metavar="FILE",
            dir_okay=False,
            help="Also write the new offsets as CSV (topic,partition,offset), readable by --from-file.",
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    zookeeper: ZooKeeperOption = None,
    *,
    cluster: ClusterOptions,
) -> None:
    """Reset ("rewind") a group's committed offsets: print the plan, and with --execute commit it.

    Give one target (--to-earliest, --to-latest, --to-current, --to-offset, --shift-by,
    --to-datetime, --by-duration, --to-group, --from-file or --to) and the partitions: --topic
    (repeatable) or --all-topics (every partition the group has committed offsets for, the
    default); with --to-group or --from-file they default to those the other group or the file
    names.
    A new offset below the log start is clamped to it; one past the log end (any target naming
    offsets) is refused, not clamped as `kafka-consumer-groups.sh` does: exit 2, nothing committed.
    The plan shows per partition the committed offset now and the new one, and the lag before and after.

    The group must have no active members (stop its consumers first): a group with members is
    refused, naming them. Exit status 1 when refused or when any partition has an error (then
    nothing is committed), 2 when a target lies past the log end, 3 when the group (with
    --all-topics) or every named topic does not exist."""
    from kctl.client.group import ShiftBy, Strategy, ToCurrent, ToGroup, ToOffsets, ToPoint, plan_rewind
    from kctl.client.group import execute as execute_rewind
    from kctl.client.group.rewind import UNKNOWN_TOPIC
    from kctl.client.group.rewind_options import datetime_point, duration_ms
    from kctl.client.offsets_spec import OffsetPoint, OffsetSpecError, PointKind, parse_offset_point
    from kctl.protocol import error_name

    targets_given = [
        to_earliest,
        to_latest,
        to_current,
        to_offset is not None,
        shift_by is not None,
        to_datetime is not None,
        by_duration is not None,
        to_group is not None,
        from_file is not None,
        to_spec is not None,
    ]
    if sum(targets_given) != 1:
        raise KctlError(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, "
            "--to-datetime, --by-duration, --to-group, --from-file, --to",
            ExitCode.USAGE,
        )
    if topics and all_topics:
        raise KctlError("give --topic or --all-topics, not both", ExitCode.USAGE)
    if not group:
        raise KctlError("a group id must not be empty", ExitCode.USAGE)
    if to_group == group:
        raise KctlError("--to-group names the group itself", ExitCode.USAGE)
    if to_offset is not None and to_offset < 0:
        raise KctlError("--to-offset must not be negative", ExitCode.USAGE)
    scope = parse_topic_scope(topics or [])
    # parse the target before talking to the cluster: usage errors come first
    strategy: Strategy
    if to_earliest:
        strategy = ToPoint(OffsetPoint(PointKind.BEGINNING, text="earliest"))
    elif to_latest:
        strategy = ToPoint(OffsetPoint(PointKind.END, text="latest"))
    elif to_offset is not None:
        strategy = ToPoint(OffsetPoint(PointKind.OFFSET, to_offset))
    elif to_datetime is not None:
        strategy = ToPoint(_parsed(datetime_point, to_datetime))
    elif by_duration is not None:
        ago = _parsed(duration_ms, by_duration)
        strategy = ToPoint(OffsetPoint(PointKind.AGO, ago, text=f"-{by_duration}"))
    elif to_spec is not None:
        try:
            strategy = ToPoint(parse_offset_point(to_spec))
        except OffsetSpecError as error:
            raise KctlError(f"invalid --to: {error}", ExitCode.USAGE) from None
    elif to_current:
        strategy = ToCurrent()
    elif shift_by is not None:
        strategy = ShiftBy(shift_by)
    elif to_group is not None:
        strategy = ToGroup(to_group)
    else:
        assert from_file is not None  # exactly one target was given
        strategy = ToOffsets(read_offsets_file(from_file, group))

    with group_admin(cluster, zookeeper) as groups:
        rewind_plan = plan_rewind(groups, group, strategy, topics=scope or None, all_topics=all_topics)
        plan = rewind_plan.offsets
        failed = rewind_plan.failed
        topic_errors = [(e.topic, e.error) for e in rewind_plan.topic_errors]
        codes: dict[TopicPartition, int] = {}
        if execute and rewind_plan.executable:
            codes = execute_rewind(groups, rewind_plan)
    rows = [p.row(group, execute and not failed and not topic_errors, codes) for p in plan]
    render_rows(rows, PLAN_COLUMNS, fmt)
    if export is not None:
        _export(export, plan)
    for topic, topic_error in topic_errors:
        detail = ": the topic does not exist" if topic_error == UNKNOWN_TOPIC else ""
        _error(f"topic {topic!r}: {topic_error}{detail}")
    for p in failed:
        _error(f"partition {p.topic_partition}: {p.error}")
    commit_failures = {tp: c for tp, c in codes.items() if c}
    for tp, code in commit_failures.items():
        _error(f"partition {tp}: commit failed: {error_name(code)}")
    if topic_errors and not plan:
        raise typer.Exit(
            ExitCode.NOT_FOUND if all(e == UNKNOWN_TOPIC for _, e in topic_errors) else ExitCode.FAILURE
        )
    if failed or topic_errors or commit_failures:
        if execute:
            _error("nothing was committed" if not codes else "some offsets were not committed")
        raise typer.Exit(ExitCode.USAGE if rewind_plan.past_end else ExitCode.FAILURE)
    if not plan:
        warn(f"nothing to reset for group {group!r}")
    elif execute:
        info(f"committed {len(codes)} offset(s) of group {group!r}")
    else:
        info("dry run: nothing changed; add --execute to commit these offsets")


def _export(path: Path, plan: Sequence[PlannedOffset]) -> None:
    from kctl.client.group.rewind import format_offsets_csv

    try:
        path.write_text(format_offsets_csv(plan), encoding="utf-8")
    except OSError as error:
        raise KctlError(f"cannot write {path}: {error.strerror or error}") from None


# -- delete ----------------------------------------------------------------------------------------
@app.command("delete")
@cluster_options
def delete(
    groups_arg: GroupsArgument,
    offsets_only: Annotated[
        bool,
        typer.Option(
            "--offsets",
            help="Delete only the committed offsets of the --topic partitions (OffsetDelete), not the group.",
        ),
    ] = False,
    topics: TopicScopeOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    zookeeper: ZooKeeperOption = None,
    *,
    cluster: ClusterOptions,
) -> None:
    """Delete consumer groups and their committed offsets; with --offsets --topic T[:P,...], delete
    only those committed offsets of one group.

    A group with active members is refused by the coordinator (NON_EMPTY_GROUP: stop its consumers
    first); offsets of a topic the group's members subscribe to cannot be deleted
    (GROUP_SUBSCRIBED_TO_TOPIC). Exit status 3 if no named group exists, 1 for any other failure."""
    names = _unique(groups_arg)
    if topics and not offsets_only:
        raise KctlError("--topic goes with --offsets", ExitCode.USAGE)
    if offsets_only:
        if not topics:
            raise KctlError("--offsets needs --topic TOPIC[:P,...]", ExitCode.USAGE)
        if len(names) != 1:
            raise KctlError("--offsets deletes the offsets of one group at a time", ExitCode.USAGE)
        _delete_offsets(names[0], parse_topic_scope(topics), fmt, cluster, zookeeper)
        return
    with group_admin(cluster, zookeeper) as groups:
        results = groups.delete_groups(names)
        nonempty = {
            r.name: d
            for r in results
            if r.error == "NON_EMPTY_GROUP"
            for d in groups.describe_groups([r.name])
        }
    rows = []
    for result in results:
        status: str | None
        message: str | None
        if result.ok:
            status, message = "deleted", None
            info(f"deleted group {result.name!r}")
        else:
            status, message = result.error, result.error_message
            if result.error == "NON_EMPTY_GROUP":
                members = nonempty.get(result.name)
                who = (
                    ", ".join(f"{m.member_id} ({m.client_id}@{m.host})" for m in members.members)
                    if members
                    else ""
                )
                message = "the group has active members" + (f": {who}" if who else "") + "; stop them first"
            elif result.error == GROUP_NOT_FOUND:
                message = "the group does not exist"
        rows.append({"group": result.name, "status": status, "message": message})
    render_rows(rows, [Column("group"), Column("status"), Column("message")], fmt)
    failures = [r for r in rows if r["status"] != "deleted"]
    for row in failures:
        _error(f"group {row['group']!r}: {row['status']}" + (f": {row['message']}" if row["message"] else ""))
    if failures:
        all_missing = len(failures) == len(rows) and all(r["status"] == GROUP_NOT_FOUND for r in failures)
        raise typer.Exit(ExitCode.NOT_FOUND if all_missing else ExitCode.FAILURE)


def _delete_offsets(
    group: str,
    scope: dict[str, list[int] | None],
    fmt: OutputFormat,
    cluster: ClusterOptions,
    zookeeper: str | None = None,
) -> None:
    from kctl.client.group.rewind_options import partitions_in_scope
    from kctl.protocol import ErrorCode, error_name

    with group_admin(cluster, zookeeper) as groups:
        partitions = partitions_in_scope(groups.committed_offsets(group), scope)
        if not partitions:
            raise KctlError(
                f"group {group!r} has no committed offsets for {', '.join(scope)}", ExitCode.NOT_FOUND
            )
        deleted = groups.delete_offsets(group, partitions)
    group_error, codes = deleted.error_code, deleted.partitions
    if group_error:  # the whole request failed (the client copies the error to every partition)
        raise KctlError(
            f"group {group!r}: {error_name(group_error)}",
            ExitCode.NOT_FOUND if group_error == ErrorCode.GROUP_ID_NOT_FOUND else ExitCode.FAILURE,
        )
    rows = [
        {
            "group": group,
            "topic": tp.topic,
            "partition": tp.partition,
            "status": "deleted" if not code else error_name(code),
        }
        for tp, code in sorted(codes.items())
    ]
    render_rows(rows, [Column("group"), Column("topic"), Column("partition"), Column("status")], fmt)
    failed = [r for r in rows if r["status"] != "deleted"]
    for row in failed:
        _error(f"partition {row['topic']}-{row['partition']}: {row['status']}")
    if group_error:
        _error(f"group {group!r}: {error_name(group_error)}")
    if failed or group_error:
        raise typer.Exit(ExitCode.FAILURE)
    info(f"deleted {len(rows)} committed offset(s) of group {group!r}")


# -- migrate ---------------------------------------------------------------------------------------
MIGRATE_COLUMNS = [
    Column("group"),
    Column("topic"),
    Column("partition"),
    Column("zookeeper_offset", "ZOOKEEPER"),
    Column("kafka_offset", "KAFKA"),
    Column("new_offset"),
    Column("status"),
    Column("note"),
]


@app.command("migrate")
@cluster_options
def migrate(
    group: Annotated[str, typer.Argument(metavar="GROUP", help="The ZooKeeper-mode group to migrate.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="STORE",
            help="kafka: copy ZooKeeper's offsets into the broker-coordinated store; zookeeper: back.",
        ),
    ] = "kafka",
    execute: Annotated[bool, typer.Option("--execute", help="Copy the offsets (else: the plan).")] = False,
    zookeeper: ZooKeeperOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Copy a group's committed offsets between ZooKeeper (/consumers/GROUP/offsets) and the
    broker-coordinated store (__consumer_offsets): print the plan, and with --execute copy it.

    The offline alternative to the rolling migration with dual.commit.enabled: the group's
    consumers must be stopped (none registered in ZooKeeper, no members in the broker group), else
    it is refused. Exit status 1 when refused or a partition fails, 3 when the group has no
    committed offsets in either store."""
    from kctl.client.zkgroup import ZkGroupAdmin, execute_migration, plan_migration
    from kctl.protocol import error_name

    store = to.strip().lower()
    if store not in ("kafka", "zookeeper"):
        raise KctlError(f"--to is kafka or zookeeper, not {to!r}", ExitCode.USAGE)
    if zookeeper is None:
        raise KctlError("migrate needs --zookeeper HOST:PORT[/CHROOT]", ExitCode.USAGE)
    with group_admin(cluster, zookeeper) as groups:
        assert isinstance(groups, ZkGroupAdmin)
        plan = plan_migration(groups, group, store)
        codes = execute_migration(groups, plan) if execute and plan.executable else {}
    if not plan.offsets:
        raise KctlError(f"group {group!r} has no committed offsets in ZooKeeper or Kafka", ExitCode.NOT_FOUND)
    render_rows([{"group": group, **e.row(codes)} for e in plan.offsets], MIGRATE_COLUMNS, fmt)
    for blocker in plan.blockers:
        _error(f"group {group!r}: {blocker}; stop its consumers first")
    failed = {tp: c for tp, c in codes.items() if c}
    for tp, code in failed.items():
        _error(f"partition {tp}: {error_name(code)}")
    if (plan.blockers and execute) or failed:
        raise typer.Exit(ExitCode.FAILURE)
    if execute:
        info(f"copied {len(codes)} offset(s) of group {group!r} to {store}")
    else:
        info(f"dry run: nothing changed; add --execute to copy {len(plan.changes)} offset(s) to {store}")
