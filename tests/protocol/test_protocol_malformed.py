"""Malformed input: every failure is a ``ProtocolDecodeError`` (or the routing errors), raised before
any allocation sized by untrusted lengths.

Covers truncation at every byte position of every request and response at every version, huge and
negative counts/lengths, invalid UTF-8, trailing bytes, bad varints, tagged-field sections, random
garbage and bit flips, and unknown api keys / versions.
"""

from __future__ import annotations

import contextlib
import random
import struct
import tracemalloc

import pytest

import kctl.protocol as kp
from kctl.protocol import primitives as P
from kctl.protocol.messages.fetch import FetchResponse
from kctl.protocol.messages.metadata import MetadataRequest
from kctl.protocol.registry import SCHEMAS
from kctl.protocol.samples import sample

ALL = [
    pytest.param(key, version, id=f"{schema.name}-v{version}")
    for key, schema in sorted(SCHEMAS.items())
    for version in range(schema.min_version, schema.max_version + 1)
]


def _request_frame(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    flexible = SCHEMAS[api_key].is_flexible(version)
    head = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c" + (b"\x00" if flexible else b"")
    return head + body


# ---------------------------------------------------------------------------------- truncation


@pytest.mark.parametrize(("api_key", "version"), ALL)
def test_truncation_at_every_byte_position(api_key: int, version: int) -> None:
    schema = SCHEMAS[api_key]
    for codec, cls in (
        (schema.request_codec(version), schema.request),
        (schema.response_codec(version), schema.response),
    ):
        data = codec.encode(sample(cls, version, array_len=1))
        for i in range(len(data)):
            with pytest.raises(kp.ProtocolDecodeError):
                codec.decode(data[:i])
        codec.decode(data)  # and the whole message is fine


@pytest.mark.parametrize(("api_key", "version"), [(0, 3), (0, 9), (1, 12), (3, 1), (18, 3), (11, 6)])
def test_truncated_request_frames(api_key: int, version: int) -> None:
    frame = kp.encode_request(
        kp.RequestHeader(api_key, version, 5, "client"), sample(SCHEMAS[api_key].request, version)
    )[4:]
    for i in range(len(frame)):
        with pytest.raises(kp.ProtocolDecodeError):
            kp.decode_request(frame[:i])


@pytest.mark.parametrize(("api_key", "version"), ALL)
def test_trailing_bytes_rejected(api_key: int, version: int) -> None:
    codec = SCHEMAS[api_key].request_codec(version)
    data = codec.encode(sample(SCHEMAS[api_key].request, version))
    with pytest.raises(kp.ProtocolDecodeError, match="trailing"):
        codec.decode(data + b"\x00")


# ---------------------------------------------------------------------------------- huge lengths


def _peak_during(fn: object) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(kp.ProtocolDecodeError):
            fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_huge_array_count_in_small_frame_raises_without_allocating() -> None:
    # Metadata v1 request: topics array count 2^31-1, 20-byte frame
    frame = _request_frame(3, 1, struct.pack(">i", 0x7FFFFFFF))
    frame += bytes(20 - len(frame))
    assert len(frame) == 20
    peak = _peak_during(lambda: kp.decode_request(frame))
    assert peak < 64 * 1024


def test_huge_compact_array_count_raises_without_allocating() -> None:
    # Metadata v9 (flexible): topics compact count uvarint 0xFFFFFFFF
    frame = _request_frame(3, 9, P.uvarint(0xFFFFFFFF) + bytes(5))
    peak = _peak_during(lambda: kp.decode_request(frame))
    assert peak < 64 * 1024


def test_huge_primitive_array_count_raises() -> None:
    # ListOffsets v0 response... use OffsetFetch v1 request: partition_indexes []int32 with huge count
    body = (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 2**30)
    )
    with pytest.raises(kp.ProtocolDecodeError, match="partition_indexes"):
        kp.decode_request(_request_frame(9, 1, body))


@pytest.mark.parametrize(
    ("api_key", "version", "body", "match"),
    [
        # FindCoordinator v0: key string length 32767 with 3 bytes left
        (10, 0, struct.pack(">h", 0x7FFF) + b"abc", "key"),
        # SaslAuthenticate v0: bytes length 2^31-1
        (36, 0, struct.pack(">i", 0x7FFFFFFF) + b"x", "auth_bytes"),
        # SaslAuthenticate v2: compact bytes length 2^32-2
        (36, 2, P.uvarint(0xFFFFFFFF) + b"x\x00", "auth_bytes"),
        # FindCoordinator v3 (flexible): compact string length huge
        (10, 3, P.uvarint(0xFFFFFFF0) + b"ab", "key"),
        # Produce v3: records length 2^31-1
        (
            0,
            3,
            b"\xff\xff"
            + struct.pack(">hi", 1, 1)
            + struct.pack(">i", 1)
            + b"\x00\x01t"
            + struct.pack(">i", 1)
            + struct.pack(">ii", 0, 0x7FFFFFFF)
            + b"abc",
            "records",
        ),
    ],
)
def test_huge_lengths_rejected(api_key: int, version: int, body: bytes, match: str) -> None:
    frame = _request_frame(api_key, version, body)
    peak = _peak_during(lambda: kp.decode_request(frame))
    assert peak < 64 * 1024
    with pytest.raises(kp.ProtocolDecodeError, match=match):
        kp.decode_request(frame)


# ---------------------------------------------------------------------------------- negative / null


@pytest.mark.parametrize(
    ("api_key", "version", "body", "match"),
    [
        (10, 0, struct.pack(">h", -1), "null string"),  # FindCoordinator key is not nullable
        (10, 0, struct.pack(">h", -2), "negative string length"),
        (10, 3, b"\x00\x00\x00", "null string"),  # compact null where not nullable
        (36, 0, struct.pack(">i", -1), "null bytes"),
        (36, 0, struct.pack(">i", -7), "negative bytes length"),
        (3, 0, struct.pack(">i", -1), "null array"),  # Metadata v0 topics not nullable
        (3, 1, struct.pack(">i", -2), "negative array length"),  # nullable, but only -1 is null
        (0, 3, b"\xff\xfe" + struct.pack(">hii", 1, 1, 0), "negative string length"),  # nullable -2
        (
            0,
            3,
            b"\xff\xff"
            + struct.pack(">hi", 1, 1)
            + struct.pack(">i", 1)
            + b"\x00\x01t"
            + struct.pack(">i", 1)
            + struct.pack(">ii", 0, -3),
            "negative records length",
        ),
    ],
)
def test_negative_and_null_lengths(api_key: int, version: int, body: bytes, match: str) -> None:
    with pytest.raises(kp.ProtocolDecodeError, match=match):
        kp.decode_request(_request_frame(api_key, version, body))


def test_nullable_fields_accept_null() -> None:
    _, body = kp.decode_request(_request_frame(3, 1, struct.pack(">i", -1)))
    assert body.topics is None
    records_null = (
        b"\xff\xff"
        + struct.pack(">hi", 1, 1)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, -1)
    )
    _, body = kp.decode_request(_request_frame(0, 3, records_null))
    assert body.transactional_id is None and body.topic_data[0].partition_data[0].records is None


# ---------------------------------------------------------------------------------- UTF-8, varints


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3", b"a\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8(bad: bytes) -> None:
    body = struct.pack(">h", len(bad)) + bad
    with pytest.raises(kp.ProtocolDecodeError, match="UTF-8"):
        kp.decode_request(_request_frame(10, 0, body))
    compact = P.uvarint(len(bad) + 1) + bad + b"\x00\x00\x00"
    with pytest.raises(kp.ProtocolDecodeError, match="UTF-8"):
        kp.decode_request(_request_frame(10, 3, compact))


def test_invalid_utf8_in_client_id() -> None:
    frame = struct.pack(">hhih", 18, 0, 1, 1) + b"\xff"
    with pytest.raises(kp.ProtocolDecodeError, match="UTF-8"):
        kp.decode_request(frame)


@pytest.mark.parametrize(
    "varint", [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\x7f", b"\x80", b"\xff\xff\xff"]
)
def test_bad_unsigned_varints(varint: bytes) -> None:
    with pytest.raises(kp.ProtocolDecodeError, match="varint"):
        P.read_uvarint(memoryview(varint), 0, len(varint))
    with pytest.raises(kp.ProtocolDecodeError):
        kp.decode_request(_request_frame(36, 2, varint))


def test_uvarint_round_trip_bounds() -> None:
    for value in (0, 1, 127, 128, 16383, 16384, 2**21, 2**28 - 1, 2**28, 2**32 - 1):
        enc = P.uvarint(value)
        assert P.read_uvarint(memoryview(enc), 0, len(enc)) == (value, len(enc))
    with pytest.raises(kp.ProtocolEncodeError):
        P.uvarint(2**32)
    with pytest.raises(kp.ProtocolEncodeError):
        P.uvarint(-1)


# ---------------------------------------------------------------------------------- tagged fields


def _metadata_v9_with_tags(tags: bytes) -> bytes:
    # topics: compact array of 1: topic name "t" + the topic's tag section; then the three booleans
    # allow_auto_topic_creation, include_cluster_authorized_operations, include_topic_authorized_operations
    return b"\x02" + b"\x02t" + tags + b"\x01\x00\x01" + tags


def test_unknown_tags_are_skipped_everywhere() -> None:
    unknown = b"\x02" + b"\x05\x03abc" + b"\x96\x01\x01z"  # tags 5 and 150 (multi-byte varint)
    _, body = kp.decode_request(_request_frame(3, 9, _metadata_v9_with_tags(unknown)))
    assert body.topics[0].name == "t" and body.allow_auto_topic_creation is True
    assert body.include_topic_authorized_operations is True
    # in the request header too
    head = struct.pack(">hhih", 3, 9, 1, 1) + b"c" + unknown
    header, _ = kp.decode_request(head + _metadata_v9_with_tags(b"\x00"))
    assert header.client_id == "c"


@pytest.mark.parametrize(
    "tags",
    [
        b"\x01\x05\x09abc",  # value size beyond the end
        b"\x02\x05\x01a",  # second tag missing
        b"\x01",  # tag header missing
    ],
)
def test_broken_tag_sections(tags: bytes) -> None:
    with pytest.raises(kp.ProtocolDecodeError):
        kp.decode_request(_request_frame(3, 9, b"\x01" + b"\x01\x00\x00" + tags))
    kp.decode_request(_request_frame(3, 9, b"\x01" + b"\x01\x00\x00" + b"\x00"))  # the valid base


def test_known_tag_with_wrong_size() -> None:
    codec = SCHEMAS[1].request_codec(12)
    good = codec.encode({"max_wait_ms": 1, "min_bytes": 1, "cluster_id": "abc"})
    decoded = codec.decode(good)
    assert decoded.cluster_id == "abc"
    # cluster_id is tag 0 with a 4-byte value "\x04abc": claim 5 bytes and add one unread byte
    idx = good.index(b"\x00\x04\x04abc")
    bad = good[:idx] + b"\x00\x05\x04abcX"
    with pytest.raises(kp.ProtocolDecodeError, match="unread"):
        codec.decode(bad)


def test_known_tagged_field_decoded_in_nested_struct() -> None:
    codec = SCHEMAS[1].response_codec(12)
    data = codec.encode(
        {
            "responses": [
                {
                    "topic": "t",
                    "partitions": [{"partition_index": 1, "snapshot_id": {"end_offset": 9, "epoch": 2}}],
                }
            ]
        }
    )
    p = codec.decode(data).responses[0].partitions[0]
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (9, 2)
    assert p.current_leader.leader_id == -1  # absent tag keeps its default


# ---------------------------------------------------------------------------------- routing errors


def test_unknown_api_key() -> None:
    frame = struct.pack(">hhih", 999, 0, 31337, 3) + b"cli"
    with pytest.raises(kp.UnsupportedApiError) as info:
        kp.parse_request_header(frame)
    e = info.value
    assert (e.api_key, e.api_version, e.correlation_id, e.client_id) == (999, 0, 31337, "cli")
    assert not isinstance(e, kp.ProtocolDecodeError) and isinstance(e, ValueError)
    with pytest.raises(kp.UnsupportedApiError):
        kp.decode_request(frame)


@pytest.mark.parametrize(("api_key", "version"), [(18, 5), (18, 127), (1, 18), (3, -1), (47, 1)])
def test_unsupported_version(api_key: int, version: int) -> None:
    frame = struct.pack(">hhih", api_key, version, 4242, 2) + b"id\x00\x03\x02\x00"
    with pytest.raises(kp.UnsupportedVersionError) as info:
        kp.decode_request(frame)
    e = info.value
    schema = SCHEMAS[api_key]
    assert (e.api_key, e.api_version, e.correlation_id, e.client_id) == (api_key, version, 4242, "id")
    assert (e.min_version, e.max_version) == (schema.min_version, schema.max_version)
    assert schema.name in str(e)


def test_header_shorter_than_prefix() -> None:
    for n in range(8):
        with pytest.raises(kp.ProtocolDecodeError, match="truncated request header"):
            kp.parse_request_header(bytes(n))


def test_correlation_mismatch_on_client_side() -> None:
    out = kp.encode_response(kp.RequestHeader(12, 0, 5, "c"), {"error_code": 0})
    with pytest.raises(kp.ProtocolDecodeError, match="correlation"):
        kp.decode_response(kp.RequestHeader(12, 0, 6, "c"), out[4:])


# ---------------------------------------------------------------------------------- garbage


def test_random_garbage_only_raises_protocol_errors() -> None:
    rng = random.Random(20240917)
    keys = sorted(SCHEMAS)
    decoded = 0
    for _ in range(4000):
        key = rng.choice(keys)
        schema = SCHEMAS[key]
        version = rng.randint(schema.min_version, schema.max_version)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 48)))
        try:
            kp.decode_request(_request_frame(key, version, body))
            decoded += 1
        except kp.ProtocolDecodeError:
            pass
        with contextlib.suppress(kp.ProtocolDecodeError):
            schema.response_codec(version).decode(body)
    assert decoded < 4000


@pytest.mark.parametrize(("api_key", "version"), [(0, 9), (1, 12), (1, 4), (3, 12), (11, 9), (8, 8), (9, 8)])
def test_bit_flips_only_raise_protocol_errors(api_key: int, version: int) -> None:
    rng = random.Random(api_key * 100 + version)
    schema = SCHEMAS[api_key]
    for codec, cls in (
        (schema.request_codec(version), schema.request),
        (schema.response_codec(version), schema.response),
    ):
        data = bytearray(codec.encode(sample(cls, version)))
        rejected = 0
        for _ in range(600):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
            try:
                codec.decode(mutated)
            except kp.ProtocolDecodeError:
                rejected += 1
        assert 0 < rejected < 600


# ---------------------------------------------------------------------------------- encode errors


def test_encode_errors_are_clear() -> None:
    codec = SCHEMAS[3].request_codec(0)
    with pytest.raises(kp.ProtocolEncodeError, match="topics: None given for a non-nullable"):
        codec.encode(MetadataRequest(topics=None))
    with pytest.raises(kp.ProtocolEncodeError, match="MetadataRequest"):
        codec.encode({"topics": [], "no_such_field": 1})
    with pytest.raises(kp.ProtocolEncodeError):
        SCHEMAS[12].response_codec(0).encode({"error_code": 1 << 20})
    with pytest.raises(kp.ProtocolEncodeError, match="records"):
        SCHEMAS[1].response_codec(4).encode(
            FetchResponse(responses=[{"topic": "t", "partitions": [{"records": "not bytes"}]}])
        )
