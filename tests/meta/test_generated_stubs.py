"""scripts/gen_protocol_stubs.py: the message classes' type stubs are generated, current, match the
schemas, and let a type checker see the classes' fields."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.protocol.types import is_struct_type, schema_of

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_stubs", REPO / "scripts" / "gen_protocol_stubs.py")
assert _spec is not None and _spec.loader is not None
gen_stubs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_stubs)

MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")


def test_stubs_are_current() -> None:
    found = gen_stubs.problems(gen_stubs.stubs())
    assert not found, "\n".join(found) + "\nrun: python scripts/gen_protocol_stubs.py"


def test_check_command_line_passes_on_the_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_protocol_stubs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert (proc.returncode, proc.stderr) == (0, "")


def test_check_reports_missing_stale_and_extra_stubs(tmp_path: Path) -> None:
    generated = gen_stubs.stubs(tmp_path)
    assert gen_stubs.write(generated, tmp_path) == sorted(p.name for p in generated)
    assert gen_stubs.problems(generated, tmp_path) == []
    (tmp_path / "heartbeat.pyi").write_text("edited by hand\n")
    (tmp_path / "fetch.pyi").unlink()
    (tmp_path / "removed_api.pyi").write_text("left over\n")
    assert sorted(gen_stubs.problems(generated, tmp_path)) == [
        "extra: removed_api.pyi",
        "missing: fetch.pyi",
        "stale: heartbeat.pyi",
    ]
    assert sorted(gen_stubs.write(generated, tmp_path)) == ["fetch.pyi", "heartbeat.pyi", "removed_api.pyi"]
    assert gen_stubs.problems(generated, tmp_path) == []


def test_every_struct_class_is_in_its_stub_with_its_fields_in_order() -> None:
    for path, text in gen_stubs.stubs().items():
        module = importlib.import_module(f"kctl.protocol.messages.{path.stem}")
        stub_classes = {
            node.name: [
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id != "__kafka_schema__"
            ]
            for node in ast.parse(text).body
            if isinstance(node, ast.ClassDef)
        }
        structs = {
            name: value
            for name, value in vars(module).items()
            if is_struct_type(value) and value.__module__ == module.__name__
        }
        assert set(stub_classes) == set(structs), path.name
        for name, cls in structs.items():
            assert stub_classes[name] == [f.name for f in schema_of(cls).fields], (path.name, name)


def test_stub_types_follow_the_schema() -> None:
    fetch = gen_stubs.render("fetch")
    assert "    topic_id: uuid.UUID = ...\n" in fetch
    assert "    records: Any = ...\n" in fetch  # bytes, memoryview or a file region
    assert "    aborted_transactions: list[AbortedTransaction] | None = ...\n" in fetch
    assert "    cluster_id: str | None = ...\n" in fetch  # nullable
    heartbeat = gen_stubs.render("heartbeat")
    assert "    group_instance_id: str | None = ...\n" in heartbeat
    assert "    generation_id: int = ...\n" in heartbeat
    assert "SCHEMA: ApiSchema\n" in heartbeat


@pytest.mark.skipif(MYPY is None, reason="mypy is not installed")
def test_a_type_checker_sees_the_message_fields(tmp_path: Path) -> None:
    program = tmp_path / "uses_messages.py"
    program.write_text(
        "from kctl.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse\n"
        "request = HeartbeatRequest(group_id='g', generation_id=1, member_id='m')\n"
        "generation: int = request.generation_id\n"
        "wrong: str = request.generation_id\n"
        "HeartbeatResponse(error_code='not an int')\n"
        "request.no_such_field\n"
    )
    assert MYPY is not None
    proc = subprocess.run(
        [MYPY, "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent", str(program)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["4", "5", "6"], proc.stdout
