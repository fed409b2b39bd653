"""The test tree's own helpers (tests/raw_kafka.py, tests/*_support.py, …) are imported as top-level
modules (pytest puts tests/ on the path), never as ``tests.<module>``: that form works only when the
repository's root is on PYTHONPATH too, as in a developer's shell, and fails in CI."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def imports_of_the_tests_package(source: str) -> list[int]:
    """Line numbers of ``from tests... import`` and ``import tests...`` statements."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.split(".")[0] == "tests" for name in names):
            lines.append(node.lineno)
    return lines


def test_no_test_imports_the_tests_package() -> None:
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in imports_of_the_tests_package(path.read_text())
    ]
    advice = "import the test helpers as top-level modules (from raw_kafka import ...):\n"
    assert not found, advice + "\n".join(found)


def test_the_check_finds_both_forms() -> None:
    assert imports_of_the_tests_package("from tests.raw_kafka import x\nimport tests.zk_support\n") == [1, 2]
    assert imports_of_the_tests_package("from raw_kafka import x\nfrom .tests import y\n") == []
