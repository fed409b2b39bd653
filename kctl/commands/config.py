"""`kctl config`: show how kctl resolves its configuration (defaults, file, environment, -X)."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from kctl.commands.options import (
    DEFAULT_BOOTSTRAP_SERVER,
    DEFAULT_FORMAT,
    BootstrapServerOption,
    ConfigFileOption,
    ConfigOverrideOption,
    FormatOption,
    load_config,
)
from kctl.commands.output import render_rows

app = typer.Typer(help="Inspect how kctl resolves its configuration.", no_args_is_help=True)

SECRET_KEY = re.compile(r"password|secret|token|jaas|credential", re.IGNORECASE)
MASK = "********"


def is_secret(key: str) -> bool:
    """Whether the value of `key` is a credential that is masked unless --show-secrets is given."""
    return SECRET_KEY.search(key) is not None


@app.command("show")
def show(
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
    show_secrets: Annotated[
        bool,
        typer.Option(
            "--show-secrets",
            help="Print the values of secret keys (passwords, tokens, JAAS configs) instead of masking them.",
        ),
    ] = False,
) -> None:
    """Show the effective configuration: each key, its value, and where the value came from.

    Sources, lowest to highest precedence: default (built in), file (--config), env
    (KCTL_BOOTSTRAP_SERVER), -X (overrides, later ones win) and option (--bootstrap-server given
    on the command line).
    """
    config = load_config(config_file, overrides, bootstrap_server=bootstrap_server)
    rows = [
        {
            "key": entry.key,
            "value": entry.value if show_secrets or not is_secret(entry.key) else MASK,
            "source": entry.source,
        }
        for entry in config.entries()
    ]
    render_rows(rows, ["key", "value", "source"], fmt)
