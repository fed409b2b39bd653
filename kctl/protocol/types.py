"""The schema vocabulary: primitive types, fields with version ranges, structs and arrays.

This module owns how a message is *declared*. A message is a ``struct(...)`` of ``Field``s; each field
has a type, the versions it is present in (``"0+"``, ``"3-7"``, ``"5"``), the versions in which it
may be null, and — for tagged fields — its tag and tagged versions. ``struct()`` returns a generated
dataclass (slots, eq, repr) whose attributes are the fields' snake_case names; fields absent from a
version keep their defaults. The dataclass carries its schema in ``__kafka_schema__``; the compiler
(``kctl.protocol.compiler``) turns it into per-version encoders and decoders.

Whether a version is *flexible* (compact strings/arrays/bytes and a tagged-field section at the end of
every struct) is a property of the whole API, declared in ``kctl.protocol.schema.ApiSchema``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import uuid
from typing import Any, TypeGuard

MAX_VERSION = 0x7FFF

ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions, e.g. ``"3+"`` is ``VersionRange(3, MAX_VERSION)``."""

    low: int
    high: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __str__(self) -> str:
        if self.high >= MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


_VERSION_SPEC = re.compile(r"^(\d+)(\+|-(\d+))?$")


def parse_versions(spec: str | None) -> VersionRange | None:
    """Parse ``"3+"``, ``"1-4"``, ``"7"`` into a range; ``None``/``"none"`` means no versions."""
    if spec is None or spec == "none":
        return None
    m = _VERSION_SPEC.match(spec.strip())
    if not m:
        raise ValueError(f"bad version spec {spec!r}")
    low = int(m.group(1))
    if m.group(2) == "+":
        high = MAX_VERSION
    elif m.group(3) is not None:
        high = int(m.group(3))
    else:
        high = low
    if high < low:
        raise ValueError(f"empty version spec {spec!r}")
    return VersionRange(low, high)


class PrimitiveType:
    """A fixed-width type encoded with one ``struct`` format character (or ``16s`` for uuid)."""

    __slots__ = ("default", "fmt", "name", "pytype", "size")

    def __init__(self, name: str, fmt: str, size: int, default: Any, pytype: type) -> None:
        self.name = name
        self.fmt = fmt
        self.size = size
        self.default = default
        self.pytype = pytype

    def __repr__(self) -> str:
        return self.name.upper()


class VarType:
    """A length-prefixed type: string, bytes or records."""

    __slots__ = ("default", "name", "pytype")

    def __init__(self, name: str, default: Any, pytype: Any) -> None:
        self.name = name
        self.default = default
        self.pytype = pytype

    def __repr__(self) -> str:
        return self.name.upper()


INT8 = PrimitiveType("int8", "b", 1, 0, int)
INT16 = PrimitiveType("int16", "h", 2, 0, int)
UINT16 = PrimitiveType("uint16", "H", 2, 0, int)
INT32 = PrimitiveType("int32", "i", 4, 0, int)
UINT32 = PrimitiveType("uint32", "I", 4, 0, int)
INT64 = PrimitiveType("int64", "q", 8, 0, int)
FLOAT64 = PrimitiveType("float64", "d", 8, 0.0, float)
BOOL = PrimitiveType("bool", "?", 1, False, bool)
UUID = PrimitiveType("uuid", "16s", 16, ZERO_UUID, uuid.UUID)

STRING = VarType("string", "", str)
BYTES = VarType("bytes", b"", bytes)
# Record batches (or legacy message sets): opaque bytes. Decoded as a zero-copy memoryview slice;
# encoded from bytes, a memoryview, None, or a file region (any object with an int ``size``).
RECORDS = VarType("records", None, Any)


class ArrayType:
    """An array of a primitive, a string/bytes, or a struct (given as its generated class)."""

    __slots__ = ("element",)

    def __init__(self, element: PrimitiveType | VarType | type) -> None:
        if isinstance(element, VarType) and element is RECORDS:
            raise TypeError("arrays of records are not a Kafka type")
        if isinstance(element, type) and not hasattr(element, "__kafka_schema__"):
            raise TypeError(f"array element {element!r} is not a struct() class")
        self.element = element

    def __repr__(self) -> str:
        el = self.element
        return f"[]{el.__name__ if isinstance(el, type) else el!r}"


def array(element: PrimitiveType | VarType | type) -> ArrayType:
    """``array(INT32)``, ``array(STRING)`` or ``array(SomeStruct)``."""
    return ArrayType(element)


FieldType = PrimitiveType | VarType | ArrayType | type

_NO_DEFAULT: Any = object()


class Field:
    """One field of a struct.

    ``versions``: where the field is present. ``nullable``: versions in which it may be null
    (strings, bytes, records, arrays). ``tag``/``tagged``: a tagged field (only in flexible versions),
    written only when its value differs from the default. ``default``: the value when absent; if not
    given, Kafka's defaults (0, false, "", empty array, zero uuid, null records).
    """

    __slots__ = ("default", "name", "nullable", "tag", "tagged", "type", "versions")

    def __init__(
        self,
        name: str,
        ftype: FieldType,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        tag: int | None = None,
        tagged: str | None = None,
        default: Any = _NO_DEFAULT,
    ) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"field name {name!r} is not snake_case")
        self.name = name
        self.type = ftype
        vr = parse_versions(versions)
        if vr is None:
            raise ValueError(f"field {name} has no versions")
        self.versions = vr
        self.nullable = parse_versions(nullable)
        if self.nullable is not None and isinstance(ftype, PrimitiveType):
            raise ValueError(f"field {name}: {ftype!r} cannot be nullable")
        if self.nullable is not None and is_struct_type(ftype):
            raise ValueError(f"field {name}: nullable struct fields are not supported")
        if tag is None and tagged is not None:
            raise ValueError(f"field {name}: tagged versions without a tag")
        self.tag = tag
        self.tagged = parse_versions(tagged if tagged is not None else versions) if tag is not None else None
        if default is _NO_DEFAULT:
            default = _type_default(ftype)
        self.default = default

    def present(self, version: int) -> bool:
        return version in self.versions

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and version in self.nullable

    def is_tagged(self, version: int) -> bool:
        return self.tagged is not None and version in self.tagged

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {str(self.versions)!r})"


def _type_default(t: FieldType) -> Any:
    if isinstance(t, (PrimitiveType, VarType)):
        return t.default
    if isinstance(t, ArrayType):
        return []
    return None  # struct: a fresh default instance, see StructSchema


def is_struct_type(t: object) -> TypeGuard[type]:
    """Whether ``t`` is a ``struct()`` class."""
    return isinstance(t, type) and hasattr(t, "__kafka_schema__")


class StructSchema:
    """The declared fields of one struct; ``cls`` is the generated dataclass."""

    __slots__ = ("cls", "fields", "name")

    def __init__(self, name: str, fields: tuple[Field, ...], cls: type) -> None:
        self.name = name
        self.fields = fields
        self.cls = cls

    def __repr__(self) -> str:
        return f"<struct {self.name}: {', '.join(f.name for f in self.fields)}>"


def _annotation(t: FieldType) -> Any:
    if isinstance(t, (PrimitiveType, VarType)):
        return t.pytype
    if isinstance(t, ArrayType):
        return list
    return t


def struct(name: str, *fields: Field) -> type:
    """Declare a struct and return its generated dataclass.

    The class accepts every field as a keyword (or positionally, in declaration order); omitted
    fields take their defaults. ``Cls.__kafka_schema__`` is the ``StructSchema``.
    """
    seen: set[str] = set()
    tags: dict[int, str] = {}
    spec: list[tuple[str, Any, Any]] = []
    for f in fields:
        if f.name in seen:
            raise ValueError(f"struct {name}: duplicate field {f.name}")
        seen.add(f.name)
        if f.tag is not None:
            if f.tag in tags:
                raise ValueError(f"struct {name}: tag {f.tag} used by {tags[f.tag]} and {f.name}")
            tags[f.tag] = f.name
        if isinstance(f.type, ArrayType):
            if f.default is None:
                dc_field = dataclasses.field(default=None)
            elif f.default == []:
                dc_field = dataclasses.field(default_factory=list)
            else:
                raise ValueError(f"struct {name}: array field {f.name} default must be [] or None")
        elif is_struct_type(f.type):
            dc_field = dataclasses.field(default_factory=f.type)
        else:
            dc_field = dataclasses.field(default=f.default)
        spec.append((f.name, _annotation(f.type), dc_field))
    cls = dataclasses.make_dataclass(name, spec, slots=True, eq=True, repr=True)
    cls.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    cls.__kafka_schema__ = StructSchema(name, tuple(fields), cls)  # type: ignore[attr-defined]  # set on the generated class here
    return cls


def schema_of(cls: type) -> StructSchema:
    """The ``StructSchema`` of a ``struct()`` class."""
    try:
        return cls.__kafka_schema__  # type: ignore[attr-defined]  # AttributeError is the answer for other classes
    except AttributeError:
        raise TypeError(f"{cls!r} is not a struct() class") from None
