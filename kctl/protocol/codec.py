"""Whole-message entry points: frames to (header, body) and back, for the server and for clients.

This module owns the composition of header + body + size prefix, the header-version rule per API, the
response chunking that keeps file regions (sendfile) in place, and the ApiVersions special cases.

Server side::

    reader = FrameReceiver(max_frame_size)
    for frame in reader.feed(data):
        try:
            header, request = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.api_key == ApiKey.API_VERSIONS:  # answer in the v0 layout so the client can retry
                send(api_versions_error_response(e.correlation_id, [(18, 0, 4)]))
            else:
                close()
            continue
        response = handle(header, request)             # a response dataclass, or a dict
        send_chunks(encode_response_chunks(header, response))   # or encode_response() -> bytes

Client side: ``encode_request(header, body) -> bytes`` and ``decode_response(request_header, frame)``.

Frames passed in are the bytes *after* the 4-byte size prefix (what ``FrameReceiver`` yields); frames
produced (``encode_*``) include the size prefix, ready to write.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.protocol import primitives as P
from kctl.protocol.errors import ErrorCode
from kctl.protocol.exceptions import (
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedApiError,
    UnsupportedVersionError,
)
from kctl.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    read_client_id,
    read_request_prefix,
)
from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kctl.protocol.registry import SCHEMAS, get_schema
from kctl.protocol.schema import ApiSchema

_INT32 = struct.Struct(">i")

# Byte chunks at least this large are kept as their own chunk by encode_response_chunks (no copy).
INLINE_LIMIT = 16 * 1024

API_VERSIONS_KEY = 18


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    mv = frame if type(frame) is memoryview else memoryview(frame)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


# ----------------------------------------------------------------------------------------- server side


def _parse_request_header(mv: memoryview) -> tuple[RequestHeader, ApiSchema]:
    api_key, api_version, correlation_id = read_request_prefix(mv)
    schema = SCHEMAS.get(api_key)
    if schema is None or not schema.min_version <= api_version <= schema.max_version:
        try:  # every header version the error can concern has a client id at offset 8
            client_id = read_client_id(mv)[0]
        except ProtocolDecodeError:
            client_id = None
        if schema is None:
            raise UnsupportedApiError(api_key, api_version, correlation_id, client_id)
        raise UnsupportedVersionError(
            api_key,
            api_version,
            schema.min_version,
            schema.max_version,
            correlation_id,
            client_id,
            schema.name,
        )
    header_version = 2 if schema.is_flexible(api_version) else 1
    try:
        client_id, pos = P.read_nullable_string(mv, 8, mv.nbytes, "client_id")
        if header_version == 2:
            pos = P.skip_tagged_fields(mv, pos, mv.nbytes)
    except ProtocolDecodeError as e:
        raise ProtocolDecodeError(f"{schema.name}Request v{api_version} header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version, pos), schema


def parse_request_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Parse only the request header, to route the request.

    Raises ``UnsupportedApiError`` / ``UnsupportedVersionError`` (with the correlation id) when the api
    key or version is outside the codec's range, ``ProtocolDecodeError`` when the header is malformed.
    ``header.body_offset`` is where the body starts."""
    return _parse_request_header(_view(frame))[0]


def decode_request_body(
    header: RequestHeader, frame: bytes | bytearray | memoryview, *, allow_trailing: bool = False
) -> Any:
    """Decode the body of a request whose header was parsed with ``parse_request_header``.

    ``allow_trailing`` ignores bytes after the body, as Kafka's broker does (librdkafka 2.16 sends
    three extra bytes after a Metadata v12 request, for one)."""
    mv = _view(frame)
    codec = get_schema(header.api_key).request_codec(header.api_version)
    return codec.decode(mv, header.body_offset, mv.nbytes, allow_trailing=allow_trailing)


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Any]:
    """Decode a request frame (without its size prefix) into ``(header, body)``.

    Records fields in the body are zero-copy memoryview slices of ``frame``."""
    mv = _view(frame)
    header, schema = _parse_request_header(mv)
    body = schema.request_codec(header.api_version).decode(mv, header.body_offset, mv.nbytes)
    return header, body


def _response_parts(request_header: RequestHeader, body: Any) -> list[Any]:
    """``[placeholder, response header, body chunks...]``: room for the size prefix at index 0."""
    schema = get_schema(request_header.api_key)
    version = request_header.api_version
    codec = schema.response_codec(version)
    out: list[Any] = [
        b"",
        encode_response_header(request_header.correlation_id, schema.response_header_version(version)),
    ]
    codec.encode_into(body, out)
    return out


_REGIONS_IN_BYTES = "records given as file regions cannot be encoded into bytes; use encode_response_chunks"


def encode_response(request_header: RequestHeader, body: Any) -> bytes:
    """The framed response (size prefix, response header, body) to ``request_header``'s request.

    ``body`` is the API's response dataclass, a dict of its fields, or any object with them.
    Records must be bytes-like here; use ``encode_response_chunks`` for file regions."""
    out = _response_parts(request_header, body)
    try:
        out[0] = _INT32.pack(sum(map(len, out)))
        return b"".join(out)
    except TypeError:
        raise ProtocolEncodeError(_REGIONS_IN_BYTES) from None


def encode_response_chunks(request_header: RequestHeader, body: Any) -> list[Any]:
    """The framed response as a list of chunks for ``writelines``/``sendmsg``/``sendfile``.

    Chunks are ``bytes``, large bytes-like values passed through unchanged, and the region objects
    given as records (anything with an integer ``size``), in order. The 4-byte size prefix at the start
    of the first chunk counts the regions' sizes."""
    out = _response_parts(request_header, body)
    total = len(out[1])
    chunks: list[Any] = []
    run: list[Any] = [b"\x00\x00\x00\x00", out[1]]
    for c in itertools.islice(out, 2, None):
        t = type(c)
        if t is bytes or t is bytearray or t is memoryview:
            n = len(c)
            total += n
            if n < INLINE_LIMIT:
                run.append(c)
                continue
        else:
            total += c.size  # a region: its size was validated when it was encoded
        if run:
            # the first chunk is a bytearray so the size prefix can be patched in at the end
            chunks.append(b"".join(run) if chunks else bytearray().join(run))
            run = []
        chunks.append(c)
    if run:
        chunks.append(b"".join(run) if chunks else bytearray().join(run))
    _INT32.pack_into(chunks[0], 0, total)
    return chunks


def chunks_size(chunks: Iterable[Any]) -> int:
    """Total bytes of a chunk list (bytes-like lengths plus region sizes)."""
    total = 0
    for c in chunks:
        t = type(c)
        total += len(c) if (t is bytes or t is bytearray or t is memoryview) else c.size
    return total


# ----------------------------------------------------------------------------------------- ApiVersions


def api_versions_error_response(
    correlation_id: int,
    api_keys: Iterable[tuple[int, int, int]] | Mapping[int, tuple[int, int]],
    error_code: int = ErrorCode.UNSUPPORTED_VERSION,
) -> bytes:
    """The framed ApiVersions error reply in the **v0 layout** (response header v0, body v0).

    For a request at an ApiVersions version we do not speak: ``error_code`` 35 and ``api_keys``
    as ``(api_key, min_version, max_version)`` triples or ``{api_key: (min, max)}`` — Kafka lists at
    least its own ApiVersions range there, so the client can retry with a version we support."""
    if isinstance(api_keys, Mapping):
        items = [ApiVersion(k, lo, hi) for k, (lo, hi) in api_keys.items()]
    else:
        items = [ApiVersion(k, lo, hi) for k, lo, hi in api_keys]
    body = ApiVersionsResponse(error_code=int(error_code), api_keys=items)
    codec = get_schema(API_VERSIONS_KEY).response_codec(0)
    payload = encode_response_header(correlation_id, 0) + codec.encode(body)
    return _INT32.pack(len(payload)) + payload


# ----------------------------------------------------------------------------------------- client side


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """The framed request: size prefix, request header (version from the API's flexibility), body."""
    schema = get_schema(header.api_key)
    codec = schema.request_codec(header.api_version)
    out: list[Any] = [b"", encode_request_header(header, schema.request_header_version(header.api_version))]
    codec.encode_into(body, out)
    try:
        size = sum(map(len, out))
    except TypeError:
        raise ProtocolEncodeError("request records must be bytes-like") from None
    out[0] = _INT32.pack(size)
    return b"".join(out)


def decode_response(
    request_header: RequestHeader, frame: bytes | bytearray | memoryview
) -> tuple[ResponseHeader, Any]:
    """Decode the response (frame without size prefix) to the request with ``request_header``.

    Raises ``ProtocolDecodeError`` if the correlation id does not match. An ApiVersions response
    that does not decode at the request's version is decoded in the v0 layout (the broker's answer
    to a version it does not support), as Kafka's clients do."""
    mv = _view(frame)
    schema = get_schema(request_header.api_key)
    version = request_header.api_version
    header = decode_response_header(mv, schema.response_header_version(version))
    if header.correlation_id != request_header.correlation_id:
        raise ProtocolDecodeError(
            f"correlation id {header.correlation_id} does not match the request's "
            f"{request_header.correlation_id}"
        )
    codec = schema.response_codec(version)
    if schema.api_key == API_VERSIONS_KEY and version > 0:
        try:
            return header, codec.decode(mv, header.body_offset, mv.nbytes)
        except ProtocolDecodeError:
            return header, schema.response_codec(0).decode(mv, header.body_offset, mv.nbytes)
    return header, codec.decode(mv, header.body_offset, mv.nbytes)
