"""`kctl quota`: the client-quota jobs of ``kafka-configs.sh`` — describe and alter the byte-rate
quotas of users, client ids and (user, client id) pairs (DescribeClientQuotas, AlterClientQuotas).
Entities: ``--user NAME``, ``--client-id NAME``, ``--default user|client-id`` (that type's default
entity; also spelled ``--user-defaults`` / ``--client-defaults`` as in Kafka's tool). ``alter`` prints
its plan (checked by the broker) and changes nothing without ``--execute``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import info, render_rows

if TYPE_CHECKING:
    from kctl.client.admin.quotas import ClientQuota

app = typer.Typer(
    help="Client quotas: byte rates per user and client id, enforced by throttling.", no_args_is_help=True
)

QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"]
COLUMNS = ["user", "client_id", *QUOTA_KEYS]
PLAN_COLUMNS = ["user", "client_id", "key", "current", "new", "status", "message"]

UserOption = Annotated[str | None, typer.Option("--user", help="A user (the principal's name).")]
ClientIdOption = Annotated[str | None, typer.Option("--client-id", help="A client id.")]
DefaultOption = Annotated[
    list[str] | None,
    typer.Option("--default", help="The default entity of this type: user or client-id (repeatable)."),
]
UserDefaultsOption = Annotated[bool, typer.Option("--user-defaults", help="Same as --default user.")]
ClientDefaultsOption = Annotated[bool, typer.Option("--client-defaults", help="Same as --default client-id.")]


def _entity(
    user: str | None,
    client_id: str | None,
    defaults: list[str] | None,
    user_defaults: bool,
    client_defaults: bool,
) -> dict[str, str | None]:
    """The entity the flags name: entity type -> name (None: the default)."""
    kinds = set(defaults or [])
    unknown = kinds - {"user", "client-id"}
    if unknown:
        raise KctlError(
            f"--default takes user or client-id, not {', '.join(sorted(unknown))}", ExitCode.USAGE
        )
    if user_defaults:
        kinds.add("user")
    if client_defaults:
        kinds.add("client-id")
    entity: dict[str, str | None] = {}
    for kind, name in (("user", user), ("client-id", client_id)):
        if name is not None and kind in kinds:
            raise KctlError(f"give a {kind} name or its default, not both", ExitCode.USAGE)
        if name == "":
            raise KctlError(f"empty {kind} name (use --default {kind} for the default)", ExitCode.USAGE)
        if name is not None:
            entity[kind] = name
        elif kind in kinds:
            entity[kind] = None
    return entity


def _components(entity: dict[str, str | None]) -> dict[str, object]:
    """The describe filter matching exactly ``entity``'s names (DEFAULT for a default)."""
    from kctl.client.admin.quotas import DEFAULT

    return {kind: (DEFAULT if name is None else name) for kind, name in entity.items()}


def _parse_value(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise KctlError(f"{key}={text!r}: not a number", ExitCode.USAGE) from None
    return value


def _current(quotas: list[ClientQuota], entity: dict[str, str | None]) -> dict[str, float]:
    for quota in quotas:
        if quota.entity == entity:
            return quota.values
    return {}


def _show(value: float | None) -> Any:
    if value is None:
        return None
    return int(value) if value == int(value) else value


@app.command("describe")
@cluster_options
def describe(
    user: UserOption = None,
    client_id: ClientIdOption = None,
    default: DefaultOption = None,
    user_defaults: UserDefaultsOption = False,
    client_defaults: ClientDefaultsOption = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Only entities of exactly the types named (no wider ones).")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """List the configured client quotas: every entity, or those matching the entity flags.

    Exit status 1 if the broker refuses (e.g. CLUSTER_AUTHORIZATION_FAILED)."""
    entity = _entity(user, client_id, default, user_defaults, client_defaults)
    with admin_session(*cluster) as admin:
        quotas = admin.describe_client_quotas(_components(entity), strict=strict)
    render_rows([q.row() for q in quotas], COLUMNS, fmt)


@app.command("alter")
@cluster_options
def alter(
    user: UserOption = None,
    client_id: ClientIdOption = None,
    default: DefaultOption = None,
    user_defaults: UserDefaultsOption = False,
    client_defaults: ClientDefaultsOption = False,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE, e.g. producer_byte_rate=1048576 (repeatable)."),
    ] = None,
    delete: Annotated[
        list[str] | None, typer.Option("--delete", help="A quota key to remove (repeatable).")
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Apply the change (without it, only the plan).")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Set or remove quota values of one entity: print the plan (validated by the broker), and with
    --execute apply it. Keys: producer_byte_rate, consumer_byte_rate (bytes per second, per broker),
    request_percentage, controller_mutation_rate (stored; kctl does not enforce them).

    Exit status 2 without an entity or a change, or for a malformed KEY=VALUE; 1 if the broker
    refuses the change (INVALID_REQUEST for an unknown key or a bad value)."""
    from kctl.client.admin.quotas import QuotaAlteration
    from kctl.protocol.errors import error_name

    entity = _entity(user, client_id, default, user_defaults, client_defaults)
    if not entity:
        raise KctlError("name an entity: --user, --client-id and/or --default user|client-id", ExitCode.USAGE)
    ops: dict[str, float | None] = {}
    for item in set_ or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise KctlError(f"--set {item!r}: expected KEY=VALUE", ExitCode.USAGE)
        ops[key.strip()] = _parse_value(key.strip(), text.strip())
    for key in delete or []:
        if key in ops:
            raise KctlError(f"{key} is both set and deleted", ExitCode.USAGE)
        ops[key] = None
    if not ops:
        raise KctlError("nothing to change: give --set KEY=VALUE or --delete KEY", ExitCode.USAGE)
    with admin_session(*cluster) as admin:
        current = _current(admin.describe_client_quotas(_components(entity), strict=True), entity)
        [result] = admin.alter_client_quotas([QuotaAlteration(entity, ops)], validate_only=not execute)
    status = error_name(result.error_code) if result.error_code else "altered" if execute else "planned"
    shown = {k.replace("-", "_"): ("<default>" if v is None else v) for k, v in entity.items()}
    rows = [
        {
            **shown,
            "key": key,
            "current": _show(current.get(key)),
            "new": _show(value),
            "status": status,
            "message": result.error_message,
        }
        for key, value in ops.items()
    ]
    render_rows(rows, PLAN_COLUMNS, fmt)
    if result.error_code:
        raise typer.Exit(ExitCode.FAILURE)
    if not execute:
        info("dry run: nothing changed; add --execute to apply")
