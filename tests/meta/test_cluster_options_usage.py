"""Configuration reaches the commands one way: a command that talks to one running cluster takes
--config, -X and --bootstrap-server through ``@cluster_options`` (kctl.commands.options). Only
these commands declare ConfigFileOption / ConfigOverrideOption / BootstrapServerOption by hand,
because their shape differs:

- ``kctl broker start|stop``: --config/-X are the broker's own properties (server.properties);
  there is no cluster to bootstrap from;
- ``kctl log dump|verify|recover|purge``: offline tools on log files; --config/-X are topic configs;
- ``kctl mirror``: several clusters (--from/--to), each resolved with the same --config/-X;
- ``kctl config show``: the options come before its own flags in its --help (moving them last
  would change the help), and --bootstrap-server only matters for the client kinds it shows.

The rule reads the source (AST) and imports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[2] / "kctl" / "commands"
BY_HAND = {"ConfigFileOption", "ConfigOverrideOption", "BootstrapServerOption"}
EXPECTED = {
    ("broker.py", "start"),
    ("broker.py", "stop"),
    ("log.py", "dump"),
    ("log.py", "verify_command"),
    ("log.py", "recover_command"),
    ("log.py", "purge_command"),
    ("mirror.py", "mirror"),
    ("config.py", "show"),
}


def _declaring_by_hand() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(COMMANDS.glob("*.py")):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [*node.args.args, *node.args.kwonlyargs]
            if any(isinstance(a.annotation, ast.Name) and a.annotation.id in BY_HAND for a in args):
                found.add((path.name, node.name))
    return found


def test_only_the_commands_of_another_shape_declare_the_cluster_options_by_hand() -> None:
    assert _declaring_by_hand() == EXPECTED
