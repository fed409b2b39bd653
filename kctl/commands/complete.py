"""`kctl complete`: names from a reachable cluster for the shell completions (hidden).

The completion scripts in completions/ call ``kctl complete topics`` or ``kctl complete groups``
when TAB completes a topic or group, passing on the -b/--bootstrap-server, -c/--config and -X
options already on the command line. One name per line on stdout; nothing at all (exit 0) when no
broker answers within the short timeout, so TAB never hangs or prints an error into the prompt.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kctl.commands.clients import admin_session
from kctl.commands.errors import KctlError
from kctl.commands.options import ClusterOptions, cluster_options

app = typer.Typer(
    help="Names from a reachable cluster for the shell completions (topics, groups).",
    no_args_is_help=True,
    hidden=True,
)

TIMEOUT_MS = 1500
"""How long TAB may wait for a broker: connection set-up and each request."""

PrefixArgument = Annotated[str, typer.Argument(help="Only names that start with this.")]


def _quick(cluster: ClusterOptions) -> ClusterOptions:
    """`cluster` with short timeouts added after the user's own -X (the last setting wins)."""
    quick = [
        f"request.timeout.ms={TIMEOUT_MS}",
        f"socket.connection.setup.timeout.ms={TIMEOUT_MS}",
        f"default.api.timeout.ms={TIMEOUT_MS}",
    ]
    return ClusterOptions(cluster.config_file, [*(cluster.overrides or []), *quick], cluster.bootstrap_server)


def _print(names: list[str], prefix: str) -> None:
    for name in sorted(n for n in names if n.startswith(prefix)):
        print(name)


@app.command("topics")
@cluster_options
def topics(prefix: PrefixArgument = "", *, cluster: ClusterOptions) -> None:
    """Print the cluster's topic names (internal topics too), one per line."""
    try:
        with admin_session(*_quick(cluster)) as admin:
            names = [t.name for t in admin.list_topics(include_internal=True)]
    except (KctlError, OSError):
        return
    _print(names, prefix)


@app.command("groups")
@cluster_options
def groups(prefix: PrefixArgument = "", *, cluster: ClusterOptions) -> None:
    """Print the cluster's consumer group ids, one per line."""
    from kctl.client.group import GroupAdmin

    try:
        with admin_session(*_quick(cluster)) as admin:
            names = [g.group_id for g in GroupAdmin(admin).list_groups()]
    except (KctlError, OSError):
        return
    _print(names, prefix)
