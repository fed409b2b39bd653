"""Our hand-written schemas against the Kafka message specs that kafka-python ships (Apache Kafka
4.x's JSON files, read directly): same fields, types, version ranges, nullability, tags and defaults,
over the versions both cover (4.0 removed some old versions; those are cross-checked on the wire
against kafka-python's older classes in test_protocol_kafka_python)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import kafka.protocol.schemas as kp_schemas
import pytest

from kctl.protocol.registry import SCHEMAS
from kctl.protocol.types import (
    ArrayType,
    Field,
    PrimitiveType,
    VersionRange,
    is_struct_type,
    parse_versions,
    schema_of,
)

RESOURCES = Path(kp_schemas.__file__).parent / "resources"


def _load_spec(name: str) -> dict[str, Any]:
    """One of Kafka's JSON message specs as shipped by kafka-python (``//`` comment lines dropped)."""
    text = (RESOURCES / f"{name}.json").read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))


def _specs() -> dict[int, dict[str, dict[str, Any]]]:
    return {
        key: {"request": _load_spec(f"{s.name}Request"), "response": _load_spec(f"{s.name}Response")}
        for key, s in SCHEMAS.items()
    }


SPECS = _specs()


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _clip(r: VersionRange | None, low: int, high: int) -> tuple[int, int] | None:
    if r is None:
        return None
    lo, hi = max(r.low, low), min(r.high, high)
    return (lo, hi) if lo <= hi else None


def _type_name(t: Any) -> str:
    if isinstance(t, ArrayType):
        return "[]" + _type_name(t.element)
    if is_struct_type(t):
        return "struct"
    name = t.name
    return "bool" if name == "bool" else name


def _their_type(spec: dict[str, Any], common: dict[str, Any]) -> str:
    t = spec["type"]
    arr = t.startswith("[]")
    base = t[2:] if arr else t
    if base not in {
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }:
        base = "struct"
    return ("[]" if arr else "") + base


def _their_default(spec: dict[str, Any], ours: Field) -> Any:
    if "default" not in spec:
        return None  # not stated: nothing to compare
    raw = spec["default"]
    t = ours.type
    if raw == "null":
        return None
    if isinstance(t, PrimitiveType):
        if t.name == "bool":
            return str(raw).lower() == "true"
        if t.name == "uuid":
            return uuid.UUID(int=0)
        return int(str(raw), 0)
    return raw


CASES = []
for _key, _schema in sorted(SCHEMAS.items()):
    for _kind in ("request", "response"):
        CASES.append(pytest.param(_key, _kind, id=f"{_schema.name}{_kind.capitalize()}"))


def _compare(
    cls: type,
    spec_fields: list[dict[str, Any]],
    common: dict[str, Any],
    low: int,
    high: int,
    path: str,
    problems: list[str],
) -> None:
    ours = {f.name: f for f in schema_of(cls).fields}
    theirs = {}
    for spec in spec_fields:
        vr = _clip(parse_versions(spec["versions"]), low, high)
        if vr is not None:
            theirs[snake(spec["name"])] = (spec, vr)
    for name, f in ours.items():
        if _clip(f.versions, low, high) is not None and name not in theirs:
            problems.append(f"{path}.{name}: not in the spec")
    for name, (spec, vr) in theirs.items():
        where = f"{path}.{name}"
        f = ours.get(name)
        if f is None:
            problems.append(f"{where}: missing (spec versions {spec['versions']})")
            continue
        if _clip(f.versions, low, high) != vr:
            problems.append(f"{where}: versions {f.versions} vs spec {spec['versions']}")
        if _type_name(f.type) != _their_type(spec, common):
            problems.append(f"{where}: type {_type_name(f.type)} vs spec {spec['type']}")
        if _clip(f.nullable, *vr) != _clip(parse_versions(spec.get("nullableVersions")), *vr):
            problems.append(f"{where}: nullable {f.nullable} vs spec {spec.get('nullableVersions')}")
        if f.tag != spec.get("tag"):
            problems.append(f"{where}: tag {f.tag} vs spec {spec.get('tag')}")
        if "taggedVersions" in spec and _clip(f.tagged, *vr) != _clip(
            parse_versions(spec["taggedVersions"]), *vr
        ):
            problems.append(f"{where}: tagged {f.tagged} vs spec {spec['taggedVersions']}")
        expected_default = _their_default(spec, f)
        scalar = not isinstance(f.type, ArrayType) and not is_struct_type(f.type)
        if "default" in spec and scalar and f.default != expected_default:
            problems.append(f"{where}: default {f.default!r} vs spec {spec['default']!r}")
        t = f.type
        el = t.element if isinstance(t, ArrayType) else t
        if is_struct_type(el):
            sub = spec.get("fields") or common[spec["type"].lstrip("[]")]["fields"]
            _compare(el, sub, common, vr[0], vr[1], where, problems)


@pytest.mark.parametrize(("api_key", "kind"), CASES)
def test_schema_matches_kafka_spec(api_key: int, kind: str) -> None:
    schema = SCHEMAS[api_key]
    spec = SPECS[api_key][kind]
    valid = parse_versions(spec["validVersions"])
    assert valid is not None
    low, high = max(valid.low, schema.min_version), min(valid.high, schema.max_version)
    assert low <= high
    flexible = parse_versions(spec["flexibleVersions"])
    for v in range(low, high + 1):
        assert schema.is_flexible(v) == (flexible is not None and v in flexible)
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    cls = schema.request if kind == "request" else schema.response
    problems: list[str] = []
    _compare(cls, spec["fields"], common, low, high, cls.__name__, problems)
    assert problems == []


# -- data schemas (not APIs): the consumer embedded protocol and the sticky assignor's user data ------
def _data_spec(name: str) -> dict[str, Any]:
    """A ``"type": "data"`` spec shipped by kafka-python: with the protocol specs, or (the sticky
    assignor's) next to its assignor."""
    path = RESOURCES / f"{name}.json"
    if not path.exists():
        import kafka.coordinator.assignors.sticky as sticky

        path = Path(sticky.__file__).parent / f"{name}.json"
    text = path.read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))


def _data_schemas() -> list[Any]:
    from kctl.protocol.messages import consumer_protocol

    cp = consumer_protocol
    return [cp.SUBSCRIPTION, cp.ASSIGNMENT, cp.STICKY_ASSIGNOR_USER_DATA]


@pytest.mark.parametrize("schema", _data_schemas(), ids=lambda s: s.name)
def test_data_schema_matches_kafka_spec(schema: Any) -> None:
    spec = _data_spec(schema.name)
    assert spec["type"] == "data"
    valid = parse_versions(spec["validVersions"])
    assert valid is not None
    assert (schema.min_version, schema.max_version) == (valid.low, valid.high)
    assert schema.flexible_versions == parse_versions(spec["flexibleVersions"])
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    problems: list[str] = []
    _compare(schema.cls, spec["fields"], common, valid.low, valid.high, schema.name, problems)
    assert problems == []
