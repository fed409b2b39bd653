"""Versioned data messages: Kafka's ``"type": "data"`` schemas, which are not API requests or
responses — the consumer embedded protocol carried inside JoinGroup/SyncGroup, the keys and values of
``__consumer_offsets`` records, assignor user data.

This module owns their framing and version rules. A data message has no request header: Kafka
prefixes it with its version as an int16, then the struct at that version. ``DataSchema`` declares
one (name, valid versions, flexible versions, top-level ``struct()`` class) and compiles, once per
version, the same generated codecs as the APIs' (``kctl.protocol.compiler``). It is deliberately *not*
an ``ApiSchema``: it has no api key and the registry of APIs never sees it; the declarations live in
``kctl.protocol.messages`` modules that define ``DataSchema`` objects and no ``SCHEMA``.

Two compatibility rules that Kafka's specs leave to the reader can be declared per schema:

* ``read_newer``: a version above the highest known one is read as the highest known one and the
  bytes after it are ignored (versions only ever append fields — Kafka's ConsumerProtocol);
* ``may_end_before``: the input may end at a field boundary from that field on, the absent fields
  keeping their defaults (writers that leave ignorable trailing fields out).

Bytes that end inside a field are always an error (``ProtocolDecodeError``).

    version, subscription = decode_versioned(ConsumerProtocolSubscription, data)
    data = encode_versioned(subscription, 3)
"""

from __future__ import annotations

import struct
from typing import Any

from kctl.protocol.compiler import Decoder, Encoder, compile_struct
from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError
from kctl.protocol.types import VersionRange, parse_versions, schema_of

_VERSION = struct.Struct(">h")

Buffer = bytes | bytearray | memoryview


class DataSchema:
    """One versioned data message: valid versions, flexible versions and per-version codecs."""

    __slots__ = (
        "_decoders",
        "_encoders",
        "cls",
        "flexible_versions",
        "max_version",
        "may_end_before",
        "min_version",
        "name",
        "read_newer",
    )

    def __init__(
        self,
        name: str,
        versions: str,
        flexible: str,
        cls: type,
        *,
        read_newer: bool = False,
        may_end_before: str | None = None,
    ) -> None:
        vr = parse_versions(versions)
        if vr is None:
            raise ValueError(f"{name}: no valid versions")
        self.name = name
        self.min_version = vr.low
        self.max_version = vr.high
        self.flexible_versions: VersionRange | None = parse_versions(flexible)
        self.cls = cls
        self.read_newer = read_newer
        self.may_end_before = may_end_before
        fields = schema_of(cls).fields
        if may_end_before is not None and may_end_before not in {f.name for f in fields}:
            raise ValueError(f"{name}: may_end_before names no field of {cls.__name__}")
        if may_end_before is not None and self.flexible_versions is not None:
            raise ValueError(f"{name}: may_end_before is for non-flexible messages")
        for f in fields:
            if f.tagged is not None and self.flexible_versions is None:
                raise ValueError(f"{name}: field {f.name} is tagged but no version is flexible")
        self._decoders: list[Decoder | None] = [None] * (vr.high + 1)
        self._encoders: list[Encoder | None] = [None] * (vr.high + 1)
        cls.__kafka_data_schema__ = self  # type: ignore[attr-defined]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_versions is not None and version in self.flexible_versions

    def _compile(self, version: int) -> None:
        flexible = self.is_flexible(version)
        compiled = compile_struct(
            self.cls, version, flexible, may_end_before=None if flexible else self.may_end_before
        )
        self._decoders[version] = compiled.decode
        self._encoders[version] = compiled.encode

    def _unsupported(self, version: int) -> str:
        return f"{self.name}: unsupported version {version} (valid {self.min_version}-{self.max_version})"

    # ------------------------------------------------------------------------------------ decode

    def decode(self, data: Buffer, *, allow_trailing: bool = False) -> tuple[int, Any]:
        """``(version, obj)`` from the version-prefixed bytes ``data``.

        ``obj`` is the struct as read at ``version`` (or at the highest known version, when
        ``read_newer`` and the writer's is above it). Trailing bytes are an error unless
        ``allow_trailing`` or the version is newer than ours."""
        if len(data) < 2:
            raise ProtocolDecodeError(f"{self.name}: {len(data)} bytes, too short for a version")
        version = _VERSION.unpack_from(data, 0)[0]
        return version, self.decode_body(data, version, 2, allow_trailing=allow_trailing)

    def decode_body(self, data: Buffer, version: int, pos: int = 0, *, allow_trailing: bool = False) -> Any:
        """The struct at ``version`` from ``data[pos:]`` (no version prefix there)."""
        if version > self.max_version and self.read_newer:
            version, allow_trailing = self.max_version, True
        elif not self.min_version <= version <= self.max_version:
            raise ProtocolDecodeError(self._unsupported(version))
        decode = self._decoders[version]
        if decode is None:
            self._compile(version)
            decode = self._decoders[version]
            assert decode is not None
        if type(data) is memoryview and (data.format != "B" or data.ndim != 1):
            data = data.cast("B")
        end = len(data)
        try:
            obj, pos = decode(data, pos, end)  # type: ignore[arg-type]
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"{self.name} v{version}: {e}") from None
        except (struct.error, IndexError, ValueError) as e:  # defensive: should not happen
            raise ProtocolDecodeError(f"{self.name} v{version}: malformed input: {e}") from None
        if pos != end and not allow_trailing:
            raise ProtocolDecodeError(f"{self.name} v{version}: {end - pos} trailing bytes")
        return obj

    # ------------------------------------------------------------------------------------ encode

    def encode(self, obj: Any, version: int) -> bytes:
        """The version prefix and ``obj`` (the struct, a dict of its fields, or any object with
        them) at ``version``; fields the version does not have are left out."""
        out: list[Any] = [b""]
        self._encode_into(obj, version, out)
        out[0] = _VERSION.pack(version)
        return b"".join(out)

    def encode_body(self, obj: Any, version: int) -> bytes:
        """``obj`` at ``version`` without the version prefix."""
        out: list[Any] = []
        self._encode_into(obj, version, out)
        return b"".join(out)

    def _encode_into(self, obj: Any, version: int, out: list[Any]) -> None:
        if not self.min_version <= version <= self.max_version:
            raise ProtocolEncodeError(self._unsupported(version))
        encode = self._encoders[version]
        if encode is None:
            self._compile(version)
            encode = self._encoders[version]
            assert encode is not None
        try:
            encode(obj, out)
        except ProtocolEncodeError as e:
            raise ProtocolEncodeError(f"{self.name} v{version}: {e}") from None
        except (struct.error, AttributeError, TypeError, OverflowError, UnicodeEncodeError) as e:
            what = type(obj).__name__
            raise ProtocolEncodeError(f"{self.name} v{version}: cannot encode {what}: {e}") from None

    def compile_all(self) -> None:
        """Compile every version's codec now (warm-up, tests)."""
        for v in range(self.min_version, self.max_version + 1):
            self._compile(v)

    def __repr__(self) -> str:
        flex = self.flexible_versions
        return (
            f"<DataSchema {self.name} v{self.min_version}-{self.max_version} "
            f"flexible={flex if flex is not None else 'none'}>"
        )


def data_schema_of(cls: type) -> DataSchema:
    """The ``DataSchema`` declared for the top-level struct class ``cls`` (or a subclass)."""
    try:
        return cls.__kafka_data_schema__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"{cls!r} is not the struct of a DataSchema") from None


def encode_versioned(obj: Any, version: int) -> bytes:
    """The version-prefixed encoding of ``obj``, an instance of a ``DataSchema``'s struct."""
    return data_schema_of(type(obj)).encode(obj, version)


def decode_versioned(cls: type, data: Buffer, *, allow_trailing: bool = False) -> tuple[int, Any]:
    """``(version, obj)`` from the version-prefixed bytes of ``cls``'s ``DataSchema``."""
    return data_schema_of(cls).decode(data, allow_trailing=allow_trailing)
