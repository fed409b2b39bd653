"""kctl's start-up stays short (issue 15): `kctl --version` runs before typer is imported, and
`--help`, a group's help and the offline log tools import neither the client, the broker, the
protocol, ZooKeeper nor pyspark. What a command imports is checked, never how long it takes: each
case runs `kctl.__main__.main` in a fresh interpreter and lists the heavy modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from kctl.commands import app as app_module

HEAVY = (
    "kazoo",
    "kctl.broker",
    "kctl.client",
    "kctl.client.producer",
    "kctl.protocol",
    "kctl.zk",
    "kctl.mirror",
    "kctl.spark",
    "kctl.perf",
    "pyspark",
    "confluent_kafka",
    "asyncio",
)

_PROBE = """
import contextlib, io, json, sys
from kctl.__main__ import main
codes = []
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for args in json.loads(sys.argv[1]):
        codes.append(main(args))
print(json.dumps({"codes": codes, "modules": sorted(sys.modules)}))
"""


def run_in_process(*commands: list[str]) -> tuple[list[int], set[str]]:
    """The exit codes of `kctl COMMAND` for each command, run one after another by `main` in one
    fresh interpreter, and every module that interpreter then has."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(commands))],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    return report["codes"], set(report["modules"])


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_version_is_answered_before_typer_is_imported() -> None:
    codes, modules = run_in_process(["--version"])
    assert codes == [0]
    assert "typer" not in modules
    assert not heavy_in(modules)
    version = subprocess.run(
        [sys.executable, "-m", "kctl", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout == f"kctl {app_module.__version__}\n"


def test_help_of_kctl_and_of_every_group_imports_nothing_heavy() -> None:
    groups = [[name, "--help"] for _, name in app_module.COMMAND_GROUPS]
    codes, modules = run_in_process(["--help"], [], *groups, ["log", "verify", "--help"])
    assert codes == [0, 2] + [0] * len(groups) + [0]
    assert heavy_in(modules) == []


def test_the_offline_log_tools_import_nothing_heavy(tmp_path: Path) -> None:
    partition = tmp_path / "orders-0"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(b"")
    codes, modules = run_in_process(
        ["log", "verify", str(partition)],
        ["log", "dump", str(partition)],
        ["log", "recover", "--dry-run", str(partition)],
        ["log", "purge", "--dry-run", "--before-offset", "0", str(partition)],
        ["log", "verify", str(tmp_path / "missing")],
    )
    assert codes == [0, 0, 0, 0, 3]
    assert "kctl.log" in modules  # they did run
    assert heavy_in(modules) == []


def test_a_command_still_gets_what_it_imports_inside() -> None:
    """The imports moved into the commands are there when the command runs: a consume against an
    address nobody listens on reaches the client (and fails to connect: exit 3)."""
    codes, modules = run_in_process(["consume", "t", "-b", "127.0.0.1:1", "-X", "request.timeout.ms=200"])
    assert codes == [3]
    assert "kctl.client.consumer" in modules


@pytest.mark.parametrize(
    ("args", "group"),
    [
        (["log", "verify", "x"], "log"),
        (["--clusters", "log", "topic", "list"], "topic"),  # --clusters takes a value
        (["--clusters=f.toml", "group", "--help"], "group"),
        (["--help"], None),
        (["--version"], None),
        (["nosuchgroup", "log"], None),
        ([], None),
    ],
)
def test_the_group_a_command_line_names(args: list[str], group: str | None) -> None:
    found = app_module.group_named(args)
    assert (found[1] if found else None) == group


def test_kctl_help_lists_the_groups_as_the_whole_tree_does() -> None:
    """`kctl --help` is rendered from `help_app` (every group's help, none of their commands):
    it must be the help of the whole tree, character for character."""
    runner = CliRunner()
    outline = runner.invoke(app_module.help_app(), ["--help"], prog_name="kctl")
    whole = runner.invoke(app_module.app, ["--help"], prog_name="kctl")
    assert outline.exit_code == whole.exit_code == 0
    assert outline.output == whole.output
    for _, name in app_module.COMMAND_GROUPS:
        assert f" {name} " in whole.output


def test_a_single_group_tree_describes_its_group_as_the_whole_tree_does() -> None:
    """`kctl GROUP ...` runs on a tree holding only GROUP: its help, and each command's, must be the
    whole tree's."""
    runner = CliRunner()
    whole = typer.main.get_command(app_module.app)
    compared = 0
    for _, name in app_module.COMMAND_GROUPS:
        single = app_module.app_for([name])
        assert list(typer.main.get_command(single).commands) == [name]  # type: ignore[attr-defined]
        subcommands = list(getattr(whole.commands[name], "commands", {}))  # type: ignore[attr-defined]
        for args in ([name, "--help"], *([name, sub, "--help"] for sub in subcommands)):
            mine = runner.invoke(single, args, prog_name="kctl")
            theirs = runner.invoke(app_module.app, args, prog_name="kctl")
            assert (mine.exit_code, mine.output) == (theirs.exit_code, theirs.output), args
            compared += 1
    assert compared > 2 * len(app_module.COMMAND_GROUPS)


def test_help_constants_repeated_in_command_modules_match_the_library() -> None:
    """group.py and spark.py repeat two tuples for their help texts so as not to import the client
    (and Spark's side of kctl) to show them."""
    from kctl.client.group import STATES
    from kctl.commands import group, spark
    from kctl.spark.load import FILE_FORMATS

    assert group.STATES == STATES
    assert spark.FILE_FORMATS == FILE_FORMATS
