"""`kctl transactions`: the jobs of ``kafka-transactions.sh`` — the active producers of a topic's
partitions (DescribeProducers, to each leader: producer id, epoch, last sequence and timestamp),
and the cluster's transactions (ListTransactions to every broker, DescribeTransactions to each
transactional id's coordinator)."""

from __future__ import annotations

from typing import Annotated

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import render_rows, warn

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
