"""One API's declaration — api key, version range, flexible threshold, request and response structs —
and its compiled per-version body codecs.

This module owns the per-API view: which versions exist, which are flexible, which header version
goes with each, and the cached ``BodyCodec`` (decode bytes to the dataclass, encode the dataclass or a
dict to a list of chunks) for every (direction, version). Headers and framing live elsewhere.
"""

from __future__ import annotations

import struct
from typing import Any

from kctl.protocol.compiler import CompiledStruct, compile_struct
from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from kctl.protocol.types import VersionRange, parse_versions, schema_of


class BodyCodec:
    """Decoder and encoder of one message body (request or response) at one version."""

    __slots__ = ("_decode", "_encode", "api_key", "cls", "flexible", "label", "version")

    def __init__(
        self, api_key: int, label: str, version: int, flexible: bool, compiled: CompiledStruct, cls: type
    ) -> None:
        self.api_key = api_key
        self.label = label
        self.version = version
        self.flexible = flexible
        self.cls = cls
        self._decode = compiled.decode
        self._encode = compiled.encode

    def decode(
        self,
        buf: bytes | bytearray | memoryview,
        pos: int = 0,
        end: int | None = None,
        *,
        allow_trailing: bool = False,
    ) -> Any:
        """Decode the body occupying ``buf[pos:end]`` exactly; trailing bytes are an error unless
        ``allow_trailing`` (Kafka's own broker ignores them, and some clients send them)."""
        mv = buf if type(buf) is memoryview else memoryview(buf)
        if end is None:
            end = mv.nbytes
        try:
            obj, pos = self._decode(mv, pos, end)
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"{self.label}: {e}") from None
        except (struct.error, IndexError, ValueError) as e:  # defensive: should not happen
            raise ProtocolDecodeError(f"{self.label}: malformed input: {e}") from None
        if pos != end and not allow_trailing:
            raise ProtocolDecodeError(f"{self.label}: {end - pos} trailing bytes after the body")
        return obj

    def encode_into(self, obj: Any, out: list[Any]) -> None:
        """Append the body's encoding (bytes chunks and record objects) to ``out``."""
        try:
            self._encode(obj, out)
        except ProtocolEncodeError as e:
            raise ProtocolEncodeError(f"{self.label}: {e}") from None
        except (struct.error, AttributeError, TypeError, OverflowError, UnicodeEncodeError) as e:
            raise ProtocolEncodeError(f"{self.label}: cannot encode {type(obj).__name__}: {e}") from None

    def encode(self, obj: Any) -> bytes:
        """The body's encoding as bytes (records must be bytes-like here, not file regions)."""
        out: list[Any] = []
        self.encode_into(obj, out)
        try:
            return b"".join(out)
        except TypeError:
            raise ProtocolEncodeError(
                f"{self.label}: records given as file regions cannot be joined into bytes; "
                "use encode_response_chunks"
            ) from None

    def __repr__(self) -> str:
        return f"<BodyCodec {self.label}>"


class ApiSchema:
    """The declaration of one Kafka API, modelled on Kafka's published message specs."""

    def __init__(
        self,
        api_key: int,
        name: str,
        versions: str,
        flexible: str,
        request: type,
        response: type,
    ) -> None:
        vr = parse_versions(versions)
        if vr is None:
            raise ValueError(f"{name}: no valid versions")
        self.api_key = api_key
        self.name = name
        self.min_version = vr.low
        self.max_version = vr.high
        self.flexible_versions: VersionRange | None = parse_versions(flexible)
        self.request = request
        self.response = response
        self._request_codecs: list[BodyCodec | None] = [None] * (vr.high + 1)
        self._response_codecs: list[BodyCodec | None] = [None] * (vr.high + 1)
        self._check()

    def _check(self) -> None:
        """Reject declarations Kafka's specs could not contain (e.g. tagged in a non-flexible version)."""
        flex = self.flexible_versions

        def walk(cls: type, seen: set[type]) -> None:
            if cls in seen:
                return
            seen.add(cls)
            for f in schema_of(cls).fields:
                if f.tagged is not None:
                    low = max(f.tagged.low, self.min_version)
                    for v in range(low, min(f.tagged.high, self.max_version) + 1):
                        if flex is None or v not in flex:
                            raise ValueError(f"{self.name}: field {f.name} tagged in non-flexible v{v}")
                t = f.type
                el = getattr(t, "element", t)
                if isinstance(el, type) and hasattr(el, "__kafka_schema__"):
                    walk(el, seen)

        walk(self.request, set())
        walk(self.response, set())

    # ----------------------------------------------------------------------------------- versions

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_versions is not None and version in self.flexible_versions

    def request_header_version(self, version: int) -> int:
        """2 for flexible versions, else 1 (v0 headers are only used by ControlledShutdown v0)."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """1 for flexible versions, else 0 — ApiVersions (key 18) always uses 0."""
        if self.api_key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def _check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise UnsupportedVersionError(
                self.api_key, version, self.min_version, self.max_version, api_name=self.name
            )

    # ----------------------------------------------------------------------------------- codecs

    def request_codec(self, version: int) -> BodyCodec:
        """The request body codec at ``version`` (compiled once, then cached)."""
        codec = self._request_codecs[version] if 0 <= version <= self.max_version else None
        if codec is None:
            self._check_version(version)
            codec = self._build(self.request, "Request", version)
            self._request_codecs[version] = codec
        return codec

    def response_codec(self, version: int) -> BodyCodec:
        """The response body codec at ``version`` (compiled once, then cached)."""
        codec = self._response_codecs[version] if 0 <= version <= self.max_version else None
        if codec is None:
            self._check_version(version)
            codec = self._build(self.response, "Response", version)
            self._response_codecs[version] = codec
        return codec

    def _build(self, cls: type, kind: str, version: int) -> BodyCodec:
        flexible = self.is_flexible(version)
        compiled = compile_struct(cls, version, flexible)
        return BodyCodec(self.api_key, f"{self.name}{kind} v{version}", version, flexible, compiled, cls)

    def compile_all(self) -> None:
        """Compile every version's request and response codec now (warm-up, tests)."""
        for v in range(self.min_version, self.max_version + 1):
            self.request_codec(v)
            self.response_codec(v)

    def __repr__(self) -> str:
        flex = self.flexible_versions
        return (
            f"<ApiSchema {self.name} key={self.api_key} v{self.min_version}-{self.max_version} "
            f"flexible={flex if flex is not None else 'none'}>"
        )
