#!/usr/bin/env python3
"""Generate the type stubs (``.pyi``) of kctl's message classes from their schemas.

A message module declares its classes with ``kctl.protocol.types.struct(...)``, which builds
dataclasses at run time, so a type checker cannot see their fields. This script imports every module
of ``kctl.protocol.messages`` and writes ``<module>.pyi`` next to it: each struct as a dataclass
stub (every field typed from its schema type — ``X | None`` where the field is nullable in some
version or defaults to null — and given a default, as at run time) and each ``ApiSchema`` constant;
an API's request class also gets ``__kctl_response__`` returning its response class, which is how
``kctl.protocol.typed.ApiRequest`` carries the response type to ``request(...)`` (stubs only).
Only type checkers read the stubs; the run-time classes are untouched.

Usage: python scripts/gen_protocol_stubs.py [--check]
  --check  exit 1 (and name them) if any stub is missing or differs from what would be generated
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kctl.protocol.messages as messages  # noqa: E402
from kctl.protocol.data import DataSchema  # noqa: E402
from kctl.protocol.schema import ApiSchema  # noqa: E402
from kctl.protocol.types import (  # noqa: E402
    RECORDS,
    ArrayType,
    Field,
    PrimitiveType,
    VarType,
    is_struct_type,
    schema_of,
)

MESSAGES_DIR = Path(messages.__file__).parent
#: requests the broker may leave unanswered (Produce with acks=0)
UNANSWERED = frozenset({"ProduceRequest"})
HEADER = "# Generated from {source} by scripts/gen_protocol_stubs.py.\n# Do not edit: run `make gen`.\n"


def _type_name(ftype: object, names: dict[type, str]) -> str:
    if ftype is RECORDS:
        # bytes or a zero-copy memoryview when decoded; bytes, a memoryview or a file region (any
        # object with an int ``size``) when encoded
        return "Any"
    if isinstance(ftype, (PrimitiveType, VarType)):
        pytype = ftype.pytype
        return "uuid.UUID" if pytype.__module__ == "uuid" else pytype.__name__
    if isinstance(ftype, ArrayType):
        return f"list[{_type_name(ftype.element, names)}]"
    if isinstance(ftype, type) and is_struct_type(ftype):
        try:
            return names[ftype]
        except KeyError:
            raise SystemExit(f"struct {ftype.__name__} is not bound to a name of its module") from None
    raise SystemExit(f"unknown field type {ftype!r}")


def _field_line(field: Field, names: dict[type, str]) -> str:
    annotation = _type_name(field.type, names)
    if annotation != "Any" and (field.nullable is not None or field.default is None):
        annotation += " | None"
    return f"    {field.name}: {annotation} = ..."


def render(module_name: str) -> str:
    """The stub text of ``kctl.protocol.messages.<module_name>``."""
    module = importlib.import_module(f"{messages.__name__}.{module_name}")
    structs: list[tuple[str, type]] = []
    schemas: list[str] = []
    data_schemas: list[str] = []
    constants: list[tuple[str, str]] = []
    for name, value in vars(module).items():
        if isinstance(value, type) and is_struct_type(value) and value.__module__ == module.__name__:
            structs.append((name, value))
        elif isinstance(value, ApiSchema):
            schemas.append(name)
        elif isinstance(value, DataSchema):
            data_schemas.append(name)
        elif name.isupper() and type(value) in (str, int):
            constants.append((name, type(value).__name__))
    names = {cls: name for name, cls in structs}
    responses = {}  # request class -> its response's annotation
    for name in schemas:
        schema = getattr(module, name)
        answer = names[schema.response]
        responses[schema.request] = f"{answer} | None" if schema.request.__name__ in UNANSWERED else answer
    body: list[str] = []
    for name, cls in structs:
        body.append("")
        body.append("@dataclass(slots=True)")
        body.append(f"class {name}:")
        body.append("    __kafka_schema__: ClassVar[StructSchema]")
        body.extend(_field_line(f, names) for f in schema_of(cls).fields)
        if cls in responses:
            body.append(f"    def __kctl_response__(self) -> {responses[cls]}: ...")
    if schemas or data_schemas or constants:
        body.append("")
    body.extend(f"{name}: {kind}" for name, kind in constants)
    body.extend(f"{name}: ApiSchema" for name in schemas)
    body.extend(f"{name}: DataSchema" for name in data_schemas)
    text = "\n".join(body)
    imports = ["import uuid\n"] if "uuid.UUID" in text else []
    imports.append("from dataclasses import dataclass\n")
    imports.append("from typing import Any, ClassVar\n" if "Any" in text else "from typing import ClassVar\n")
    imports.append("\n")
    if data_schemas:
        imports.append("from kctl.protocol.data import DataSchema\n")
    if schemas:
        imports.append("from kctl.protocol.schema import ApiSchema\n")
    imports.append("from kctl.protocol.types import StructSchema\n")
    source = f"kctl/protocol/messages/{module_name}.py"
    return HEADER.format(source=source) + "\n" + "".join(imports) + text + "\n"


def stubs(directory: Path = MESSAGES_DIR) -> dict[Path, str]:
    """Every stub's path (in ``directory``) and text."""
    return {
        directory / f"{info.name}.pyi": render(info.name)
        for info in sorted(pkgutil.iter_modules(messages.__path__), key=lambda i: i.name)
    }


def problems(generated: dict[Path, str], directory: Path = MESSAGES_DIR) -> list[str]:
    """What differs between the stubs in ``directory`` and ``generated``: missing, stale, extra."""
    found = []
    for path, text in generated.items():
        if not path.exists():
            found.append(f"missing: {path.name}")
        elif path.read_text() != text:
            found.append(f"stale: {path.name}")
    found.extend(f"extra: {path.name}" for path in sorted(set(directory.glob("*.pyi")) - set(generated)))
    return found


def write(generated: dict[Path, str], directory: Path = MESSAGES_DIR) -> list[str]:
    """Bring ``directory`` in line with ``generated``; the names of the files written or removed."""
    touched = []
    for path in sorted(set(directory.glob("*.pyi")) - set(generated)):
        path.unlink()
        touched.append(path.name)
    for path, text in generated.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            touched.append(path.name)
    return touched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a stub is missing, stale or extra")
    args = parser.parse_args(argv)
    generated = stubs()
    if args.check:
        found = problems(generated)
        for problem in found:
            print(f"gen_protocol_stubs: {problem} (run scripts/gen_protocol_stubs.py)", file=sys.stderr)
        return 1 if found else 0
    for name in write(generated):
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
