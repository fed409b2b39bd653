"""Framing, headers, response chunking with file regions, and the ApiVersions special cases."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

import pytest

import kctl.protocol as kp
from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kctl.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from kctl.protocol.registry import SCHEMAS

# ---------------------------------------------------------------------------------- FrameReceiver


def test_frames_split_byte_by_byte() -> None:
    payloads = [b"hello", b"", b"x" * 300, bytes(range(256))]
    stream = b"".join(kp.frame(p) for p in payloads)
    reader = kp.FrameReceiver(1024)
    got: list[bytes] = []
    for i in range(len(stream)):
        got.extend(bytes(f) for f in reader.feed(stream[i : i + 1]))
    assert got == payloads
    assert reader.buffered == 0


def test_many_frames_in_one_feed_and_random_splits() -> None:
    rng = random.Random(7)
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 90))) for _ in range(60)]
    stream = b"".join(kp.frame(p) for p in payloads)
    assert [bytes(f) for f in kp.FrameReceiver(100).feed(stream)] == payloads
    for _ in range(20):
        reader = kp.FrameReceiver(100)
        got: list[bytes] = []
        i = 0
        while i < len(stream):
            j = i + rng.randint(1, 40)
            got.extend(bytes(f) for f in reader.feed(memoryview(stream)[i:j]))
            i = j
        assert got == payloads


def test_frames_are_writable_and_independent() -> None:
    reader = kp.FrameReceiver(64)
    a, b = reader.feed(kp.frame(b"abc") + kp.frame(b"def"))
    assert isinstance(a, memoryview) and not a.readonly
    a[0] = ord("X")
    assert bytes(a) == b"Xbc" and bytes(b) == b"def"


def test_oversized_frame_rejected_before_buffering() -> None:
    reader = kp.FrameReceiver(1000)
    with pytest.raises(kp.FrameTooLarge) as info:
        reader.feed(struct.pack(">i", 1001))
    assert (info.value.size, info.value.max_size) == (1001, 1000)
    assert isinstance(info.value, kp.ProtocolDecodeError)
    assert reader.buffered == 0
    # the limit itself is fine
    assert [bytes(f) for f in kp.FrameReceiver(3).feed(kp.frame(b"abc"))] == [b"abc"]


def test_oversized_frame_prefix_split_across_feeds() -> None:
    reader = kp.FrameReceiver(10)
    prefix = struct.pack(">i", 2**31 - 1)
    assert reader.feed(prefix[:3]) == []
    with pytest.raises(kp.FrameTooLarge):
        reader.feed(prefix[3:] + b"payload")


def test_oversized_frame_after_a_good_one() -> None:
    reader = kp.FrameReceiver(10)
    with pytest.raises(kp.FrameTooLarge):
        reader.feed(kp.frame(b"ok") + struct.pack(">i", 11))


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_frame_size_rejected(size: int) -> None:
    with pytest.raises(kp.ProtocolDecodeError, match="negative frame size"):
        kp.FrameReceiver(100).feed(struct.pack(">i", size))


def test_frame_prefix() -> None:
    assert kp.frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert kp.frame(memoryview(b"ab")) == b"\x00\x00\x00\x02ab"
    assert kp.frame(b"") == b"\x00\x00\x00\x00"


# ---------------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("api_key", "version", "request_hv", "response_hv"),
    [
        (18, 0, 1, 0),
        (18, 2, 1, 0),
        (18, 3, 2, 0),  # ApiVersions responses always use header v0
        (18, 4, 2, 0),
        (3, 8, 1, 0),
        (3, 9, 2, 1),
        (0, 8, 1, 0),
        (0, 9, 2, 1),
        (1, 11, 1, 0),
        (1, 12, 2, 1),
        (60, 0, 2, 1),  # DescribeCluster is flexible from v0
        (47, 0, 1, 0),  # OffsetDelete is never flexible
        (17, 1, 1, 0),
    ],
)
def test_header_versions(api_key: int, version: int, request_hv: int, response_hv: int) -> None:
    schema = SCHEMAS[api_key]
    assert schema.request_header_version(version) == request_hv
    assert schema.response_header_version(version) == response_hv
    header = kp.RequestHeader(api_key, version, 0x01020304, "id")
    frame = kp.encode_request(header, {})
    expected = struct.pack(">ihhih", len(frame) - 4, api_key, version, 0x01020304, 2) + b"id"
    if request_hv == 2:
        expected += b"\x00"
    assert frame.startswith(expected)
    response = kp.encode_response(header, {})
    assert response[4:8] == b"\x01\x02\x03\x04"
    rh, _ = kp.decode_response(header, response[4:])
    assert rh.header_version == response_hv
    if response_hv == 1:
        assert response[8] == 0  # empty tag section right after the correlation id


def test_client_id_stays_non_compact_in_flexible_header() -> None:
    frame = kp.encode_request(kp.RequestHeader(18, 3, 1, "abc"), ApiVersionsRequest("n", "1"))
    assert frame[12:17] == b"\x00\x03abc"
    assert kp.encode_request(kp.RequestHeader(18, 3, 1, None), {})[12:14] == b"\xff\xff"


def test_parse_request_header_gives_body_offset() -> None:
    frame = kp.encode_request(kp.RequestHeader(18, 3, 9, "cli"), ApiVersionsRequest("kctl", "0.1"))[4:]
    header = kp.parse_request_header(frame)
    assert header.body_offset == 8 + 2 + 3 + 1
    assert header == kp.RequestHeader(18, 3, 9, "cli")
    assert kp.decode_request_body(header, frame).client_software_name == "kctl"


# ---------------------------------------------------------------------------------- ApiVersions


def test_api_versions_error_response_uses_v0_layout() -> None:
    out = kp.api_versions_error_response(77, [(18, 0, 4), (0, 0, 11)])
    size, correlation, error, count = struct.unpack_from(">iihi", out)
    assert size == len(out) - 4 and correlation == 77 and error == 35 and count == 2
    assert struct.unpack_from(">hhhhhh", out, 14) == (18, 0, 4, 0, 0, 11)
    assert len(out) == 14 + 12  # no throttle time, no tags, no header tag section
    # a mapping works too
    assert kp.api_versions_error_response(77, {18: (0, 4), 0: (0, 11)}) == out


def test_api_versions_unsupported_version_flow() -> None:
    """A client asks ApiVersions v9: the server gets UnsupportedVersionError and answers v0."""
    request = struct.pack(">hhih", 18, 9, 1234, 4) + b"newc" + b"\x00" + b"\x05hello\x021\x00"
    with pytest.raises(kp.UnsupportedVersionError) as info:
        kp.decode_request(request)
    reply = kp.api_versions_error_response(info.value.correlation_id, [(18, 0, 4)])
    # the client decodes it although it asked with a version whose layout differs (fallback to v0)
    rh, body = kp.decode_response(kp.RequestHeader(18, 4, 1234, "newc"), reply[4:])
    assert rh.correlation_id == 1234
    assert body.error_code == kp.ErrorCode.UNSUPPORTED_VERSION
    assert body.api_keys == [ApiVersion(18, 0, 4)]


def test_api_versions_v3_response_has_v0_header_and_flexible_body() -> None:
    body = ApiVersionsResponse(error_code=0, api_keys=[ApiVersion(18, 0, 4)], throttle_time_ms=0)
    out = kp.encode_response(kp.RequestHeader(18, 3, 5, "c"), body)
    # size, correlation id, then straight into the body: error_code int16, compact array count 2
    assert out[4:8] == b"\x00\x00\x00\x05"
    assert out[8:10] == b"\x00\x00" and out[10] == 2


# ---------------------------------------------------------------------------------- chunks / regions


@dataclass
class Region:
    """A stand-in for the broker's file region (what sendfile will send)."""

    fd: int
    offset: int
    size: int


def _fetch_response(records: list[object]) -> FetchResponse:
    return FetchResponse(
        session_id=0,
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(partition_index=i, high_watermark=10, records=r)
                    for i, r in enumerate(records)
                ],
            )
        ],
    )


def _materialize(chunks: list[object], files: dict[int, bytes]) -> bytes:
    parts = []
    for c in chunks:
        if isinstance(c, Region):
            parts.append(files[c.fd][c.offset : c.offset + c.size])
        else:
            parts.append(bytes(c))  # type: ignore[arg-type]
    return b"".join(parts)


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_response_chunks_keep_regions_and_count_them(version: int) -> None:
    files = {3: bytes(range(256)) * 400}
    big = b"B" * (kp.codec.INLINE_LIMIT + 5)
    records: list[object] = [
        Region(3, 100, 5000),
        b"small",
        None,
        Region(3, 0, 0),
        memoryview(big),
        Region(3, 7, 1),
    ]
    header = kp.RequestHeader(1, version, 21, "c")
    chunks = kp.encode_response_chunks(header, _fetch_response(records))
    regions = [c for c in chunks if isinstance(c, Region)]
    assert regions == [r for r in records if isinstance(r, Region)]
    assert any(c is not big and isinstance(c, memoryview) and c.obj is big for c in chunks)  # no copy
    assert kp.chunks_size(chunks) == struct.unpack_from(">i", chunks[0])[0] + 4
    # the materialized frame equals the plain encoding of the same response with bytes records
    as_bytes = [files[3][r.offset : r.offset + r.size] if isinstance(r, Region) else r for r in records]
    plain = kp.encode_response(header, _fetch_response(as_bytes))
    assert _materialize(chunks, files) == plain
    _, decoded = kp.decode_response(header, plain[4:])
    assert [p.records is None for p in decoded.responses[0].partitions] == [r is None for r in records]


def test_encode_response_refuses_regions() -> None:
    with pytest.raises(kp.ProtocolEncodeError, match="encode_response_chunks"):
        kp.encode_response(kp.RequestHeader(1, 12, 1, "c"), _fetch_response([Region(1, 0, 10)]))


def test_region_size_must_be_an_int() -> None:
    @dataclass
    class Bad:
        size: float

    with pytest.raises(kp.ProtocolEncodeError, match="records"):
        kp.encode_response_chunks(kp.RequestHeader(1, 12, 1, "c"), _fetch_response([Bad(1.5)]))
