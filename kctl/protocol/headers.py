"""Request and response headers.

This module owns the header layouts (Kafka's RequestHeader / ResponseHeader specs):

* request header v0: ``api_key int16, api_version int16, correlation_id int32``;
  v1 adds ``client_id`` (nullable string, int16 length — *never* compact, even in v2);
  v2 adds a tagged-field section (no tags are defined; any are skipped).
* response header v0: ``correlation_id int32``; v1 adds a tagged-field section.

Which version applies is the API's business (``ApiSchema.request_header_version`` /
``response_header_version``): flexible API versions use request v2 / response v1, others v1 / v0,
and ApiVersions responses always use v0.
"""

from __future__ import annotations

import dataclasses
import struct

from kctl.protocol import primitives as P
from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError

_PREFIX = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")


@dataclasses.dataclass(slots=True)
class RequestHeader:
    """A decoded request header. ``body_offset`` is where the body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    header_version: int = dataclasses.field(default=1, compare=False)
    body_offset: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclasses.dataclass(slots=True)
class ResponseHeader:
    """A decoded response header."""

    correlation_id: int
    header_version: int = dataclasses.field(default=0, compare=False)
    body_offset: int = dataclasses.field(default=0, compare=False, repr=False)


def read_request_prefix(buf: memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the 8 bytes every request header version starts with."""
    if buf.nbytes < 8:
        raise ProtocolDecodeError(f"truncated request header: {buf.nbytes} of at least 8 bytes")
    return _PREFIX.unpack_from(buf, 0)


def read_client_id(buf: memoryview) -> tuple[str | None, int]:
    """The client id at offset 8 (request header v1+) and the offset after it."""
    return P.read_nullable_string(buf, 8, buf.nbytes, "client_id")


def decode_request_header(buf: memoryview, header_version: int) -> RequestHeader:
    """Decode a request header of a known version from the start of ``buf``."""
    api_key, api_version, correlation_id = read_request_prefix(buf)
    client_id = None
    pos = 8
    try:
        if header_version >= 1:
            client_id, pos = read_client_id(buf)
        if header_version >= 2:
            pos = P.skip_tagged_fields(buf, pos, buf.nbytes)
    except ProtocolDecodeError as e:
        raise ProtocolDecodeError(f"request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version, pos)


def encode_request_header(header: RequestHeader, header_version: int) -> bytes:
    try:
        prefix = _PREFIX.pack(header.api_key, header.api_version, header.correlation_id)
    except struct.error as e:
        raise ProtocolEncodeError(f"request header: {e}") from None
    if header_version == 0:
        return prefix
    out: list[bytes] = [prefix]
    P.write_nullable_string(out, header.client_id, "client_id")
    if header_version >= 2:
        out.append(P.EMPTY_TAGS)
    return b"".join(out)


def decode_response_header(buf: memoryview, header_version: int) -> ResponseHeader:
    if buf.nbytes < 4:
        raise ProtocolDecodeError(f"truncated response header: {buf.nbytes} of at least 4 bytes")
    (correlation_id,) = _INT32.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        try:
            pos = P.skip_tagged_fields(buf, pos, buf.nbytes)
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"response header: {e}") from None
    return ResponseHeader(correlation_id, header_version, pos)


_TAGS_V1 = P.EMPTY_TAGS


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    try:
        if header_version >= 1:
            return _INT32.pack(correlation_id) + _TAGS_V1
        return _INT32.pack(correlation_id)
    except struct.error as e:
        raise ProtocolEncodeError(f"response header: {e}") from None
