"""`kctl broker logger describe|alter`: a running broker's logger levels, read and changed without a
restart (Kafka's BROKER_LOGGER config resource; kafka-configs.sh --entity-type broker-loggers). A level
set here holds until the broker restarts: it is not stored (as Kafka's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import Column, info, render_rows

if TYPE_CHECKING:
    from kctl.client.admin import AdminClient

app = typer.Typer(
    help="Describe and change a broker's logger levels at runtime (kafka-configs.sh --entity-type "
    "broker-loggers).",
    no_args_is_help=True,
)

LOGGER_COLUMNS = [
    Column("broker_id", "BROKER"),
    Column("logger"),
    Column("level"),
    Column("source"),
]
PLAN_COLUMNS = [
    Column("broker_id", "BROKER"),
    Column("logger"),
    Column("action"),
    Column("current"),
    Column("new"),
]
#: the sources of a level the logger has of its own (set at runtime or configured), not inherited
OWN_SOURCES = ("DYNAMIC_BROKER_LOGGER_CONFIG", "STATIC_BROKER_CONFIG")


def _known_broker(admin: AdminClient, broker_id: int | None) -> int:
    """``broker_id``, or the first broker when None; exit status 3 for a broker not in the cluster."""
    known = [b.node_id for b in admin.describe_cluster().brokers]
    if broker_id is None:
        return known[0]
    if broker_id not in known:
        raise KctlError(f"no broker {broker_id} in the cluster (brokers: {known})", ExitCode.NOT_FOUND)
    return broker_id


@app.command("describe")
@cluster_options
def describe(
    loggers: Annotated[
        list[str] | None, typer.Argument(metavar="[LOGGER]...", help="Only these loggers (default: all).")
    ] = None,
    broker_id: Annotated[
        int | None, typer.Option("--broker", metavar="ID", help="The broker (default: any broker).")
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option("--all", help="Every logger, also those inheriting their parent's level."),
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show a broker's loggers with their effective level (log4j's names: DEBUG, INFO, WARN, ERROR,
    FATAL, OFF) and its source: DYNAMIC_BROKER_LOGGER_CONFIG (set at runtime with `kctl broker logger
    alter`), STATIC_BROKER_CONFIG (configured: log.level, log.level.LOGGER) or DEFAULT_CONFIG
    (inherited from the parent logger). By default the loggers with a level of their own; --all, or
    naming loggers, also the others. The root logger is `root`. Exit status 3 when the broker or a
    named logger is unknown."""
    from kctl.commands.clients import admin_session

    with admin_session(*cluster) as admin:
        wanted = _known_broker(admin, broker_id)
        entries = admin.describe_broker_loggers(wanted)
    if loggers:
        by_name = {entry.name: entry for entry in entries}
        missing = [name for name in loggers if name not in by_name]
        if missing:
            raise KctlError(f"broker {wanted} has no logger {', '.join(missing)}", ExitCode.NOT_FOUND)
        entries = [by_name[name] for name in dict.fromkeys(loggers)]
    elif not show_all:
        entries = [entry for entry in entries if entry.source.name in OWN_SOURCES]
    rows = [
        {"broker_id": wanted, "logger": e.name, "level": e.value, "source": e.source.name} for e in entries
    ]
    render_rows(rows, LOGGER_COLUMNS, fmt, title=f"broker {wanted} loggers")


@app.command("alter")
@cluster_options
def alter(
    broker_id: Annotated[int, typer.Option("--broker", metavar="ID", help="The broker.")],
    set_levels: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="LOGGER=LEVEL", help="Set a logger's level (repeatable)."),
    ] = None,
    delete_levels: Annotated[
        list[str] | None,
        typer.Option(
            "--delete", metavar="LOGGER", help="Return a logger to its configured level (repeatable)."
        ),
    ] = None,
    execute: Annotated[
        bool,
        typer.Option("--execute", help="Apply the changes (without it: validate them and show the plan)."),
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Change loggers' levels on a running broker, at once and until it restarts (nothing is stored;
    the configured levels hold again after a restart), as kafka-configs.sh --entity-type
    broker-loggers --alter does: `--set kctl.request=DEBUG` turns the request log on, `--delete
    kctl.request` returns it to its configured level (off by default). Levels: TRACE, DEBUG, INFO,
    WARN, ERROR, FATAL, OFF. Without --execute the broker validates the change and the plan is
    printed. Exit status 1 when the broker refuses it (an unknown logger or level; the root logger's
    level cannot be deleted), 3 for an unknown broker."""
    from kctl.commands.clients import admin_session
    from kctl.commands.options import parse_set_options

    changes = parse_set_options(set_levels)
    deletes = list(dict.fromkeys(delete_levels or ()))
    if not changes and not deletes:
        raise KctlError("nothing to change: give --set LOGGER=LEVEL or --delete LOGGER", ExitCode.USAGE)
    with admin_session(*cluster) as admin:
        wanted = _known_broker(admin, broker_id)
        current = {e.name: e.value for e in admin.describe_broker_loggers(wanted)}
        result = admin.alter_broker_loggers(wanted, changes, deletes, validate_only=not execute)
    if result.error_code:
        raise KctlError(f"broker {wanted}: {result.error}: {result.error_message}", ExitCode.FAILURE)
    rows = [
        {"broker_id": wanted, "logger": name, "action": "set", "current": current.get(name), "new": level}
        for name, level in changes.items()
    ]
    rows += [
        {"broker_id": wanted, "logger": name, "action": "delete", "current": current.get(name), "new": None}
        for name in deletes
    ]
    render_rows(rows, PLAN_COLUMNS, fmt, title=f"broker {wanted} logger changes")
    if execute:
        info(f"changed the logger levels of broker {wanted} (until it restarts)")
    else:
        info("validated; nothing changed: add --execute to apply")
