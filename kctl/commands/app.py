"""The root `kctl` Typer application; command groups are registered from `COMMAND_GROUPS`.

Adding a command group is one line in `COMMAND_GROUPS`: a module that defines a Typer sub-app
named `app`, and the group's name on the command line (`SUBGROUPS` for a group under another). A
listed module that fails to import is an error, never silently dropped. After any change to the
command tree, regenerate the man pages and completions: `python scripts/gen_docs.py`.

`app` (every group) is built when first used. The `kctl` process builds only what its command line
needs (`app_for`): `kctl log verify ...` imports and builds the `log` group alone, so a command
starts without the modules (and the typer tree) of the fourteen others.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

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
    ("kctl.commands.top", "top"),
    ("kctl.commands.produce", "produce"),
    ("kctl.commands.spark", "spark"),
    ("kctl.commands.topic", "topic"),
    ("kctl.commands.zk", "zk"),
    ("kctl.commands.user", "user"),
    ("kctl.commands.acl", "acl"),
    ("kctl.commands.quota", "quota"),
    ("kctl.commands.transactions", "transactions"),
    ("kctl.commands.man", "man"),
    ("kctl.commands.complete", "complete"),
)
"""(module path, group name) of every command group, in the order `kctl --help` lists them."""

SUBGROUPS: tuple[tuple[str, str, str], ...] = (("kctl.commands.broker_logger", "broker", "logger"),)
"""(module path, parent group, name) of the groups of commands kept in a module of their own under
a group of `COMMAND_GROUPS` (command modules do not import each other): registered with their
parent, after its own commands."""

ROOT_OPTIONS_WITH_VALUE = frozenset({"--clusters"})
"""The root's options that take a value (`app_for` skips them to find the group named)."""


def new_root() -> typer.Typer:
    """The root application (`kctl`, its help and options) without any group."""
    root_app = typer.Typer(
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
    root_app.callback()(root)
    return root_app


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kctl {__version__}")
        raise typer.Exit()


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
        for sub_path, parent, sub_name in SUBGROUPS:
            present = {info.name for info in module.app.registered_groups}
            if parent == name and sub_name not in present:
                module.app.add_typer(importlib.import_module(sub_path).app, name=sub_name)
        root_app.add_typer(module.app, name=name)
        registered.append(name)
    return registered


def group_named(args: Sequence[str]) -> tuple[str, str] | None:
    """The (module path, name) of the group that `kctl ARGS` runs, or None (`kctl --help`, an
    unknown command: those need every group)."""
    expect_value = False
    for arg in args:
        if expect_value:
            expect_value = False
        elif arg in ROOT_OPTIONS_WITH_VALUE:
            expect_value = True
        elif not arg.startswith("-"):
            return next((group for group in COMMAND_GROUPS if group[1] == arg), None)
    return None


def app_for(args: Sequence[str]) -> typer.Typer:
    """The application `kctl ARGS` needs: the root with the one group it names; for `kctl --help`
    (or no arguments) the root with every group's help but none of their commands (`help_app`);
    else `app` (every group). Each runs and describes what it has the same way."""
    if list(args) in ([], ["--help"], ["-h"]):
        return help_app()
    group = group_named(args)
    if group is None:
        return _full_app()[0]
    single = new_root()
    register_groups(single, [group])
    return single


def help_app() -> typer.Typer:
    """The root with every group as `kctl --help` lists it (name, help) but without the group's
    commands, which that help does not show, and without importing the group modules: the help
    texts come from kctl/commands/group_help.py, which scripts/gen_docs.py generates
    (tests/cli/test_cli_startup.py compares the two helps)."""
    from kctl.commands.group_help import GROUP_HELP

    listing = new_root()
    for _, name in COMMAND_GROUPS:
        help_text, hidden = GROUP_HELP[name]
        listing.add_typer(typer.Typer(help=help_text, hidden=hidden), name=name)
    return listing


_full: tuple[typer.Typer, list[str]] | None = None


def _full_app() -> tuple[typer.Typer, list[str]]:
    global _full
    if _full is None:
        full = new_root()
        _full = full, register_groups(full, COMMAND_GROUPS)
    return _full


def __getattr__(name: str) -> Any:
    """`app` (the root with every group) and `REGISTERED_GROUPS` (their names), built on first use."""
    if name == "app":
        return _full_app()[0]
    if name == "REGISTERED_GROUPS":
        return _full_app()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
