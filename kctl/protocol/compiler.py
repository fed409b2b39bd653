"""Compiles a declared struct, at one version, into a straight-line decoder and encoder.

This module owns the translation from schema to code. For each (struct class, version, flexible)
it generates — once, then caches — two Python functions:

* ``decode(buf, pos, end) -> (obj, pos)``: consecutive fixed-width fields are read with one
  precompiled ``struct.Struct.unpack_from`` after one bounds check; strings, bytes, records and
  arrays go through the checked readers of ``kctl.protocol.primitives``; arrays of structs loop over
  the child's compiled decoder; flexible structs end with a tagged-field section in which known tags
  are decoded and unknown ones skipped. Fields absent from the version get their defaults; the object
  is built with one positional call of the struct's dataclass. For data messages whose writers may
  stop early (``may_end_before``, see ``kctl.protocol.data``), the decoder returns at a field
  boundary where the input ends, with defaults for the rest.
* ``encode(obj, out) -> None``: appends the encoding to the list ``out`` (fixed runs packed with one
  ``struct`` call; records appended as the caller's object, so file regions survive to the framing
  step). ``obj`` may be the dataclass, a dict of its fields (converted), or any object with the
  attributes. Tagged fields are written only when they differ from their defaults, in tag order.

There is no per-message interpretation of the schema: the generated code is the schema.
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable, Mapping
from typing import Any, cast

from kctl.protocol import primitives as P
from kctl.protocol.exceptions import ProtocolEncodeError
from kctl.protocol.types import (
    BYTES,
    RECORDS,
    STRING,
    UUID,
    ArrayType,
    Field,
    PrimitiveType,
    VarType,
    is_struct_type,
    schema_of,
)

Decoder = Callable[[memoryview, int, int], tuple[Any, int]]
Encoder = Callable[[Any, list[Any]], None]


class CompiledStruct:
    """The generated codec of one struct at one version."""

    __slots__ = ("decode", "encode", "flexible", "min_size", "name", "source", "version")

    def __init__(
        self,
        name: str,
        version: int,
        flexible: bool,
        decode: Decoder,
        encode: Encoder,
        min_size: int,
        source: str,
    ) -> None:
        self.name = name
        self.version = version
        self.flexible = flexible
        self.decode = decode
        self.encode = encode
        self.min_size = min_size
        self.source = source

    def __repr__(self) -> str:
        return f"<compiled {self.name} v{self.version}{' flexible' if self.flexible else ''}>"


_CACHE: dict[tuple[type, int, bool, str | None], CompiledStruct] = {}


def compile_struct(
    cls: type, version: int, flexible: bool, *, may_end_before: str | None = None
) -> CompiledStruct:
    """The cached codec of struct class ``cls`` at ``version`` (``flexible``: compact encodings).

    ``may_end_before`` names a top-level field of a non-flexible struct from which on the input may
    end at any field boundary: the decoder reads each of those fields only while bytes remain, and
    the absent ones keep their defaults (data messages whose writers leave trailing fields out).
    Bytes that end inside a field are still an error."""
    key = (cls, version, flexible, may_end_before)
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = _Generator(cls, version, flexible, may_end_before).build()
        _CACHE[key] = compiled
    return compiled


def _coerce(cls: type, obj: Any) -> Any:
    """Turn a dict into the struct's dataclass; other objects are used as they are (duck typing)."""
    if isinstance(obj, Mapping):
        try:
            return cls(**obj)
        except TypeError as e:
            raise ProtocolEncodeError(f"{cls.__name__}: {e}") from None
    if obj is None:
        raise ProtocolEncodeError(f"{cls.__name__}: None given where a struct is required")
    return obj


_BASE_NS: dict[str, Any] = {
    "_trunc": P.truncated,
    "_uuid": P.uuid_from_bytes,
    "_ub": P.uuid_to_bytes,
    "_r_uvarint": P.read_uvarint,
    "_r_tag": P.read_tag_header,
    "_tag_done": P.check_tag_consumed,
    "_skip_tags": P.skip_tagged_fields,
    "_r_count": P.read_count,
    "_r_ccount": P.read_compact_count,
    "_r_fixed_array": P.read_fixed_array,
    "_r_rec": P.read_records,
    "_r_crec": P.read_compact_records,
    "_w_rec": P.write_records,
    "_w_crec": P.write_compact_records,
    "_w_count": P.write_count,
    "_w_ccount": P.write_compact_count,
    "_w_fixed_array": P.write_fixed_array,
    "_w_tags": P.write_tags,
    "_null": P.null_not_allowed,
    "_coerce": _coerce,
    "_EMPTY_TAGS": P.EMPTY_TAGS,
}

# (compact, nullable) -> helper name
_STRING_READERS = {
    (False, False): ("_r_str", P.read_string),
    (False, True): ("_r_nstr", P.read_nullable_string),
    (True, False): ("_r_cstr", P.read_compact_string),
    (True, True): ("_r_cnstr", P.read_compact_nullable_string),
}
_BYTES_READERS = {
    (False, False): ("_r_bytes", P.read_bytes),
    (False, True): ("_r_nbytes", P.read_nullable_bytes),
    (True, False): ("_r_cbytes", P.read_compact_bytes),
    (True, True): ("_r_cnbytes", P.read_compact_nullable_bytes),
}
_STRING_WRITERS = {
    (False, False): ("_w_str", P.write_string),
    (False, True): ("_w_nstr", P.write_nullable_string),
    (True, False): ("_w_cstr", P.write_compact_string),
    (True, True): ("_w_cnstr", P.write_compact_nullable_string),
}
_BYTES_WRITERS = {
    (False, False): ("_w_bytes", P.write_bytes),
    (False, True): ("_w_nbytes", P.write_nullable_bytes),
    (True, False): ("_w_cbytes", P.write_compact_bytes),
    (True, True): ("_w_cnbytes", P.write_compact_nullable_bytes),
}
for _table in (_STRING_READERS, _BYTES_READERS, _STRING_WRITERS, _BYTES_WRITERS):
    for _name, _fn in _table.values():
        _BASE_NS[_name] = _fn

_LITERAL_TYPES = (bool, int, float, str, bytes, type(None))


class _Generator:
    def __init__(self, cls: type, version: int, flexible: bool, may_end_before: str | None = None) -> None:
        self.cls = cls
        self.schema = schema_of(cls)
        self.optional: set[str] = set()
        if may_end_before is not None:
            names = [f.name for f in self.schema.fields]
            if may_end_before not in names:
                raise ValueError(f"{self.schema.name} has no field {may_end_before}")
            if flexible:
                raise ValueError(f"{self.schema.name}: may_end_before needs a non-flexible version")
            self.optional = set(names[names.index(may_end_before) :])
        self.version = version
        self.flexible = flexible
        self.ns: dict[str, Any] = dict(_BASE_NS)
        self.ns["_C"] = cls
        self._consts: dict[int, str] = {}
        self.present = [f for f in self.schema.fields if f.present(version)]
        if flexible:
            self.regular = [f for f in self.present if not f.is_tagged(version)]
            self.tagged = sorted((f for f in self.present if f.is_tagged(version)), key=lambda f: f.tag or 0)
        else:
            # Tagged fields exist only in flexible versions; a field tagged in some versions and
            # regular in a non-flexible one is read as regular there.
            self.regular = list(self.present)
            self.tagged = []

    # ------------------------------------------------------------------------------------ helpers

    def const(self, value: Any, prefix: str = "_K") -> str:
        key = id(value)
        name = self._consts.get(key)
        if name is None:
            name = f"{prefix}{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = value
        return name

    def child(self, cls: object) -> CompiledStruct:
        if not is_struct_type(cls):  # pragma: no cover - schema construction rejects other types
            raise TypeError(f"unknown field type {cls!r}")
        return compile_struct(cls, self.version, self.flexible)

    def literal(self, value: Any) -> str:
        if isinstance(value, _LITERAL_TYPES):
            return repr(value)
        return self.const(value)

    def default_expr(self, f: Field) -> str:
        t = f.type
        if isinstance(t, ArrayType):
            return "None" if f.default is None else "[]"
        if is_struct_type(t):
            return f"{self.const(t)}()"
        return self.literal(f.default)

    def field_min_size(self, t: Any) -> int:
        flex = self.flexible
        if isinstance(t, PrimitiveType):
            return t.size
        if t is STRING:
            return 1 if flex else 2
        if isinstance(t, VarType):  # bytes, records
            return 1 if flex else 4
        if isinstance(t, ArrayType):
            return 1 if flex else 4
        return self.child(t).min_size

    def min_size(self) -> int:
        return sum(self.field_min_size(f.type) for f in self.regular) + (1 if self.flexible else 0)

    # ------------------------------------------------------------------------------------ decode

    def gen_decoder(self) -> list[str]:
        name = self.schema.name
        lines = ["def decode(buf, pos, end):"]
        run: list[Field] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(cast(PrimitiveType, f.type).fmt for f in run)
            size = _struct.calcsize(fmt)
            s = self.const(_struct.Struct(fmt), "_S")
            what = f"{name}." + (run[0].name if len(run) == 1 else f"{run[0].name}..{run[-1].name}")
            names = ", ".join(f"f_{f.name}" for f in run)
            lines.append(f"    if end - pos < {size}:")
            lines.append(f"        raise _trunc({what!r}, {size}, pos, end)")
            lines.append(f"    {names}, = {s}.unpack_from(buf, pos)")
            lines.append(f"    pos += {size}")
            for f in run:
                if f.type is UUID:
                    lines.append(f"    f_{f.name} = _uuid(f_{f.name})")
            run.clear()

        decoded: set[str] = set()
        for f in self.regular:
            if f.name in self.optional:  # the input may end here: the rest keep their defaults
                flush()
                lines.append("    if pos == end:")
                lines.append(f"        return {self.construct(decoded)}, pos")
            decoded.add(f.name)
            if isinstance(f.type, PrimitiveType):
                run.append(f)
                continue
            flush()
            lines.extend(self.dec_field(f, f"f_{f.name}", "end", "    "))
        flush()
        if self.flexible:
            if not self.tagged:
                lines.append("    pos = _skip_tags(buf, pos, end)")
            else:
                for f in self.tagged:
                    lines.append(f"    f_{f.name} = {self.default_expr(f)}")
                lines.append("    ntags, pos = _r_uvarint(buf, pos, end)")
                lines.append("    for _ in range(ntags):")
                lines.append("        tag, tend, pos = _r_tag(buf, pos, end)")
                for i, f in enumerate(self.tagged):
                    lines.append(f"        {'if' if i == 0 else 'elif'} tag == {f.tag}:")
                    lines.extend(self.dec_field(f, f"f_{f.name}", "tend", "            "))
                    lines.append("            _tag_done(tag, pos, tend)")
                lines.append("        pos = tend")
        lines.append(f"    return {self.construct({f.name for f in self.present})}, pos")
        return lines

    def construct(self, decoded: set[str]) -> str:
        """The positional construction of the struct: decoded fields, defaults for the others."""
        args = [f"f_{f.name}" if f.name in decoded else self.default_expr(f) for f in self.schema.fields]
        return f"_C({', '.join(args)})"

    def dec_field(self, f: Field, var: str, endv: str, ind: str) -> list[str]:
        t = f.type
        flex = self.flexible
        nullable = f.is_nullable(self.version)
        lines: list[str] = []
        if isinstance(t, PrimitiveType):
            s = self.const(_struct.Struct(">" + t.fmt), "_S")
            lines.append(f"{ind}if {endv} - pos < {t.size}:")
            lines.append(f"{ind}    raise _trunc({f'{self.schema.name}.{f.name}'!r}, {t.size}, pos, {endv})")
            lines.append(f"{ind}{var}, = {s}.unpack_from(buf, pos)")
            lines.append(f"{ind}pos += {t.size}")
            if t is UUID:
                lines.append(f"{ind}{var} = _uuid({var})")
        elif t is STRING:
            fn = _STRING_READERS[(flex, nullable)][0]
            lines.append(f"{ind}{var}, pos = {fn}(buf, pos, {endv}, {f.name!r})")
        elif t is BYTES:
            fn = _BYTES_READERS[(flex, nullable)][0]
            lines.append(f"{ind}{var}, pos = {fn}(buf, pos, {endv}, {f.name!r})")
        elif t is RECORDS:
            fn = "_r_crec" if flex else "_r_rec"
            lines.append(f"{ind}{var}, pos = {fn}(buf, pos, {endv}, {nullable}, {f.name!r})")
        elif isinstance(t, ArrayType):
            el = t.element
            min_size = max(1, self.field_min_size(el))
            cnt = "_r_ccount" if flex else "_r_count"
            lines.append(f"{ind}n, pos = {cnt}(buf, pos, {endv}, {min_size}, {nullable}, {f.name!r})")
            if nullable:
                lines.append(f"{ind}if n < 0:")
                lines.append(f"{ind}    {var} = None")
                lines.append(f"{ind}else:")
                ind += "    "
            if isinstance(el, PrimitiveType) and el is not UUID:
                lines.append(f"{ind}{var}, pos = _r_fixed_array(buf, pos, n, {el.fmt!r}, {el.size})")
            elif el is UUID:
                lines.append(f"{ind}{var} = []")
                lines.append(f"{ind}for _ in range(n):")
                lines.append(f"{ind}    {var}.append(_uuid(bytes(buf[pos:pos + 16])))")
                lines.append(f"{ind}    pos += 16")
            else:
                if el is STRING:
                    fn = _STRING_READERS[(flex, False)][0]
                    call = f"{fn}(buf, pos, {endv}, {f.name!r})"
                elif el is BYTES:
                    fn = _BYTES_READERS[(flex, False)][0]
                    call = f"{fn}(buf, pos, {endv}, {f.name!r})"
                else:
                    dec = self.const(self.child(el).decode, "_d")
                    call = f"{dec}(buf, pos, {endv})"
                lines.append(f"{ind}{var} = []")
                lines.append(f"{ind}for _ in range(n):")
                lines.append(f"{ind}    x, pos = {call}")
                lines.append(f"{ind}    {var}.append(x)")
        elif is_struct_type(t):
            dec = self.const(self.child(t).decode, "_d")
            lines.append(f"{ind}{var}, pos = {dec}(buf, pos, {endv})")
        else:  # pragma: no cover - schema construction rejects other types
            raise TypeError(f"unknown field type {t!r}")
        return lines

    # ------------------------------------------------------------------------------------ encode

    def gen_encoder(self) -> list[str]:
        lines = ["def encode(o, out):", "    if o.__class__ is not _C:", "        o = _coerce(_C, o)"]
        run: list[Field] = []

        def flush(pad: bool = False) -> None:
            if not run:
                return
            fmt = ">" + "".join(cast(PrimitiveType, f.type).fmt for f in run) + ("x" if pad else "")
            s = self.const(_struct.Struct(fmt), "_S")
            args = ", ".join(f"_ub(o.{f.name})" if f.type is UUID else f"o.{f.name}" for f in run)
            lines.append(f"    out.append({s}.pack({args}))")
            run.clear()

        for f in self.regular:
            if isinstance(f.type, PrimitiveType):
                run.append(f)
                continue
            flush()
            lines.extend(self.enc_field(f, f"o.{f.name}", "out", "    "))
        if self.flexible and not self.tagged:
            if run:
                flush(pad=True)  # the empty tag section is the run's trailing pad byte
            else:
                lines.append("    out.append(_EMPTY_TAGS)")
        else:
            flush()
        if self.flexible and self.tagged:
            lines.append("    tg = []")
            for f in self.tagged:
                lines.append(f"    v = o.{f.name}")
                lines.append(f"    if {self.nondefault(f)}:")
                lines.append("        t = []")
                lines.extend(self.enc_field(f, "v", "t", "        "))
                lines.append(f"        tg.append(({f.tag}, t))")
            lines.append("    if tg:")
            lines.append("        _w_tags(out, tg)")
            lines.append("    else:")
            lines.append("        out.append(_EMPTY_TAGS)")
        return lines

    def nondefault(self, f: Field) -> str:
        """An expression true when the value ``v`` of tagged field ``f`` must be written."""
        t = f.type
        if isinstance(t, ArrayType):
            return "v is not None" if f.default is None else "v"
        if is_struct_type(t):
            fields = [cf for cf in schema_of(t).fields if cf.present(self.version)]
            # None is accepted as "the default" (saves building default instances on hot paths)
            if all(isinstance(cf.type, PrimitiveType) for cf in fields):
                cls_name = self.const(t)
                checks = [f"v.{cf.name} != {self.literal(cf.default)}" for cf in fields]
                return f"v is not None and ({' or '.join([f'v.__class__ is not {cls_name}', *checks])})"
            return f"v is not None and v != {self.const(t())}"
        if f.default is None:
            return "v is not None"
        return f"v != {self.literal(f.default)}"

    def enc_field(self, f: Field, expr: str, outv: str, ind: str) -> list[str]:
        t = f.type
        flex = self.flexible
        nullable = f.is_nullable(self.version)
        lines: list[str] = []
        if isinstance(t, PrimitiveType):
            s = self.const(_struct.Struct(">" + t.fmt), "_S")
            val = f"_ub({expr})" if t is UUID else expr
            lines.append(f"{ind}{outv}.append({s}.pack({val}))")
        elif t is STRING:
            fn = _STRING_WRITERS[(flex, nullable)][0]
            lines.append(f"{ind}{fn}({outv}, {expr}, {f.name!r})")
        elif t is BYTES:
            fn = _BYTES_WRITERS[(flex, nullable)][0]
            lines.append(f"{ind}{fn}({outv}, {expr}, {f.name!r})")
        elif t is RECORDS:
            fn = "_w_crec" if flex else "_w_rec"
            lines.append(f"{ind}{fn}({outv}, {expr}, {nullable}, {f.name!r})")
        elif isinstance(t, ArrayType):
            el = t.element
            cnt = "_w_ccount" if flex else "_w_count"
            lines.append(f"{ind}a = {expr}")
            lines.append(f"{ind}if {cnt}({outv}, a, {nullable}, {f.name!r}):")
            if isinstance(el, PrimitiveType) and el is not UUID:
                lines.append(f"{ind}    _w_fixed_array({outv}, a, {el.fmt!r})")
            elif el is UUID:
                lines.append(f"{ind}    for x in a:")
                lines.append(f"{ind}        {outv}.append(_ub(x))")
            elif el is STRING:
                fn = _STRING_WRITERS[(flex, False)][0]
                lines.append(f"{ind}    for x in a:")
                lines.append(f"{ind}        {fn}({outv}, x, {f.name!r})")
            elif el is BYTES:
                fn = _BYTES_WRITERS[(flex, False)][0]
                lines.append(f"{ind}    for x in a:")
                lines.append(f"{ind}        {fn}({outv}, x, {f.name!r})")
            else:
                enc = self.const(self.child(el).encode, "_e")
                lines.append(f"{ind}    for x in a:")
                lines.append(f"{ind}        {enc}(x, {outv})")
        elif is_struct_type(t):
            enc = self.const(self.child(t).encode, "_e")
            lines.append(f"{ind}{enc}({expr}, {outv})")
        else:  # pragma: no cover
            raise TypeError(f"unknown field type {t!r}")
        return lines

    # ------------------------------------------------------------------------------------ build

    def build(self) -> CompiledStruct:
        dec_src = "\n".join(self.gen_decoder())
        enc_src = "\n".join(self.gen_encoder())
        source = dec_src + "\n\n" + enc_src + "\n"
        label = f"<kctl.protocol {self.schema.name} v{self.version}{' flexible' if self.flexible else ''}>"
        exec(compile(source, label, "exec"), self.ns)
        return CompiledStruct(
            self.schema.name,
            self.version,
            self.flexible,
            self.ns["decode"],
            self.ns["encode"],
            self.min_size(),
            source,
        )
