"""Kafka wire protocol, sans-io: bytes to request/response objects and back. Never touches sockets.

Layout:

* ``types``      — the schema vocabulary (``Field``, ``struct``, ``array``, primitive types).
* ``compiler``   — generates a straight-line decoder/encoder per (struct, version), cached.
* ``primitives`` — checked readers/writers of ints, varints, strings, bytes, records, arrays, tags.
* ``schema``     — ``ApiSchema``: one API's versions, flexible threshold and per-version codecs.
* ``messages/``  — the declarations, one module per API; ``registry`` maps api key → schema.
* ``headers``    — request header v0–2, response header v0–1.
* ``framing``    — ``FrameReceiver``, ``FramePool`` and ``frame()`` (4-byte size prefix).
* ``codec``      — whole messages: ``decode_request``, ``encode_response(_chunks)``, client side,
  and the ApiVersions v0 error reply.
* ``errors``     — ``ErrorCode``; ``exceptions`` — the codec's exceptions.
* ``samples``    — fully populated sample messages (tests, benchmarks).
"""

from kctl.protocol.codec import (
    api_versions_error_response,
    chunks_size,
    decode_request,
    decode_request_body,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
    parse_request_header,
)
from kctl.protocol.errors import ErrorCode, error_name, is_retriable
from kctl.protocol.exceptions import (
    FrameTooLarge,
    ProtocolDecodeError,
    ProtocolEncodeError,
    ProtocolError,
    UnsupportedApiError,
    UnsupportedVersionError,
)
from kctl.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FramePool, FrameReceiver, frame
from kctl.protocol.headers import RequestHeader, ResponseHeader
from kctl.protocol.registry import SCHEMAS, ApiKey, codec_version_ranges, compile_all, get_schema
from kctl.protocol.schema import ApiSchema, BodyCodec

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "SCHEMAS",
    "ApiKey",
    "ApiSchema",
    "BodyCodec",
    "ErrorCode",
    "FramePool",
    "FrameReceiver",
    "FrameTooLarge",
    "ProtocolDecodeError",
    "ProtocolEncodeError",
    "ProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "UnsupportedApiError",
    "UnsupportedVersionError",
    "api_versions_error_response",
    "chunks_size",
    "codec_version_ranges",
    "compile_all",
    "decode_request",
    "decode_request_body",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "error_name",
    "frame",
    "get_schema",
    "is_retriable",
    "parse_request_header",
]
