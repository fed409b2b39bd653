"""`kctl user`: SCRAM users (the job of ``kafka-configs.sh --entity-type users --alter --add-config
'SCRAM-SHA-512=[password=...]'``): create, delete, list. Through the brokers
(AlterUserScramCredentials / DescribeUserScramCredentials), or with ``--zookeeper`` straight into
ZooKeeper's ``/config/users`` (to create the first users before any broker runs, as with Kafka).
Passwords are read from a prompt or, with ``--password-stdin`` (or a stdin that is not a terminal),
from the first line of stdin; never from the command line."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import info, render_rows
from kctl.common.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential

if TYPE_CHECKING:
    from kctl.client.admin.security import UserResult

app = typer.Typer(help="Manage SCRAM users (credentials for SASL/SCRAM).", no_args_is_help=True)

MechanismOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mechanism",
        "-m",
        help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both for create, all for delete).",
    ),
]
ZooKeeperOption = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="Write to / read from ZooKeeper directly (Kafka's /config/users), not through a broker.",
    ),
]
COLUMNS = ["user", "mechanism", "iterations", "status", "message"]


def _mechanisms(given: list[str] | None) -> list[str]:
    chosen = [m.upper() for m in (given or list(MECHANISMS))]
    for m in chosen:
        if m not in MECHANISMS:
            raise KctlError(f"unknown mechanism {m!r} (SCRAM-SHA-256 or SCRAM-SHA-512)", ExitCode.USAGE)
    return list(dict.fromkeys(chosen))


def _read_password(user: str, from_stdin: bool) -> str:
    if from_stdin or not sys.stdin.isatty():
        line = sys.stdin.readline()
        password = line.rstrip("\r\n")
    else:
        password = typer.prompt(f"Password for {user}", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        raise KctlError("empty password", ExitCode.USAGE)
    return password


def _zookeeper_store(connect: str) -> Any:
    from kctl.zk.security_store import ZooKeeperSecurityStore

    try:
        return ZooKeeperSecurityStore.connect(connect)
    except Exception as error:
        raise KctlError(f"cannot connect to ZooKeeper {connect}: {error}", ExitCode.NOT_FOUND) from None


def _status_rows(results: list[UserResult], mechanisms: list[str], verb: str) -> list[dict[str, Any]]:
    from kctl.protocol.errors import error_name

    rows = []
    for r in results:
        status = verb if r.error_code == 0 else error_name(r.error_code)
        for m in mechanisms:
            rows.append(
                {
                    "user": r.user,
                    "mechanism": m,
                    "iterations": None,
                    "status": status,
                    "message": r.error_message,
                }
            )
    return rows


def _finish(rows: list[dict[str, Any]], fmt: Any, verb: str) -> None:
    render_rows(rows, COLUMNS, fmt)
    failed = [r for r in rows if r["status"] != verb]
    if failed:
        not_found = all(r["status"] == "RESOURCE_NOT_FOUND" for r in failed)
        raise typer.Exit(ExitCode.NOT_FOUND if not_found else ExitCode.FAILURE)


@app.command("create")
@cluster_options
def create(
    user: Annotated[str, typer.Argument(help="The user name.")],
    mechanism: MechanismOption = None,
    iterations: Annotated[
        int, typer.Option("--iterations", min=MIN_ITERATIONS, max=MAX_ITERATIONS, help="PBKDF2 iterations.")
    ] = DEFAULT_ITERATIONS,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from the first line of stdin.")
    ] = False,
    zookeeper: ZooKeeperOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Create a SCRAM user, or change its password (its salted credential for each mechanism).

    The password is asked for (twice) on a terminal, or read from the first line of stdin. Exit
    status 1 if the broker refuses (e.g. CLUSTER_AUTHORIZATION_FAILED)."""
    from kctl.client.admin.security import UserResult

    mechanisms = _mechanisms(mechanism)
    password = _read_password(user, password_stdin)
    if zookeeper:
        store = _zookeeper_store(zookeeper)
        try:
            for m in mechanisms:
                store.set_user_credential(
                    user, m, ScramCredential.from_password(m, password, iterations=iterations).to_text()
                )
        finally:
            store.close()
        results = [UserResult(user)]
    else:
        with admin_session(*cluster) as admin:
            results = admin.alter_users([(user, m, password) for m in mechanisms], iterations=iterations)
    rows = _status_rows(results, mechanisms, "created")
    for row in rows:
        row["iterations"] = iterations
    if all(r["status"] == "created" for r in rows):
        info(f"created SCRAM credentials for {user!r} ({', '.join(mechanisms)})")
    _finish(rows, fmt, "created")


@app.command("delete")
@cluster_options
def delete(
    user: Annotated[str, typer.Argument(help="The user name.")],
    mechanism: MechanismOption = None,
    zookeeper: ZooKeeperOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Delete a SCRAM user's credentials (every mechanism it has, or those given).

    Exit status 3 if the user has none of them."""
    if zookeeper:
        store = _zookeeper_store(zookeeper)
        try:
            existing = store.user_credentials(user)
            mechanisms = _mechanisms(mechanism) if mechanism else sorted(existing)
            rows = []
            for m in mechanisms or ["SCRAM-SHA-512"]:
                removed = store.set_user_credential(user, m, None)
                status = "deleted" if removed else "RESOURCE_NOT_FOUND"
                rows.append(
                    {"user": user, "mechanism": m, "iterations": None, "status": status, "message": None}
                )
        finally:
            store.close()
        _finish(rows, fmt, "deleted")
        return
    with admin_session(*cluster) as admin:
        if mechanism:
            mechanisms = _mechanisms(mechanism)
        else:
            described = admin.describe_users([user])
            mechanisms = [m for r in described for m, _ in r.mechanisms] or ["SCRAM-SHA-512"]
        results = admin.alter_users(deletions=[(user, m) for m in mechanisms])
    rows = _status_rows(results, mechanisms, "deleted")
    if all(r["status"] == "deleted" for r in rows):
        info(f"deleted SCRAM credentials of {user!r}")
    _finish(rows, fmt, "deleted")


@app.command("list")
@cluster_options
def list_users(
    users: Annotated[list[str] | None, typer.Argument(help="Users to show (default: all).")] = None,
    zookeeper: ZooKeeperOption = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """List SCRAM users: one row per user and mechanism, with its iterations (never a secret).

    Exit status 3 if a named user does not exist."""
    from kctl.protocol import ErrorCode

    rows: list[dict[str, Any]] = []
    missing = False
    if zookeeper:
        store = _zookeeper_store(zookeeper)
        try:
            found = store.users()
        finally:
            store.close()
        for name in users or sorted(found):
            credentials = found.get(name)
            if not credentials:
                missing = True
                continue
            for m, text in sorted(credentials.items()):
                rows.append(
                    {"user": name, "mechanism": m, "iterations": ScramCredential.from_text(text).iterations}
                )
    else:
        with admin_session(*cluster, not_found=(ErrorCode.RESOURCE_NOT_FOUND,)) as admin:
            results = admin.describe_users(users)
        for r in results:
            if r.error_code:
                missing = True
                continue
            rows.extend({"user": r.user, "mechanism": m, "iterations": i} for m, i in r.mechanisms)
    render_rows(rows, ["user", "mechanism", "iterations"], fmt)
    if missing:
        raise KctlError(
            "no such user: " + ", ".join(sorted(set(users or []) - {r["user"] for r in rows})),
            ExitCode.NOT_FOUND,
        )
