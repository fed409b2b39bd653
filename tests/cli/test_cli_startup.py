"""kctl's start-up stays short (issue 15): `kctl --version` runs before typer is imported, and
`--help`, a group's help and the offline log tools import neither the client, the broker, the
protocol, ZooKeeper nor pyspark. What a command imports is checked, never how long it takes: each
case runs `kctl.__main__.main` in a fresh interpreter and lists the heavy modules it loaded."""

from __future__ import annotations

import ast
import builtins
import importlib
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
    for module_path, name in app_module.COMMAND_GROUPS:
        hidden = importlib.import_module(module_path).app.info.hidden  # `kctl complete`, for the shells
        assert (f" {name} " in whole.output) != hidden, name


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


# -- names imported only for type checking ---------------------------------------------------------
COMMANDS_DIR = Path(app_module.__file__).parent


def _bound_at_top(tree: ast.Module) -> set[str]:
    """The names a module binds at run time (its `if TYPE_CHECKING:` imports do not count)."""
    names = set(dir(builtins)) | {"__file__", "__name__"}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    names |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def unbound_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of each name a function reads that nothing binds at run time: e.g. a name
    imported only under TYPE_CHECKING but used in a function body (annotations are not evaluated:
    every command module has `from __future__ import annotations`)."""
    tree = ast.parse(source)
    top = _bound_at_top(tree)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        functions += [n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found = []
    for function in functions:
        bound, annotations = set(top), set()
        for sub in ast.walk(function):
            if isinstance(sub, ast.arg):
                bound.add(sub.arg)
                if sub.annotation is not None:
                    annotations |= {id(n) for n in ast.walk(sub.annotation)}
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
                bound.add(sub.id)
            elif isinstance(sub, ast.Import | ast.ImportFrom):
                bound |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
            elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(sub.name)
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub.returns is not None:
                    annotations |= {id(n) for n in ast.walk(sub.returns)}
            elif isinstance(sub, ast.ExceptHandler) and sub.name:
                bound.add(sub.name)
            elif isinstance(sub, ast.AnnAssign):
                annotations |= {id(n) for n in ast.walk(sub.annotation)}
        found += [
            (sub.lineno, sub.id)
            for sub in ast.walk(function)
            if isinstance(sub, ast.Name)
            and isinstance(sub.ctx, ast.Load)
            and sub.id not in bound
            and id(sub) not in annotations
        ]
    return sorted(set(found))


def test_command_modules_bind_every_name_they_use_at_run_time() -> None:
    problems = []
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        problems += [f"{path.name}:{line}: {name}" for line, name in unbound_names(path.read_text())]
    assert problems == []


def test_the_unbound_name_check_finds_a_type_checking_import_used_at_run_time() -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kctl.client import TopicPartition\n"
        "def fine(tp: TopicPartition) -> TopicPartition:\n"
        "    seen: dict[TopicPartition, int] = {}\n"
        "    return tp\n"
        "def broken(topic: str) -> None:\n"
        "    return TopicPartition(topic, 0)\n"
        "def imports_it(topic: str) -> None:\n"
        "    from kctl.client import TopicPartition\n"
        "    return TopicPartition(topic, 0)\n"
    )
    assert unbound_names(source) == [(9, "TopicPartition")]
