"""`kctl transactions`: the jobs of ``kafka-transactions.sh`` — the active producers of a topic's
partitions (DescribeProducers, to each leader: producer id, epoch, last sequence and timestamp),
the cluster's transactions (ListTransactions to every broker, DescribeTransactions to each
transactional id's coordinator), the search for hanging transactions and their abort (an ABORT
marker written by the partition's leader, planned first and written with --execute). The logic is
in ``kctl.client.admin.hanging_transactions``."""

from __future__ import annotations

from typing import Annotated

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import info, render_rows, warn

app = typer.Typer(help="Producers and transactions (as kafka-transactions.sh).", no_args_is_help=True)

PRODUCER_COLUMNS = [
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_timestamp",
    "coordinator_epoch",
    "current_txn_start_offset",
]
LIST_COLUMNS = ["transactional_id", "coordinator", "producer_id", "state"]
HANGING_COLUMNS = [
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "coordinator_epoch",
    "start_offset",
    "last_timestamp",
    "duration_min",
]
ABORT_COLUMNS = [
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "coordinator_epoch",
    "start_offset",
    "status",
]
DESCRIBE_COLUMNS = ["transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "error"]


@app.command("describe-producers")
@cluster_options
def describe_producers(
    topic: Annotated[str, typer.Option("--topic", help="The topic.")],
    partition: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="A partition (repeatable; all by default).")
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """The active (idempotent) producers of a topic's partitions, from each partition's leader.

    Exit status 3 if the topic or a partition does not exist; 1 for another error of a partition."""
    from kctl.common.topic_partition import TopicPartition
    from kctl.protocol.errors import ErrorCode, error_name

    with admin_session(*cluster, not_found=[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]) as admin:
        [description] = admin.describe_topics([topic])
        if description.error_code:
            raise KctlError(f"topic {topic!r}: {error_name(description.error_code)}", ExitCode.NOT_FOUND)
        known = [p.partition for p in description.partitions]
        wanted = sorted(set(partition)) if partition else known
        missing = [p for p in wanted if p not in known]
        if missing:
            raise KctlError(f"topic {topic!r} has no partition {missing[0]}", ExitCode.NOT_FOUND)
        results = admin.describe_producers([TopicPartition(topic, p) for p in wanted])
    rows = [producer.row() for tp in sorted(results) for producer in results[tp].producers]
    render_rows(rows, PRODUCER_COLUMNS, fmt)
    failed = [r for r in results.values() if r.error_code]
    for result in failed:
        warn(
            f"{result.topic_partition}: {error_name(result.error_code)} {result.error_message or ''}".rstrip()
        )
    if failed:
        raise typer.Exit(ExitCode.FAILURE)


@app.command("list")
@cluster_options
def list_transactions(
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only transactions in this state (repeatable).")
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only this producer's (repeatable).")
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """The transactional ids every broker coordinates, with their producer id and state
    (ListTransactions)."""
    with admin_session(*cluster) as admin:
        listings = admin.list_transactions(states=state or (), producer_ids=producer_id or ())
    rows = [
        {
            "transactional_id": t.transactional_id,
            "coordinator": t.broker_id,
            "producer_id": t.producer_id,
            "state": t.state,
        }
        for t in listings
    ]
    render_rows(rows, LIST_COLUMNS, fmt)


@app.command("describe")
@cluster_options
def describe(
    transactional_id: Annotated[
        list[str], typer.Option("--transactional-id", help="A transactional id (repeatable).")
    ],
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """The state of transactional ids (DescribeTransactions).

    Exit status 3 when an id is not found (never used, or expired)."""
    from kctl.protocol.errors import ErrorCode, error_name

    with admin_session(*cluster) as admin:
        described = admin.describe_transactions(transactional_id)
    rows = [
        {
            "transactional_id": d.transactional_id,
            "state": d.state or None,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "timeout_ms": d.timeout_ms,
            "error": error_name(d.error_code) if d.error_code else None,
        }
        for d in described
    ]
    render_rows(rows, DESCRIBE_COLUMNS, fmt)
    if any(d.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND for d in described):
        raise typer.Exit(ExitCode.NOT_FOUND)
    if any(d.error_code for d in described):
        raise typer.Exit(ExitCode.FAILURE)


@app.command("find-hanging")
@cluster_options
def find_hanging(
    broker_id: Annotated[
        int | None,
        typer.Option("--broker-id", metavar="ID", help="Search the partitions with a replica on it."),
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Search this topic's partitions.")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", help="Only this partition of --topic.")
    ] = None,
    max_transaction_timeout: Annotated[
        int,
        typer.Option(
            "--max-transaction-timeout",
            metavar="MINUTES",
            min=0,
            help="The longest transaction timeout of the producers: younger transactions are not candidates.",
        ),
    ] = 15,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Open transactions that no coordinator will end (as kafka-transactions.sh find-hanging): the
    partition's leader holds them open, older than --max-transaction-timeout, but no transactional
    id has their producer id or its transaction does not name the partition. Each row's start
    offset is what `kctl transactions abort --start-offset` takes.

    Exit status 1 if any transaction hangs (or a partition's leader could not say), 3 if the topic
    or partition does not exist, 2 without --topic or --broker-id."""
    from kctl.client.admin.hanging_transactions import NoSuchPartitionError, find_hanging_transactions

    if topic is None and broker_id is None:
        raise KctlError("find-hanging needs --topic or --broker-id to limit the search", ExitCode.USAGE)
    if partition is not None and topic is None:
        raise KctlError("--partition needs --topic", ExitCode.USAGE)
    with admin_session(*cluster) as admin:
        try:
            found = find_hanging_transactions(
                admin,
                topic=topic,
                partition=partition,
                broker_id=broker_id,
                max_transaction_timeout_ms=max_transaction_timeout * 60_000,
            )
        except NoSuchPartitionError as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    render_rows([h.row() for h in found.hanging], HANGING_COLUMNS, fmt)
    from kctl.protocol.errors import error_name

    for result in found.failed:
        warn(
            f"{result.topic_partition}: {error_name(result.error_code)} {result.error_message or ''}".rstrip()
        )
    if found.hanging or found.failed:
        raise typer.Exit(ExitCode.FAILURE)


@app.command("abort")
@cluster_options
def abort(
    topic: Annotated[str, typer.Option("--topic", help="The topic.")],
    partition: Annotated[int, typer.Option("--partition", "-p", help="The partition.")],
    start_offset: Annotated[
        int | None,
        typer.Option(
            "--start-offset", help="The first offset of the transaction (its producer is looked up)."
        ),
    ] = None,
    producer_id: Annotated[
        int | None, typer.Option("--producer-id", help="Instead of --start-offset: the producer's id.")
    ] = None,
    producer_epoch: Annotated[
        int | None, typer.Option("--producer-epoch", help="With --producer-id: its epoch.")
    ] = None,
    coordinator_epoch: Annotated[
        int | None,
        typer.Option(
            "--coordinator-epoch", help="With --producer-id: the coordinator epoch (-1 counts as 0)."
        ),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Write the ABORT marker (without it, only print the plan).")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Abort a partition's open transaction (as kafka-transactions.sh abort): the partition's leader
    writes an ABORT marker for its producer, so the last stable offset moves past it and
    read_committed consumers go on. Name the transaction by --start-offset (its producer is found
    with DescribeProducers) or by --producer-id, --producer-epoch and --coordinator-epoch. Prints the
    plan; --execute writes the marker. Meant for hanging transactions (`find-hanging`): a
    transaction its coordinator knows is aborted on that partition only.

    Exit status 3 if the topic or partition does not exist or no open transaction starts at
    --start-offset; 1 if the leader refuses the marker; 2 for a missing or extra option."""
    from kctl.client.admin.hanging_transactions import (
        NoSuchPartitionError,
        NoTransactionError,
        abort_plan,
        check_partition,
        spec_of_ids,
    )
    from kctl.client.types import TopicPartition

    tp = TopicPartition(topic, partition)
    ids = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == (producer_id is None):
        raise KctlError("name the transaction by --start-offset or by --producer-id", ExitCode.USAGE)
    if producer_id is not None and None in ids:
        raise KctlError("--producer-id needs --producer-epoch and --coordinator-epoch", ExitCode.USAGE)
    if start_offset is not None and (producer_epoch is not None or coordinator_epoch is not None):
        raise KctlError("--producer-epoch and --coordinator-epoch go with --producer-id", ExitCode.USAGE)
    with admin_session(*cluster) as admin:
        try:
            if start_offset is not None:
                spec = abort_plan(admin, tp, start_offset)
            else:
                check_partition(admin, tp)
                assert (
                    producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
                )
                spec = spec_of_ids(tp, producer_id, producer_epoch, coordinator_epoch)
        except (NoSuchPartitionError, NoTransactionError) as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None
        if execute:
            admin.abort_transaction(spec)
    row = {
        "topic": topic,
        "partition": partition,
        "producer_id": spec.producer_id,
        "producer_epoch": spec.producer_epoch,
        "coordinator_epoch": spec.coordinator_epoch,
        "start_offset": start_offset,
        "status": "aborted" if execute else "planned",
    }
    render_rows([row], ABORT_COLUMNS, fmt)
    if not execute:
        info("dry run: nothing written; add --execute to write the ABORT marker")
