"""`kctl partition`: move partition replicas between brokers (kafka-reassign-partitions.sh) and elect
leaders (kafka-leader-election.sh) on a running cluster.

The plans are kctl.client.admin.reassign_plan (Kafka's JSON formats and placement); the requests are
the admin client's (AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders, all
answered by the controller). As everywhere in kctl, nothing moves without ``--execute``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    BytesOption,
    ClusterOptions,
    FormatOption,
    cluster_options,
)
from kctl.commands.output import Column, OutputFormat, info, render_rows, warn

if TYPE_CHECKING:
    from kctl.client import AdminClient, TopicPartition
    from kctl.client.admin.reassign_plan import Assignment, Move

app = typer.Typer(
    help="Reassign partition replicas and elect leaders (talks to a running cluster).",
    no_args_is_help=True,
)

UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION"


def _ids(values: Any) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KctlError(f"no {what} {path}", ExitCode.NOT_FOUND) from None
    except (OSError, UnicodeDecodeError) as error:
        raise KctlError(f"cannot read the {what} {path}: {error}") from None


def _broker_list(text: str | None) -> list[int]:
    if not text:
        raise KctlError("--generate needs --broker-list (e.g. 1,2,3)", ExitCode.USAGE)
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise KctlError(f"--broker-list {text!r}: expected broker ids like 1,2,3", ExitCode.USAGE) from None
    if not ids:
        raise KctlError("--broker-list names no broker", ExitCode.USAGE)
    return list(dict.fromkeys(ids))


def _current_assignment(admin: AdminClient, topics: list[str]) -> dict[str, dict[int, tuple[int, ...]]]:
    """topic -> partition -> replicas; a missing topic ends the command (exit 3)."""
    described = admin.describe_topics(topics)
    missing = [t.name for t in described if not t.ok]
    if missing:
        raise KctlError(f"no such topic: {', '.join(missing)}", ExitCode.NOT_FOUND)
    return {t.name: {p.partition: tuple(p.replicas) for p in t.partitions} for t in described}


def _flat(assignment: dict[str, dict[int, tuple[int, ...]]]) -> Assignment:
    from kctl.client import TopicPartition

    return {TopicPartition(t, p): r for t, ps in assignment.items() for p, r in ps.items()}


def _write_plan(plan: dict[str, Any], fmt: OutputFormat) -> None:
    sys.stdout.write(json.dumps(plan, indent=None if fmt is OutputFormat.JSONL else 2) + "\n")
    sys.stdout.flush()


def _sizes(admin: AdminClient, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's size at its leader (DescribeLogDirs); unknown ones are left out."""
    from kctl.client.admin.partition_sizes import partition_sizes

    found = partition_sizes(admin, tps)
    for leader, error in found.failed.items():
        warn(f"broker {leader}: no partition sizes: {error}")
    return found.sizes


MOVE_COLUMNS = [
    Column("topic"),
    Column("partition"),
    Column("current", formatter=_ids),
    Column("target", formatter=_ids),
    Column("adding", formatter=_ids),
    Column("removing", formatter=_ids),
    Column("size", size=True),
    Column("bytes_to_copy", "COPIES", size=True),
    Column("status"),
    Column("message"),
]


def _move_row(move: Move, status: str, message: str | None = None) -> dict[str, Any]:
    return {
        "topic": move.topic_partition.topic,
        "partition": move.topic_partition.partition,
        "current": list(move.current),
        "target": list(move.target),
        "adding": list(move.adding),
        "removing": list(move.removing),
        "size": move.size,
        "bytes_to_copy": move.bytes_to_copy,
        "status": status,
        "message": message,
    }


# -- reassign --------------------------------------------------------------------------------------
@app.command("reassign")
@cluster_options
def reassign(
    generate_plan: Annotated[
        bool, typer.Option("--generate", help="Propose a plan moving the topics to --broker-list.")
    ] = False,
    topics_file: Annotated[
        Path | None,
        typer.Option(
            "--topics-to-move-json-file",
            metavar="FILE",
            dir_okay=False,
            help='With --generate: {"version":1,"topics":[{"topic":"name"},...]}.',
        ),
    ] = None,
    topics: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", metavar="TOPIC", help="With --generate: a topic to move (repeatable)."),
    ] = None,
    broker_list: Annotated[
        str | None,
        typer.Option(
            "--broker-list",
            "--brokers",
            metavar="IDS",
            help="With --generate: the target brokers, e.g. 1,2,3.",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", metavar="N", help="With --generate: a fixed random seed (a reproducible plan)."
        ),
    ] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--reassignment-json-file",
            metavar="FILE",
            dir_okay=False,
            help="The plan (Kafka's format, e.g. from --generate): show it; with --execute, --verify or "
            "--cancel, act on it.",
        ),
    ] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Submit the plan.")] = False,
    verify_plan: Annotated[
        bool, typer.Option("--verify", help="Show the plan's progress: exit 0 when done, 1 while not.")
    ] = False,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel the plan's ongoing reassignments.")
    ] = False,
    throttle: Annotated[
        int | None,
        typer.Option(
            "--throttle",
            metavar="BYTES/S",
            min=1,
            help="With --execute: throttle the copying to BYTES/S (the brokers' leader/follower."
            "replication.throttled.rate, the topics' throttled replicas); --verify removes it.",
        ),
    ] = None,
    exact_bytes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Move partition replicas between brokers, as kafka-reassign-partitions.sh.

    --generate (with --topics-to-move-json-file or --topic, and --broker-list) prints a proposed
    plan: a table of each partition's current and proposed replicas, or with -f json the plan
    itself in Kafka's format ({"version":1,"partitions":[{"topic","partition","replicas",
    "log_dirs"}]}) ready for --reassignment-json-file; the current assignment goes to stderr (keep
    it to roll back). Placement is Kafka's (rack-unaware), each topic keeping its replication
    factor.

    --reassignment-json-file F alone prints what the plan would do per partition: replicas added
    and removed, the partition's size at its leader and the bytes the move copies (size times
    replicas added); nothing changes. With --execute the plan is submitted to the controller
    (AlterPartitionReassignments) and the data starts to move; --throttle BYTES/S first sets, as
    Kafka does, the brokers' leader/follower.replication.throttled.rate and the topics'
    leader.replication.throttled.replicas (the current replicas of each moving partition) and
    follower.replication.throttled.replicas (the added ones); the brokers copy those replicas at
    that rate (a broker refusing the config is warned about). --verify shows each partition's
    progress (complete, in progress, not applied) and exits 0 when all are complete (then removes
    the throttle), 1 otherwise. --cancel cancels the plan's ongoing reassignments.

    Exit status 3 when a named topic, partition or broker does not exist (a plan moving replicas
    to a broker that is not in the cluster is refused before anything is sent), 1 when a request
    failed."""
    from kctl.client.admin.reassign_plan import PlanError, parse_plan

    modes = [generate_plan, verify_plan, cancel]
    if sum(modes) > 1:
        raise KctlError("give one of --generate, --verify, --cancel", ExitCode.USAGE)
    if execute and (generate_plan or verify_plan or cancel):
        raise KctlError("--execute goes with --reassignment-json-file alone", ExitCode.USAGE)
    if throttle is not None and not execute:
        raise KctlError("--throttle goes with --execute", ExitCode.USAGE)
    if generate_plan:
        if plan_file is not None:
            raise KctlError("--generate takes --topics-to-move-json-file/--topic, not a plan", ExitCode.USAGE)
        _generate(topics_file, topics, broker_list, seed, fmt, cluster)
        return
    if topics_file is not None or topics or broker_list is not None or seed is not None:
        raise KctlError(
            "--topics-to-move-json-file, --topic, --broker-list and --seed go with --generate", ExitCode.USAGE
        )
    if plan_file is None:
        raise KctlError("give --generate, or a plan with --reassignment-json-file", ExitCode.USAGE)
    try:
        plan = parse_plan(_read(plan_file, "reassignment file"))
    except PlanError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None
    with admin_session(*cluster) as admin:
        current = _flat(_current_assignment(admin, sorted({tp.topic for tp in plan})))
        if verify_plan:
            _verify(admin, plan, current, fmt)
        elif cancel:
            _cancel(admin, plan, fmt)
        else:
            _show_or_execute(admin, plan, current, execute, throttle, fmt, exact_bytes)


def _generate(
    topics_file: Path | None,
    topics: list[str] | None,
    broker_list: str | None,
    seed: int | None,
    fmt: OutputFormat,
    cluster: ClusterOptions,
) -> None:
    from kctl.client.admin.reassign_plan import PlanError, format_plan, generate, parse_topics_to_move

    names = list(dict.fromkeys(topics or []))
    if topics_file is not None:
        try:
            names += [
                n for n in parse_topics_to_move(_read(topics_file, "topics-to-move file")) if n not in names
            ]
        except PlanError as error:
            raise KctlError(str(error), ExitCode.USAGE) from None
    if not names:
        raise KctlError("--generate needs --topics-to-move-json-file or --topic", ExitCode.USAGE)
    brokers = _broker_list(broker_list)
    with admin_session(*cluster) as admin:
        current = _current_assignment(admin, names)
        live = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = [b for b in brokers if b not in live]
    if unknown:
        warn(f"brokers not alive now: {_ids(unknown)} (the controller refuses them until they are)")
    try:
        proposed = generate(current, brokers, rng=random.Random(seed))
    except PlanError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None
    flat = _flat(current)
    info("current partition replica assignment (keep it to roll back): " + json.dumps(format_plan(flat)))
    if fmt is OutputFormat.TABLE:
        rows = [
            {"topic": tp.topic, "partition": tp.partition, "current": list(flat[tp]), "proposed": list(r)}
            for tp, r in sorted(proposed.items())
        ]
        columns = [
            Column("topic"),
            Column("partition"),
            Column("current", formatter=_ids),
            Column("proposed", formatter=_ids),
        ]
        render_rows(rows, columns, fmt)
        info("-f json prints the proposed plan in Kafka's format, for --reassignment-json-file")
    else:
        _write_plan(format_plan(proposed), fmt)


def _show_or_execute(
    admin: AdminClient,
    plan: Assignment,
    current: Assignment,
    execute: bool,
    throttle: int | None,
    fmt: OutputFormat,
    exact_bytes: bool = False,
) -> None:
    from kctl.client.admin.reassign_plan import PlanError, absent_brokers, moves

    try:
        planned = moves(current, plan, _sizes(admin, list(plan)))
    except PlanError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    live = [b.node_id for b in admin.describe_cluster().brokers]
    absent = absent_brokers(planned, live)
    if absent:
        named = "; ".join(f"{b} (for {', '.join(map(str, tps))})" for b, tps in absent.items())
        raise KctlError(
            f"the plan names brokers that are not in the cluster: {named}; its brokers are "
            f"{_ids(sorted(live))}: nothing {'submitted' if execute else 'planned'}",
            ExitCode.NOT_FOUND,
        )
    changing = [m for m in planned if m.changes]
    total = sum(m.bytes_to_copy or 0 for m in changing)
    if not execute:
        render_rows(
            [_move_row(m, "planned" if m.changes else "unchanged") for m in planned],
            MOVE_COLUMNS,
            fmt,
            exact_sizes=exact_bytes,
        )
        info(
            f"{len(changing)} of {len(planned)} partitions would move, copying {total} bytes; "
            "nothing changed: add --execute to submit the plan"
        )
        return
    if throttle is not None and changing:
        _set_throttle(admin, changing, throttle)  # before the copying starts, as Kafka's tool does
    results = {
        r.topic_partition: r
        for r in admin.alter_partition_reassignments({m.topic_partition: m.target for m in changing})
    }
    rows = []
    failed = 0
    for m in planned:
        result = results.get(m.topic_partition)
        if result is None:
            rows.append(_move_row(m, "unchanged"))
        elif result.ok:
            rows.append(_move_row(m, "submitted"))
        else:
            failed += 1
            rows.append(_move_row(m, result.error or "", result.error_message))
    render_rows(rows, MOVE_COLUMNS, fmt, exact_sizes=exact_bytes)
    info(
        f"submitted {len(changing) - failed} of {len(changing)} moves ({total} bytes to copy); "
        "follow them with --verify"
    )
    if failed:
        raise typer.Exit(ExitCode.FAILURE)


def _set_throttle(admin: AdminClient, changing: list[Any], throttle: int) -> None:
    """Kafka's throttle of a reassignment (kctl.client.admin.reassign_throttle), refusals warned about."""
    from kctl.client.admin.reassign_throttle import set_reassignment_throttle

    outcome = set_reassignment_throttle(
        admin, ((m.topic_partition, m.current, m.target) for m in changing), throttle
    )
    for topic, result in outcome.topic_failures:
        warn(f"topic {topic}: throttled replicas not set: {result.error}: {result.error_message}")
    for result in outcome.broker_failures:
        detail = f": {result.error_message}" if result.error_message else ""
        warn(f"broker {result.name}: throttle not set: {result.error}{detail}")
    info(f"replication throttle {throttle} B/s on brokers {_ids(outcome.brokers)}")


VERIFY_COLUMNS = [
    Column("topic"),
    Column("partition"),
    Column("target", formatter=_ids),
    Column("current", formatter=_ids),
    Column("adding", formatter=_ids),
    Column("removing", formatter=_ids),
    Column("state"),
]


def _verify(admin: AdminClient, plan: Assignment, current: Assignment, fmt: OutputFormat) -> None:
    from kctl.client.admin.reassign_plan import COMPLETE, IN_PROGRESS, verify
    from kctl.client.admin.reassign_throttle import clear_reassignment_throttle

    ongoing = admin.list_partition_reassignments(list(plan))
    states = verify(plan, current, ongoing)
    rows = []
    for tp, state in states.items():
        running = ongoing.get(tp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "target": list(plan[tp]),
                "current": list(running.replicas if running else current.get(tp, ())),
                "adding": list(running.adding_replicas) if running else [],
                "removing": list(running.removing_replicas) if running else [],
                "state": state,
            }
        )
    render_rows(rows, VERIFY_COLUMNS, fmt)
    done = sum(1 for s in states.values() if s == COMPLETE)
    running_count = sum(1 for s in states.values() if s == IN_PROGRESS)
    info(f"{done} of {len(states)} partitions complete, {running_count} in progress")
    if done == len(states):
        clear_reassignment_throttle(admin, plan)  # Kafka's --verify removes the throttle once done
        return
    raise typer.Exit(ExitCode.FAILURE)


def _cancel(admin: AdminClient, plan: Assignment, fmt: OutputFormat) -> None:
    results = admin.alter_partition_reassignments({tp: None for tp in plan})
    rows = []
    failed = 0
    for r in results:
        if r.ok:
            status = "cancelled"
        elif r.error == "NO_REASSIGNMENT_IN_PROGRESS":
            status = "not running"
        else:
            status = r.error or ""
            failed += 1
        message = r.error_message if status not in ("cancelled", "not running") else None
        rows.append(
            {
                "topic": r.topic_partition.topic,
                "partition": r.topic_partition.partition,
                "status": status,
                "message": message,
            }
        )
    render_rows(rows, [Column("topic"), Column("partition"), Column("status"), Column("message")], fmt)
    if failed:
        raise typer.Exit(ExitCode.FAILURE)


# -- elect-leaders ---------------------------------------------------------------------------------
@app.command("elect-leaders")
@cluster_options
def elect_leaders(
    election_type: Annotated[
        str,
        typer.Option(
            "--election-type",
            metavar="preferred|unclean",
            help="preferred: the first replica of the assignment, if alive and in the ISR; unclean: any "
            "live replica, for partitions without a leader (records may be lost).",
        ),
    ],
    all_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition of every topic.")
    ] = False,
    topic: Annotated[str | None, typer.Option("--topic", "-t", metavar="TOPIC", help="One topic.")] = None,
    partition: Annotated[
        int | None,
        typer.Option(
            "--partition", "-p", metavar="P", min=0, help="With --topic: one partition (default: all)."
        ),
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--path-to-json-file",
            metavar="FILE",
            dir_okay=False,
            help='The partitions: {"partitions":[{"topic":"t","partition":0},...]}.',
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Elect partition leaders, as kafka-leader-election.sh (ElectLeaders, to the controller).

    Prints one row per partition: elected, not needed (the preferred replica leads already, or, for
    unclean, the partition has a leader) or Kafka's error name (PREFERRED_LEADER_NOT_AVAILABLE,
    ELIGIBLE_LEADERS_NOT_AVAILABLE, ...). Exit status 0 when every partition was elected or needed
    no election, 3 when no named partition exists, 1 otherwise."""
    from kctl.client import TopicPartition

    if election_type not in ("preferred", "unclean"):
        raise KctlError(f"--election-type {election_type!r}: preferred or unclean", ExitCode.USAGE)
    if sum([all_partitions, topic is not None, json_file is not None]) != 1:
        raise KctlError("give one of --all-topic-partitions, --topic, --path-to-json-file", ExitCode.USAGE)
    if partition is not None and topic is None:
        raise KctlError("--partition goes with --topic", ExitCode.USAGE)
    wanted: list[TopicPartition] | None = None
    if json_file is not None:
        wanted = _election_file(json_file)
    with admin_session(*cluster) as admin:
        if topic is not None and partition is not None:
            wanted = [TopicPartition(topic, partition)]
        elif topic is not None:
            [described] = admin.describe_topics([topic])
            if not described.ok:
                raise KctlError(f"topic {topic!r}: {described.error}", ExitCode.NOT_FOUND)
            wanted = [TopicPartition(topic, p.partition) for p in described.partitions]
        results = admin.elect_leaders(election_type, wanted)
    rows = []
    for r in results:
        if r.ok:
            status = "elected"
        elif r.error == "ELECTION_NOT_NEEDED":
            status = "not needed"
        else:
            status = r.error or ""
        rows.append(
            {
                "topic": r.topic_partition.topic,
                "partition": r.topic_partition.partition,
                "status": status,
                "message": r.error_message,
            }
        )
    render_rows(rows, [Column("topic"), Column("partition"), Column("status"), Column("message")], fmt)
    failures = [r for r in results if not r.ok and r.error != "ELECTION_NOT_NEEDED"]
    if failures and len(failures) == len(results) and all(r.error == UNKNOWN for r in failures):
        raise typer.Exit(ExitCode.NOT_FOUND)
    if failures:
        raise typer.Exit(ExitCode.FAILURE)


def _election_file(path: Path) -> list[TopicPartition]:
    from kctl.client import TopicPartition

    text = _read(path, "partitions file")
    try:
        data = json.loads(text)
        entries = data["partitions"]
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise KctlError(
            f'{path}: expected {{"partitions":[{{"topic":"t","partition":0}},...]}}', ExitCode.USAGE
        ) from None
    if not partitions:
        raise KctlError(f"{path} names no partition", ExitCode.USAGE)
    return list(dict.fromkeys(partitions))
