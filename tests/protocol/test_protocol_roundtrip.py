"""Round trips of every API at every version of the codec's range, requests and responses.

Each message is built by ``kctl.protocol.samples.sample`` with a distinct non-default value in every
field present at that version (and again with every nullable field null), encoded, decoded, compared,
and re-encoded to the same bytes; then the same through the framed request/response entry points.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

import kctl.protocol as kp
from kctl.protocol.registry import SCHEMAS
from kctl.protocol.samples import sample
from kctl.protocol.types import ArrayType, is_struct_type, schema_of

CASES = [
    pytest.param(key, version, id=f"{schema.name}-v{version}")
    for key, schema in sorted(SCHEMAS.items())
    for version in range(schema.min_version, schema.max_version + 1)
]


def _assert_fields_equal(expected: Any, actual: Any, cls: type, version: int, path: str) -> None:
    """Compare field by field (present fields exactly, absent ones at their defaults)."""
    assert type(actual) is cls, f"{path}: {type(actual).__name__} is not {cls.__name__}"
    for f in schema_of(cls).fields:
        e = getattr(expected, f.name)
        a = getattr(actual, f.name)
        where = f"{path}.{f.name}"
        if not f.present(version):
            default = getattr(cls(), f.name)
            assert a == default, f"{where}: absent in v{version}, expected the default {default!r}, got {a!r}"
            continue
        t = f.type
        if isinstance(t, ArrayType) and is_struct_type(t.element) and e is not None:
            assert a is not None and len(a) == len(e), where
            for i, (ei, ai) in enumerate(zip(e, a, strict=True)):
                _assert_fields_equal(ei, ai, t.element, version, f"{where}[{i}]")
        elif is_struct_type(t):
            _assert_fields_equal(e, a, t, version, where)
        elif isinstance(e, (bytes, memoryview)):
            assert a is not None and bytes(a) == bytes(e), where
        else:
            assert a == e, f"{where}: expected {e!r}, got {a!r}"


@pytest.mark.parametrize(("api_key", "version"), CASES)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_body_round_trip(api_key: int, version: int, nulls: bool) -> None:
    schema = SCHEMAS[api_key]
    for cls, codec in (
        (schema.request, schema.request_codec(version)),
        (schema.response, schema.response_codec(version)),
    ):
        msg = sample(cls, version, nulls=nulls)
        data = codec.encode(msg)
        decoded = codec.decode(data)
        _assert_fields_equal(msg, decoded, cls, version, cls.__name__)
        assert codec.encode(decoded) == data
        # dicts encode like the dataclass
        assert codec.encode(_as_dict(msg)) == data


def _as_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _as_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [_as_dict(x) for x in obj]
    return obj


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_framed_round_trip(api_key: int, version: int) -> None:
    schema = SCHEMAS[api_key]
    header = kp.RequestHeader(api_key, version, 123456, "client-é")
    request = sample(schema.request, version)
    frame = kp.encode_request(header, request)
    (payload,) = kp.FrameReceiver(1 << 20).feed(frame)
    parsed = kp.parse_request_header(payload)
    assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id) == (
        api_key,
        version,
        123456,
        "client-é",
    )
    assert parsed.header_version == (2 if schema.is_flexible(version) else 1)
    h2, body = kp.decode_request(payload)
    assert h2 == parsed
    _assert_fields_equal(request, body, schema.request, version, "request")
    assert kp.decode_request_body(parsed, payload) == body

    response = sample(schema.response, version)
    out = kp.encode_response(parsed, response)
    assert int.from_bytes(out[:4], "big") == len(out) - 4
    assert kp.encode_response_chunks(parsed, response) == [out]
    rh, rbody = kp.decode_response(header, out[4:])
    assert rh.correlation_id == 123456
    _assert_fields_equal(response, rbody, schema.response, version, "response")


def test_every_api_of_the_brief_is_registered_with_its_range() -> None:
    expected = {
        "ApiVersions": (0, 4),
        "Metadata": (0, 12),
        "Produce": (0, 11),
        "Fetch": (0, 17),
        "ListOffsets": (0, 9),
        "CreateTopics": (0, 7),
        "DeleteTopics": (0, 6),
        "CreatePartitions": (0, 3),
        "DeleteRecords": (0, 2),
        "DescribeConfigs": (0, 4),
        "AlterConfigs": (0, 2),
        "IncrementalAlterConfigs": (0, 1),
        "DescribeCluster": (0, 1),
        "DescribeLogDirs": (0, 4),
        "FindCoordinator": (0, 6),
        "JoinGroup": (0, 9),
        "SyncGroup": (0, 5),
        "Heartbeat": (0, 4),
        "LeaveGroup": (0, 5),
        "OffsetCommit": (0, 9),
        "OffsetFetch": (0, 9),
        "ListGroups": (0, 5),
        "DescribeGroups": (0, 5),
        "DeleteGroups": (0, 2),
        "OffsetDelete": (0, 0),
        "OffsetForLeaderEpoch": (0, 4),
        "InitProducerId": (0, 5),
        "SaslHandshake": (0, 1),
        "SaslAuthenticate": (0, 2),
        "ElectLeaders": (0, 2),
        "AlterPartitionReassignments": (0, 0),
        "ListPartitionReassignments": (0, 0),
        "DescribeAcls": (0, 3),
        "CreateAcls": (0, 3),
        "DeleteAcls": (0, 3),
        "DescribeUserScramCredentials": (0, 0),
        "AlterUserScramCredentials": (0, 0),
        "DescribeClientQuotas": (0, 1),
        "AlterClientQuotas": (0, 1),
        "AlterReplicaLogDirs": (0, 2),
        "DescribeProducers": (0, 0),
        "DescribeTransactions": (0, 0),
        "ListTransactions": (0, 2),
        "WriteTxnMarkers": (0, 1),
        "AddPartitionsToTxn": (0, 5),
        "AddOffsetsToTxn": (0, 4),
        "EndTxn": (0, 5),
        "TxnOffsetCommit": (0, 4),
    }
    got = {s.name: (s.min_version, s.max_version) for s in SCHEMAS.values()}
    assert got == expected
    assert kp.codec_version_ranges()[1] == (0, 17)


def test_absent_fields_are_not_encoded_and_decode_to_defaults() -> None:
    from kctl.protocol.messages.fetch import FetchRequest, FetchTopic

    schema = SCHEMAS[1]
    req = FetchRequest(
        max_wait_ms=5,
        min_bytes=1,
        isolation_level=1,
        topics=[FetchTopic(topic="t", topic_id=uuid.uuid4(), partitions=[])],
        rack_id="r",
    )
    v3 = schema.request_codec(3).decode(schema.request_codec(3).encode(req))
    assert v3.isolation_level == 0 and v3.rack_id == "" and v3.topics[0].topic == "t"
    assert v3.topics[0].topic_id == uuid.UUID(int=0)
    v13 = schema.request_codec(13).decode(schema.request_codec(13).encode(req))
    assert v13.topics[0].topic == "" and v13.topics[0].topic_id == req.topics[0].topic_id


def test_tagged_fields_written_only_when_not_default() -> None:
    from kctl.protocol.messages.fetch import FetchResponse, LeaderIdAndEpoch, PartitionData

    codec = SCHEMAS[1].response_codec(12)
    plain = PartitionData(partition_index=0, records=b"")
    tagged = PartitionData(partition_index=0, records=b"", current_leader=LeaderIdAndEpoch(3, 9))
    a = codec.encode(FetchResponse(responses=[{"topic": "t", "partitions": [plain]}]))
    b = codec.encode(FetchResponse(responses=[{"topic": "t", "partitions": [tagged]}]))
    # one tag (uvarint 1) + tag 1 + size 9 + leader_id int32 + leader_epoch int32 + empty tag section
    assert len(b) - len(a) == 1 + 1 + 8 + 1
    assert codec.decode(b).responses[0].partitions[0].current_leader == LeaderIdAndEpoch(3, 9)
    # None stands for the default of a tagged struct
    none = PartitionData(partition_index=0, records=b"", current_leader=None)
    assert codec.encode(FetchResponse(responses=[{"topic": "t", "partitions": [none]}])) == a


def test_records_decode_zero_copy() -> None:
    from kctl.protocol.messages.produce import ProduceRequest

    blob = bytes(range(256)) * 64
    req = ProduceRequest(
        acks=-1, timeout_ms=1, topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": blob}]}]
    )
    frame = bytearray(kp.encode_request(kp.RequestHeader(0, 9, 1, "c"), req)[4:])
    _, body = kp.decode_request(frame)
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == blob
    assert records.obj is frame  # a view of the frame, not a copy
    records[0] = 0xEE
    assert frame[len(frame) - len(blob) - 3] == 0xEE  # writes go to the frame (broker patches in place)


def test_objects_dicts_and_duck_typed_objects_encode_alike() -> None:
    from types import SimpleNamespace

    from kctl.protocol.messages.heartbeat import HeartbeatRequest
    from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol

    codec = SCHEMAS[11].request_codec(5)
    obj = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=1,
        member_id="m",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"x")],
    )
    as_dict = {
        "group_id": "g",
        "session_timeout_ms": 1,
        "member_id": "m",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"x"}],
    }
    duck = SimpleNamespace(
        group_id="g",
        session_timeout_ms=1,
        rebalance_timeout_ms=-1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[SimpleNamespace(name="range", metadata=b"x")],
        reason=None,
    )
    assert codec.encode(obj) == codec.encode(as_dict) == codec.encode(duck)
    assert HeartbeatRequest.__module__ == "kctl.protocol.messages.heartbeat"


def test_generated_codecs_are_compiled_once_and_inspectable() -> None:
    from kctl.protocol.compiler import compile_struct
    from kctl.protocol.messages.produce import ProduceRequest

    kp.compile_all()
    a = compile_struct(ProduceRequest, 9, True)
    assert compile_struct(ProduceRequest, 9, True) is a
    assert "def decode(buf, pos, end):" in a.source and "def encode(o, out):" in a.source
    assert SCHEMAS[0].request_codec(9) is SCHEMAS[0].request_codec(9)
    with pytest.raises(kp.UnsupportedVersionError):
        SCHEMAS[0].request_codec(12)


def test_request_header_v0_and_response_header_helpers() -> None:
    from kctl.protocol import headers

    raw = headers.encode_request_header(kp.RequestHeader(7, 0, 99, "ignored"), 0)
    assert raw == b"\x00\x07\x00\x00\x00\x00\x00\x63"
    decoded = headers.decode_request_header(memoryview(raw), 0)
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (
        7,
        0,
        99,
        None,
    )
    assert decoded.body_offset == 8
    v2 = headers.encode_request_header(kp.RequestHeader(3, 9, 1, "c"), 2)
    assert headers.decode_request_header(memoryview(v2 + b"body"), 2).body_offset == len(v2)
    assert headers.encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert headers.encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    rh = headers.decode_response_header(memoryview(b"\x00\x00\x00\x05\x01\x07\x01zrest"), 1)
    assert (rh.correlation_id, rh.body_offset) == (5, 8)  # an unknown tag in the header is skipped
