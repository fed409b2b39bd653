"""The root `kctl` Typer application; command groups are registered from `COMMAND_GROUPS`.

Adding a command group is one line in `COMMAND_GROUPS`: a module that defines a Typer sub-app
named `app`, and the group's name on the command line. A listed module that fails to import is
an error, never silently dropped. After any change to the command tree, regenerate the man pages
and completions: `python scripts/gen_docs.py`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import Annotated

import typer

from kctl import __version__

COMMAND_GROUPS: tuple[tuple[str, str], ...] = (
    ("kctl.commands.broker", "broker"),
    ("kctl.commands.cluster", "cluster"),
    ("kctl.commands.config", "config"),
    ("kctl.commands.consume", "consume"),
    ("kctl.commands.group", "group"),
    ("kctl.commands.log", "log"),
    ("kctl.commands.mirror", "mirror"),
    ("kctl.commands.partition", "partition"),
    ("kctl.commands.perf", "perf"),
    ("kctl.commands.produce", "produce"),
    ("kctl.commands.spark", "spark"),
    ("kctl.commands.topic", "topic"),
    ("kctl.commands.zk", "zk"),
    ("kctl.commands.user", "user"),
    ("kctl.commands.acl", "acl"),
)
"""(module path, group name) of every command group, in the order `kctl --help` lists them."""

app = typer.Typer(
    name="kctl",
    help=(
        "Operate kctl, a Kafka-compatible distributed commit log: brokers, topics, "
        "records, consumer groups and the log files on disk."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # reflows docstring paragraphs; `code` spans are shown as code
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    clusters: Annotated[
        str | None,
        typer.Option(
            "--clusters",
            metavar="FILE",
            help="The clusters file naming clusters for -b/--from/--to (default: $KCTL_CLUSTERS, "
            "else ~/.config/kctl/clusters.toml).",
        ),
    ] = None,
) -> None:
    """Operate kctl, a Kafka-compatible distributed commit log."""
    if clusters:
        from kctl.client.clusters_file import CLUSTERS_ENV  # here: kctl.client is slow to import

        os.environ[CLUSTERS_ENV] = clusters  # read where -b NAME is resolved, in this process


def register_groups(root_app: typer.Typer, groups: Iterable[tuple[str, str]]) -> list[str]:
    """Add each group module's `app` to `root_app`; returns the names registered. A module that
    cannot be imported raises (ImportError or whatever its import raised)."""
    registered = []
    for module_path, name in groups:
        module = importlib.import_module(module_path)
        root_app.add_typer(module.app, name=name)
        registered.append(name)
    return registered


REGISTERED_GROUPS = register_groups(app, COMMAND_GROUPS)
