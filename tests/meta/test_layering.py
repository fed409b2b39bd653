"""The layering of docs/architecture.md, enforced on the import statements of every module under kctl/.

Each package may import only the kctl packages in its row of ALLOWED (itself and the layers
below it). The top-level modules (kctl/__init__.py, kctl/properties.py) are the bottom layer:
anyone may import them, and they import nothing from kctl but each other. kctl/__main__.py is the
entry point and may import everything. kctl/common is the lowest package: every package may
import it, and it imports nothing from kctl but itself and the top-level modules. kctl/testing
(the test harness) is the top layer: it may import any layer but kctl.commands, and nothing else
under kctl/ imports it; the process management it shares with `kctl cluster` lives in
kctl/localcluster (above kctl.zk, below kctl.commands and kctl.testing). Some packages must also
stay free of I/O frameworks, and the broker and the commands reach ZooKeeper only through kctl.zk
(FORBIDDEN_EXTERNAL). The API handlers (kctl/broker/apis) never import the Broker: each takes a
Protocol of kctl.broker.handler_services (FORBIDDEN_INTERNAL).
Imports under `if TYPE_CHECKING:` count too: they are coupling as well.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

KCTL = Path(__file__).resolve().parents[2] / "kctl"

TOP_LEVEL = frozenset({"__init__", "properties"})
EVERYTHING = frozenset(
    {
        "common",
        "records",
        "log",
        "protocol",
        "zk",
        "client",
        "broker",
        "console",
        "perf",
        "localcluster",
        "mirror",
        "spark",
        "commands",
    }
)
_ALLOWED: dict[str, frozenset[str]] = {
    "common": frozenset(),
    "records": frozenset({"records"}),
    "log": frozenset({"records", "log"}),
    "protocol": frozenset({"records", "protocol"}),
    "zk": frozenset({"zk"}),
    "client": frozenset({"client", "protocol", "records", "zk"}),
    "broker": frozenset({"broker", "log", "protocol", "records", "zk"}),
    "console": frozenset({"console", "client", "protocol", "records", "zk"}),
    "perf": frozenset({"perf", "console", "client", "protocol", "records", "zk"}),
    "localcluster": frozenset({"localcluster", "zk"}),
    "mirror": frozenset({"mirror", "client", "console", "protocol", "records", "zk"}),
    "spark": frozenset({"spark", "client", "console", "protocol", "records"}),
    "commands": EVERYTHING,
    "testing": (EVERYTHING - {"commands"}) | {"testing"},
    "__main__": EVERYTHING,
}
ALLOWED = {layer: allowed | {"common"} for layer, allowed in _ALLOWED.items()}
SHARED_COMMAND_MODULES = frozenset({"options", "output", "errors", "clients"})
REGISTRY_READS = frozenset({"group_help"})
"""What kctl/commands/app.py (the registry, not a command) may import besides the shared modules: the
generated help of the groups, so that `kctl --help` imports no group."""
"""The kctl.commands modules other command modules may import: commands stay thin (parse options,
call a library, render) and never reach into each other."""
FORBIDDEN_EXTERNAL: dict[str, frozenset[str]] = {
    "log": frozenset({"asyncio", "socket", "selectors", "kazoo"}),
    "records": frozenset({"asyncio", "socket", "selectors", "kazoo"}),
    "protocol": frozenset({"asyncio", "socket", "selectors"}),
    # the registry (kctl.zk) is the only way to ZooKeeper
    "broker": frozenset({"kazoo"}),
    "commands": frozenset({"kazoo"}),
}

FORBIDDEN_INTERNAL: dict[str, tuple[str, str]] = {
    "broker/apis": (
        "kctl.broker.broker",
        "a handler takes a Protocol of kctl.broker.handler_services, never the Broker",
    ),
}
"""Modules a folder under kctl/ must not import (nor any name in them), with the reason: (module, why)."""


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name, e.g. "kctl.log.segment" or "asyncio"
    lineno: int


def layer_of(path: Path, kctl_dir: Path) -> str:
    """The layer of a module file: its package under kctl/, or a top-level module's name."""
    parts = path.relative_to(kctl_dir).parts
    return parts[0] if len(parts) > 1 else path.stem


def _module_name(path: Path, kctl_dir: Path) -> list[str]:
    parts = ["kctl", *path.relative_to(kctl_dir).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports_of(path: Path, kctl_dir: Path) -> list[Import]:
    """Every module a file imports, relative imports resolved; `from a import b` yields a.b."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path, kctl_dir)
    package = module if path.name == "__init__.py" else module[:-1]
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.append(Import(prefix, node.lineno))
            found += [
                Import(f"{prefix}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"
            ]
    return found


def target_layer(module: str, kctl_dir: Path) -> str | None:
    """The kctl layer a dotted module name refers to, or None when it is not part of kctl."""
    parts = module.split(".")
    if parts[0] != "kctl":
        return None
    if len(parts) == 1:
        return "__init__"
    name = parts[1]
    if (kctl_dir / name).is_dir() or (kctl_dir / f"{name}.py").is_file():
        return name
    return "__init__"  # an attribute of kctl/__init__.py, e.g. `from kctl import __version__`


def _shared_command_module(module: str) -> bool:
    """Whether an import of `module` from a command module is allowed: `kctl.commands` itself
    (the package, e.g. `from kctl.commands import output`) or a shared helper module (and names in
    it, e.g. `kctl.commands.output.info`)."""
    parts = module.split(".")
    return len(parts) == 2 or parts[2] in SHARED_COMMAND_MODULES


def violations(kctl_dir: Path) -> list[str]:
    """Every broken rule, one line each: `file:line: what is wrong`."""
    problems: list[str] = []
    for path in sorted(kctl_dir.rglob("*.py")):
        layer = layer_of(path, kctl_dir)
        rel = path.relative_to(kctl_dir.parent)
        if layer in TOP_LEVEL:
            allowed = TOP_LEVEL
        elif layer in ALLOWED:
            allowed = ALLOWED[layer] | TOP_LEVEL
        else:
            problems.append(f"{rel}: '{layer}' is not in the layering table of tests/meta/test_layering.py")
            continue
        forbidden = FORBIDDEN_EXTERNAL.get(layer, frozenset())
        folder = path.parent.relative_to(kctl_dir).as_posix()
        banned = [rule for where, rule in FORBIDDEN_INTERNAL.items() if f"{folder}/".startswith(f"{where}/")]
        for imp in imports_of(path, kctl_dir):
            target = target_layer(imp.module, kctl_dir)
            where = f"{rel}:{imp.lineno}"
            for module, why in banned:
                if imp.module == module or imp.module.startswith(f"{module}."):
                    problems.append(f"{where}: must not import {module}: {why} (imports {imp.module})")
            if target is None:
                top = imp.module.split(".")[0]
                if top in forbidden:
                    problems.append(f"{where}: '{layer}' must not import {top} (imports {imp.module})")
            elif target == "commands" and layer not in ("commands", "__main__"):
                problems.append(
                    f"{where}: only kctl/__main__.py and kctl/commands may import kctl.commands "
                    f"(imports {imp.module})"
                )
            elif (
                target == "commands"
                and layer == "commands"
                and not _shared_command_module(imp.module)
                and not (path.name == "app.py" and imp.module.split(".")[2] in REGISTRY_READS)
            ):
                problems.append(
                    f"{where}: a command module may import only kctl.commands."
                    f"{{{','.join(sorted(SHARED_COMMAND_MODULES))}}} of kctl.commands "
                    f"(imports {imp.module})"
                )
            elif target == "testing" and layer != "testing":
                problems.append(
                    f"{where}: kctl.testing is the top layer: nothing under kctl/ but itself may import "
                    f"it (imports {imp.module})"
                )
            elif target not in allowed:
                problems.append(
                    f"{where}: '{layer}' may import only {sorted(allowed)} but imports {imp.module} "
                    f"(layer '{target}')"
                )
    return sorted(set(problems))


def test_every_module_respects_the_layers() -> None:
    problems = violations(KCTL)
    assert not problems, "layering violations (see docs/architecture.md, Layers):\n" + "\n".join(problems)


# -- the checker itself ---------------------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kctl"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_reports_a_lower_layer_importing_a_higher_one(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "log/__init__.py": "",
            "log/segment.py": "from kctl.client import producer\nimport kctl.records.batch\n",
            "client/__init__.py": "",
            "client/producer.py": "",
            "records/__init__.py": "",
            "records/batch.py": "",
        },
    )
    problems = violations(root)
    assert len(problems) == 2, problems  # `from kctl.client import producer` names kctl.client twice
    assert all(p.startswith("kctl/log/segment.py:1: 'log' may import only") for p in problems)
    assert "kctl.client" in problems[0]


def test_checker_resolves_relative_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "broker/__init__.py": "",
            "broker/handlers/__init__.py": "",
            "broker/handlers/fetch.py": "from ... import client\nfrom ..server import x\n",
            "broker/server.py": "",
            "client/__init__.py": "",
        },
    )
    problems = violations(root)
    assert problems == [
        "kctl/broker/handlers/fetch.py:1: 'broker' may import only "
        "['__init__', 'broker', 'common', 'log', 'properties', 'protocol', 'records', 'zk'] "
        "but imports kctl.client (layer 'client')"
    ]


def test_checker_reports_forbidden_frameworks_and_commands_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "protocol/__init__.py": "import socket\n",
            "records/__init__.py": "from asyncio import Queue\n",
            "client/__init__.py": "from kctl.commands.output import render_rows\n",
            "commands/__init__.py": "",
            "commands/output.py": "",
            "properties.py": "import kctl.records\n",
            "common/__init__.py": "from kctl.log import config\n",
            "log/__init__.py": "",
            "util.py": "",
        },
    )
    text = "\n".join(violations(root))
    assert "kctl/protocol/__init__.py:1: 'protocol' must not import socket" in text
    assert "kctl/records/__init__.py:1: 'records' must not import asyncio" in text
    assert "kctl/client/__init__.py:1: only kctl/__main__.py and kctl/commands may import" in text
    assert "kctl/properties.py:1: 'properties' may import only ['__init__', 'properties']" in text
    assert "kctl/util.py: 'util' is not in the layering table" in text
    assert "kctl/common/__init__.py:1: 'common' may import only ['__init__', 'common', 'properties']" in text


def test_checker_reports_a_command_module_importing_another(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "commands/__init__.py": "",
            "commands/output.py": "",
            "commands/clients.py": "from kctl.commands.errors import KctlError\n",
            "commands/errors.py": "",
            "commands/produce.py": (
                "from kctl.commands import output\nfrom kctl.commands.output import info\n"
            ),
            "commands/perf.py": "import typer\nfrom kctl.commands.produce import check_topic\n",
            "commands/topic.py": "from kctl.commands import consume\n",
        },
    )
    problems = violations(root)
    assert problems == [
        "kctl/commands/perf.py:2: a command module may import only "
        "kctl.commands.{clients,errors,options,output} of kctl.commands (imports kctl.commands.produce)",
        "kctl/commands/perf.py:2: a command module may import only "
        "kctl.commands.{clients,errors,options,output} of kctl.commands "
        "(imports kctl.commands.produce.check_topic)",
        "kctl/commands/topic.py:1: a command module may import only "
        "kctl.commands.{clients,errors,options,output} of kctl.commands (imports kctl.commands.consume)",
    ]


def test_the_load_generators_sit_between_the_client_and_the_commands(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "client/__init__.py": "from kctl.perf import stats\n",
            "console/__init__.py": "from kctl.client import Consumer\nfrom kctl.perf import stats\n",
            "perf/__init__.py": "from kctl.console import selection\nfrom kctl.broker import server\n",
            "perf/stats.py": "",
            "broker/__init__.py": "",
            "commands/__init__.py": "",
            "commands/perf.py": "from kctl.perf import stats\nfrom kctl.console import selection\n",
        },
    )
    text = "\n".join(violations(root))
    assert "kctl/client/__init__.py:1: 'client' may import only" in text and "kctl.perf" in text
    assert "kctl/console/__init__.py:2: 'console' may import only" in text
    assert "kctl/perf/__init__.py:2: 'perf' may import only" in text and "kctl.broker" in text
    assert "kctl/perf/__init__.py:1" not in text
    assert "kctl/commands/perf.py" not in text
    assert "kctl/console/__init__.py:1" not in text


def test_checker_reports_imports_of_the_test_harness(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "testing/__init__.py": "from kctl.localcluster.broker import BrokerProcess\nimport kctl.client\n",
            "testing/broker.py": "from kctl.broker import server\nfrom kctl.commands import app\n",
            "commands/__init__.py": "",
            "commands/app.py": "import kctl.testing\n",
            "broker/__init__.py": "",
            "broker/server.py": "from kctl.testing import BrokerProcess\n",
            "client/__init__.py": "",
        },
    )
    problems = violations(root)
    assert problems == [
        "kctl/broker/server.py:1: kctl.testing is the top layer: nothing under kctl/ but itself may import "
        "it (imports kctl.testing)",
        "kctl/broker/server.py:1: kctl.testing is the top layer: nothing under kctl/ but itself may import "
        "it (imports kctl.testing.BrokerProcess)",
        "kctl/commands/app.py:1: kctl.testing is the top layer: nothing under kctl/ but itself may import "
        "it (imports kctl.testing)",
        "kctl/testing/broker.py:2: only kctl/__main__.py and kctl/commands may import kctl.commands "
        "(imports kctl.commands)",
        "kctl/testing/broker.py:2: only kctl/__main__.py and kctl/commands may import kctl.commands "
        "(imports kctl.commands.app)",
    ], problems


def test_checker_reports_a_handler_importing_the_broker(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "broker/__init__.py": "",
            "broker/broker.py": "",
            "broker/handler_services.py": "",
            "broker/apis/__init__.py": "",
            "broker/apis/fetch.py": "from kctl.broker.handler_services import FetchServices\n"
            "from ..broker import Broker\n",
            "broker/apis/heartbeat.py": "from kctl.broker import broker\n",
            "broker/server.py": "from kctl.broker.broker import Broker\n",
        },
    )
    problems = violations(root)
    why = "a handler takes a Protocol of kctl.broker.handler_services, never the Broker"
    assert problems == [
        f"kctl/broker/apis/fetch.py:2: must not import kctl.broker.broker: {why} "
        "(imports kctl.broker.broker)",
        f"kctl/broker/apis/fetch.py:2: must not import kctl.broker.broker: {why} "
        "(imports kctl.broker.broker.Broker)",
        f"kctl/broker/apis/heartbeat.py:1: must not import kctl.broker.broker: {why} "
        "(imports kctl.broker.broker)",
    ], problems
