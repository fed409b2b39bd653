"""Sample messages with every field set, for tests, benchmarks and fuzzing of the codec.

This module owns ``sample(cls, version)``: an instance of a ``struct()`` class in which every field
present at ``version`` holds a distinct, non-default value (so a swapped, dropped or mis-typed field
shows up as a difference), arrays hold two elements, and — with ``nulls=True`` — every field that is
nullable at that version is null instead. Fields absent from the version keep their defaults.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kctl.protocol.types import (
    BOOL,
    BYTES,
    FLOAT64,
    RECORDS,
    STRING,
    UUID,
    ArrayType,
    Field,
    PrimitiveType,
    is_struct_type,
    schema_of,
)

_RANGES: dict[str, tuple[int, int]] = {
    "int8": (1, 120),
    "int16": (1_000, 30_000),
    "uint16": (40_000, 65_000),
    "int32": (100_000, 2_000_000_000),
    "uint32": (3_000_000_000, 4_000_000_000),
    "int64": (10**12, 2**62),
}


def _primitive(t: PrimitiveType, default: Any, n: int) -> Any:
    if t is BOOL:
        return not default
    if t is UUID:
        return uuid.UUID(int=(n * 0x9E3779B97F4A7C15) & ((1 << 128) - 1) | 1)
    if t is FLOAT64:
        return n + 0.5
    low, high = _RANGES[t.name]
    value = low + n % (high - low)
    return value + 1 if value == default else value


def _value(f: Field, t: Any, version: int, counter: itertools.count, nulls: bool, array_len: int) -> Any:
    n = next(counter)
    if isinstance(t, PrimitiveType):
        return _primitive(t, f.default, n)
    if t is STRING:
        return f"{f.name}-{n}-é✓"
    if t is BYTES:
        return bytes([n % 256, 0, 255]) + f"{f.name}-{n}".encode()
    if t is RECORDS:
        return bytes(range(n % 50, n % 50 + 40)) * 3
    if isinstance(t, ArrayType):
        el = t.element
        return [_value(f, el, version, counter, nulls, array_len) for _ in range(array_len)]
    if is_struct_type(t):
        return sample(t, version, counter=counter, nulls=nulls, array_len=array_len)
    raise TypeError(f"unknown type {t!r}")


def sample(
    cls: type,
    version: int,
    *,
    nulls: bool = False,
    array_len: int = 2,
    counter: itertools.count | None = None,
) -> Any:
    """An instance of ``cls`` with every field present at ``version`` set (see module docstring)."""
    if counter is None:
        counter = itertools.count(1)
    kwargs: dict[str, Any] = {}
    for f in schema_of(cls).fields:
        if not f.present(version):
            continue
        if nulls and f.is_nullable(version):
            kwargs[f.name] = None
            continue
        kwargs[f.name] = _value(f, f.type, version, counter, nulls, array_len)
    return cls(**kwargs)


__all__ = ["sample"]
