"""Independent cross-check of the codec against kafka-python 3.x (an implementation we do not share
code with).

* kafka-python's message classes (generated from Kafka's JSON specs): messages it builds from
  hand-written values are decoded by us and compared field by field, across the listed APIs and
  versions, flexible ones included; and for every API/version both codecs know, our encoding of a
  fully populated message decodes in kafka-python to the same values and re-encodes to the very same
  bytes (request headers included).
* kafka-python's older hand-written ``kafka.protocol.old`` classes: the same byte-for-byte check for
  every version they define in our range, which covers the versions the JSON specs dropped in 4.0
  (Produce v0–2, Fetch v0–3, ListOffsets v0, OffsetCommit v0–1, ...).
"""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import uuid
from typing import Any

import kafka.protocol.old as kp_old
import pytest
from kafka.protocol import admin as kp_admin
from kafka.protocol import consumer as kp_consumer
from kafka.protocol import metadata as kp_metadata
from kafka.protocol import producer as kp_producer
from kafka.protocol import sasl as kp_sasl
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.old.api import Request as OldRequest
from kafka.protocol.old.api import Response as OldResponse

import kctl.protocol as kp
from kctl.protocol.registry import SCHEMAS
from kctl.protocol.samples import sample
from kctl.protocol.types import UUID, ArrayType, is_struct_type, parse_versions, schema_of


def _kafka_python_classes() -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for mod in (kp_admin, kp_consumer, kp_metadata, kp_producer, kp_sasl):
        for name in dir(mod):
            obj = getattr(mod, name)
            if (
                inspect.isclass(obj)
                and issubclass(obj, ApiMessage)
                and obj is not ApiMessage
                and getattr(obj, "_json", None)
                and obj.name == name
            ):
                found.setdefault(obj.API_KEY, {})["request" if obj.is_request() else "response"] = obj
    return found


KP = _kafka_python_classes()


def _overlap_cases() -> list[Any]:
    cases = []
    for key, schema in sorted(SCHEMAS.items()):
        valid = parse_versions(KP[key]["request"].json["validVersions"])
        assert valid is not None
        for v in range(max(schema.min_version, valid.low), min(schema.max_version, valid.high) + 1):
            cases.append(pytest.param(key, v, id=f"{schema.name}-v{v}"))
    return cases


OVERLAP = _overlap_cases()


def _norm(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def _same(a: Any, b: Any) -> bool:
    """kafka-python turns authorized-operations bit fields into sets of bit numbers."""
    if isinstance(b, set) and isinstance(a, int):
        return {i for i in range(32) if (a >> i) & 1} == b
    return _norm(a) == _norm(b)


def _their_attr(theirs: Any, name: str) -> Any:
    try:
        return getattr(theirs, name)
    except AttributeError:
        if name.endswith("authorized_operations"):  # kafka-python's name for these fields
            return theirs.authorized_operations
        raise


def assert_same_values(ours: Any, theirs: Any, cls: type, version: int, path: str) -> None:
    """Every field present at ``version`` of our object equals kafka-python's attribute."""
    for f in schema_of(cls).fields:
        if not f.present(version):
            continue
        where = f"{path}.{f.name}"
        a = getattr(ours, f.name)
        b = _their_attr(theirs, f.name)
        t = f.type
        if isinstance(t, ArrayType) and is_struct_type(t.element) and a is not None:
            assert b is not None and len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                assert_same_values(x, y, t.element, version, f"{where}[{i}]")
        elif is_struct_type(t):
            assert_same_values(a, b, t, version, where)
        elif isinstance(t, ArrayType) and a is not None:
            assert [_norm(x) for x in a] == [_norm(x) for x in b], where
        else:
            assert _same(a, b), f"{where}: ours {a!r}, kafka-python {b!r}"


# ------------------------------------------------------------------------------ generic, both ways


@pytest.mark.parametrize(("api_key", "version"), OVERLAP)
def test_request_identical_in_kafka_python(api_key: int, version: int) -> None:
    schema = SCHEMAS[api_key]
    ours = sample(schema.request, version)
    frame = kp.encode_request(kp.RequestHeader(api_key, version, 4242, "kctl-test"), ours)[4:]
    theirs = KP[api_key]["request"].decode(bytes(frame), version=version, header=True)
    assert theirs.header.correlation_id == 4242
    assert theirs.header.client_id == "kctl-test"
    assert_same_values(ours, theirs, schema.request, version, schema.request.__name__)
    assert bytes(theirs.encode(version=version, header=True)) == bytes(frame)


@pytest.mark.parametrize(("api_key", "version"), OVERLAP)
def test_response_identical_in_kafka_python(api_key: int, version: int) -> None:
    schema = SCHEMAS[api_key]
    ours = sample(schema.response, version)
    if api_key == kp.ApiKey.API_VERSIONS:
        ours.error_code = 0  # kafka-python reads any ApiVersions error reply in the v0 layout
    request_header = kp.RequestHeader(api_key, version, 777, "c")
    frame = kp.encode_response(request_header, ours)[4:]
    theirs = KP[api_key]["response"].decode(bytes(frame), version=version, header=True)
    assert theirs.header.correlation_id == 777
    assert_same_values(ours, theirs, schema.response, version, schema.response.__name__)
    header_size = 4 + schema.response_header_version(version)  # v1 adds an empty tag section
    theirs._header = None  # re-encode the body only (kafka-python cannot re-encode response headers)
    assert bytes(theirs.encode(version=version)) == bytes(frame[header_size:])


# Old classes that contradict Kafka's own JSON spec (which test_protocol_schemas checks us against):
# DescribeLogDirsRequest_v0 declares each topic's partitions as one int32, not an array of int32;
# DescribeAcls{Request,Response}_v2 reuse v1's schema although v2 is the first flexible version.
_OLD_CLASS_BUGS = {"DescribeLogDirsRequest_v0", "DescribeAclsRequest_v2", "DescribeAclsResponse_v2"}


def _old_classes() -> list[Any]:
    cases = []
    for info in pkgutil.iter_modules(kp_old.__path__):
        mod = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for name, obj in vars(mod).items():
            if not (inspect.isclass(obj) and issubclass(obj, (OldRequest, OldResponse))):
                continue
            key, version = getattr(obj, "API_KEY", None), getattr(obj, "API_VERSION", None)
            if not (isinstance(key, int) and isinstance(version, int)):
                continue
            schema = SCHEMAS.get(key)
            if schema is None or not schema.supports(version) or obj.__module__ != mod.__name__:
                continue
            if name in _OLD_CLASS_BUGS:
                continue
            cases.append(pytest.param(obj, key, version, issubclass(obj, OldRequest), id=name))
    return sorted(cases, key=lambda p: p.id)


OLD = _old_classes()


def test_old_classes_cover_the_versions_dropped_from_the_json_specs() -> None:
    ids = {p.id for p in OLD}
    for name in (
        "ProduceRequest_v0",
        "ProduceRequest_v2",
        "FetchRequest_v0",
        "FetchResponse_v3",
        "ListOffsetsRequest_v0",
        "OffsetCommitRequest_v0",
        "OffsetCommitRequest_v1",
        "OffsetFetchRequest_v0",
        "CreateTopicsRequest_v0",
        "DeleteTopicsRequest_v0",
        "DescribeConfigsRequest_v0",
    ):
        assert name in ids
    assert len(OLD) > 150


def _old_fields(obj: Any) -> list[Any]:
    """Field values of a kafka.protocol.old object (a Struct, a tuple for nested structs, or a bare
    value where the old class flattened a one-field struct, e.g. Metadata's topic names)."""
    if isinstance(obj, (tuple, list)):
        return list(obj)
    if hasattr(obj, "SCHEMA"):
        return [getattr(obj, name) for name in obj.SCHEMA.names]
    return [obj]


# The old classes group CreatePartitions' count and assignments in a nested schema: same bytes,
# different shape, so only the byte-for-byte check applies there.
_OLD_SHAPE_DIFFERS = {"CreatePartitionsRequest"}


def assert_same_positional(ours: Any, theirs: Any, cls: type, version: int, path: str) -> None:
    """The old classes list the fields of each version in order, tagged fields excluded."""
    if cls.__name__ in _OLD_SHAPE_DIFFERS:
        return
    schema_fields = [f for f in schema_of(cls).fields if f.present(version) and f.tagged is None]
    values = [v for v in _old_fields(theirs) if not isinstance(v, dict)]  # drop tag sections
    assert len(values) == len(schema_fields), f"{path}: {len(values)} fields vs ours {len(schema_fields)}"
    for f, b in zip(schema_fields, values, strict=True):
        a = getattr(ours, f.name)
        where = f"{path}.{f.name}"
        t = f.type
        if isinstance(t, ArrayType) and is_struct_type(t.element) and a is not None:
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                assert_same_positional(x, y, t.element, version, f"{where}[{i}]")
        elif isinstance(t, ArrayType) and a is not None:
            assert [_norm(x) for x in a] == [_norm(x) for x in b], where
        elif f.type is UUID:
            assert a == (b if isinstance(b, uuid.UUID) else uuid.UUID(bytes=b)), where
        else:
            assert _same(a, b), f"{where}: ours {a!r}, kafka-python {b!r}"


@pytest.mark.parametrize(("old_cls", "api_key", "version", "is_request"), OLD)
def test_old_kafka_python_classes_agree_byte_for_byte(
    old_cls: Any, api_key: int, version: int, is_request: bool
) -> None:
    schema = SCHEMAS[api_key]
    cls = schema.request if is_request else schema.response
    codec = schema.request_codec(version) if is_request else schema.response_codec(version)
    ours = sample(cls, version)
    if api_key == kp.ApiKey.API_VERSIONS and not is_request:
        ours.error_code = 0
    data = codec.encode(ours)
    theirs = old_cls.decode(io.BytesIO(data))
    if not schema.is_flexible(version):
        assert_same_positional(ours, theirs, cls, version, cls.__name__)
    again = bytes(theirs.encode())
    assert again == data
    assert codec.decode(again) == codec.decode(data)


# ------------------------------------------------------------------------------ hand-built in kafka-python


def _ours(frame: bytes | bytearray) -> tuple[kp.RequestHeader, Any]:
    (payload,) = kp.FrameReceiver(1 << 20).feed(bytes(frame))
    return kp.decode_request(payload)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_request_from_kafka_python(version: int) -> None:
    req_cls = KP[18]["request"]
    kwargs = (
        {"client_software_name": "kafka-python", "client_software_version": "3.0"} if version >= 3 else {}
    )
    req = req_cls[version](**kwargs)
    req.with_header(correlation_id=1, client_id="kafka-python-3")
    header, body = _ours(req.encode(header=True, framed=True))
    assert (header.api_key, header.api_version, header.correlation_id) == (18, version, 1)
    assert header.client_id == "kafka-python-3"
    assert header.header_version == (2 if version >= 3 else 1)
    if version >= 3:
        assert body.client_software_name == "kafka-python"
        assert body.client_software_version == "3.0"


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse

    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(0, 0, 11), ApiVersion(1, 0, 17), ApiVersion(18, 0, 4)],
        throttle_time_ms=5,
    )
    frame = kp.encode_response(kp.RequestHeader(18, version, 99, "x"), body)
    theirs = KP[18]["response"].decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 99
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
        (0, 0, 11),
        (1, 0, 17),
        (18, 0, 4),
    ]
    if version >= 1:
        assert theirs.throttle_time_ms == 5


def test_api_versions_v0_error_reply_understood_by_kafka_python() -> None:
    frame = kp.api_versions_error_response(5, [(18, 0, 4)])
    # a client that asked with v4 gets the v0 layout and a v0 response header
    theirs = KP[18]["response"].decode(frame[4:], version=4, header=True)
    assert theirs.header.correlation_id == 5
    assert theirs.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
def test_metadata_request_from_kafka_python(version: int) -> None:
    cls = KP[3]["request"]
    topic_cls = cls.MetadataRequestTopic
    kwargs: dict[str, Any] = {"topics": [topic_cls(name="alpha"), topic_cls(name="beta")]}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = True
    req = cls[version](**kwargs)
    req.with_header(correlation_id=17, client_id="me")
    header, body = _ours(req.encode(header=True, framed=True))
    assert header.correlation_id == 17 and header.api_version == version
    assert [t.name for t in body.topics] == ["alpha", "beta"]
    if version >= 4:
        assert body.allow_auto_topic_creation is False
    if version >= 8:
        assert body.include_topic_authorized_operations is True


@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_all_topics_null_from_kafka_python(version: int) -> None:
    req = KP[3]["request"][version](topics=None)
    req.with_header(correlation_id=3, client_id=None)
    header, body = _ours(req.encode(header=True, framed=True))
    assert body.topics is None
    assert header.client_id is None


@pytest.mark.parametrize("version", [0, 5, 9, 12])
def test_metadata_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.metadata import (
        MetadataResponse,
        MetadataResponseBroker,
        MetadataResponsePartition,
        MetadataResponseTopic,
    )

    tid = uuid.uuid4()
    body = MetadataResponse(
        brokers=[MetadataResponseBroker(1, "localhost", 9092, "rack-a")],
        cluster_id="Cl-uster_1234567890abc",
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                error_code=0,
                name="alpha",
                topic_id=tid,
                partitions=[
                    MetadataResponsePartition(
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=4,
                        replica_nodes=[1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                ],
            )
        ],
    )
    frame = kp.encode_response(kp.RequestHeader(3, version, 8, "x"), body)
    theirs = KP[3]["response"].decode(frame[4:], version=version, header=True)
    assert theirs.brokers[0].host == "localhost" and theirs.brokers[0].port == 9092
    assert theirs.topics[0].name == "alpha"
    assert theirs.topics[0].partitions[0].isr_nodes == [1]
    if version >= 1:
        assert theirs.controller_id == 1 and theirs.brokers[0].rack == "rack-a"
    if version >= 2:
        assert theirs.cluster_id == "Cl-uster_1234567890abc"
    if version >= 7:
        assert theirs.topics[0].partitions[0].leader_epoch == 4
    if version >= 10:
        assert theirs.topics[0].topic_id == tid


@pytest.mark.parametrize("version", [3, 7, 9, 11])
def test_produce_request_from_kafka_python(version: int) -> None:
    cls = KP[0]["request"]
    blob = b"\x00" * 20 + bytes(range(200))
    topic = cls.TopicProduceData(
        name="events",
        partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=2, records=blob),
            cls.TopicProduceData.PartitionProduceData(index=3, records=None),
        ],
    )
    req = cls[version](transactional_id="tx-1", acks=-1, timeout_ms=30000, topic_data=[topic])
    req.with_header(correlation_id=5, client_id="producer-1")
    header, body = _ours(req.encode(header=True, framed=True))
    assert header.header_version == (2 if version >= 9 else 1)
    assert body.transactional_id == "tx-1" and body.acks == -1 and body.timeout_ms == 30000
    parts = body.topic_data[0].partition_data
    assert body.topic_data[0].name == "events"
    assert parts[0].index == 2 and bytes(parts[0].records) == blob
    assert parts[1].index == 3 and parts[1].records is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_request_from_old_kafka_python(version: int) -> None:
    from kafka.protocol.old import produce as old_produce

    cls = getattr(old_produce, f"ProduceRequest_v{version}")
    req = cls(acks=1, timeout_ms=1500, topic_data=[("legacy", [(0, b"message-set-bytes")])])
    req.with_header(correlation_id=9, client_id="old")
    header, body = _ours(req.encode(header=True, framed=True))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        0,
        version,
        9,
        "old",
    )
    assert body.transactional_id is None and body.acks == 1 and body.timeout_ms == 1500
    assert bytes(body.topic_data[0].partition_data[0].records) == b"message-set-bytes"


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 17])
def test_fetch_request_from_kafka_python(version: int) -> None:
    cls = KP[1]["request"]
    tid = uuid.UUID("0c4f1d6e-7a8b-4c2d-9e0f-112233445566")
    part = cls.FetchTopic.FetchPartition(
        partition=1, current_leader_epoch=3, fetch_offset=1000, log_start_offset=10, partition_max_bytes=65536
    )
    kwargs: dict[str, Any] = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "topics": [cls.FetchTopic(topic="events", topic_id=tid, partitions=[part])],
    }
    if version >= 7:
        kwargs.update(session_id=12, session_epoch=3, forgotten_topics_data=[])
    if version >= 11:
        kwargs["rack_id"] = "rack-b"
    if version <= 14:
        kwargs["replica_id"] = -1
    req = cls[version](**kwargs)
    req.with_header(correlation_id=33, client_id="consumer")
    _, body = _ours(req.encode(header=True, framed=True))
    assert body.max_wait_ms == 500 and body.min_bytes == 1 and body.max_bytes == 52428800
    assert body.isolation_level == 1
    topic = body.topics[0]
    if version >= 13:
        assert topic.topic_id == tid and topic.topic == ""
    else:
        assert topic.topic == "events"
    p = topic.partitions[0]
    assert (p.partition, p.fetch_offset, p.partition_max_bytes) == (1, 1000, 65536)
    if version >= 9:
        assert p.current_leader_epoch == 3
    if version >= 7:
        assert body.session_id == 12 and body.session_epoch == 3
    if version >= 11:
        assert body.rack_id == "rack-b"


@pytest.mark.parametrize("version", [0, 3, 4, 7, 11, 12, 13, 16])
def test_fetch_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.fetch import (
        AbortedTransaction,
        FetchableTopicResponse,
        FetchResponse,
        LeaderIdAndEpoch,
        NodeEndpoint,
        PartitionData,
    )

    tid = uuid.uuid4()
    records = b"\x00\x00\x00\x00\x00\x00\x00\x05" + bytes(100)
    body = FetchResponse(
        throttle_time_ms=1,
        session_id=44,
        responses=[
            FetchableTopicResponse(
                topic="events",
                topic_id=tid,
                partitions=[
                    PartitionData(
                        partition_index=0,
                        high_watermark=500,
                        last_stable_offset=490,
                        log_start_offset=3,
                        current_leader=LeaderIdAndEpoch(2, 7),
                        aborted_transactions=[AbortedTransaction(9, 480)],
                        records=records,
                    )
                ],
            )
        ],
        node_endpoints=[NodeEndpoint(2, "b2", 9093, None)],
    )
    frame = kp.encode_response(kp.RequestHeader(1, version, 123, "x"), body)
    theirs = KP[1]["response"].decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 123
    p = theirs.responses[0].partitions[0]
    assert p.high_watermark == 500 and bytes(p.records) == records
    if version >= 4:
        assert p.last_stable_offset == 490
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(9, 480)]
    if version >= 7:
        assert theirs.session_id == 44
    if version >= 12:
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 7)
    if version >= 13:
        assert theirs.responses[0].topic_id == tid
    else:
        assert theirs.responses[0].topic == "events"
    if version >= 16:
        assert [(n.node_id, n.host, n.port) for n in theirs.node_endpoints] == [(2, "b2", 9093)]


@pytest.mark.parametrize("version", [1, 2, 4, 6, 7, 9])
def test_list_offsets_request_from_kafka_python(version: int) -> None:
    cls = KP[2]["request"]
    part = cls.ListOffsetsTopic.ListOffsetsPartition(partition_index=4, current_leader_epoch=2, timestamp=-2)
    req = cls[version](
        replica_id=-1, isolation_level=1, topics=[cls.ListOffsetsTopic(name="t", partitions=[part])]
    )
    req.with_header(correlation_id=2, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    assert body.replica_id == -1
    p = body.topics[0].partitions[0]
    assert (p.partition_index, p.timestamp) == (4, -2)
    if version >= 2:
        assert body.isolation_level == 1
    if version >= 4:
        assert p.current_leader_epoch == 2


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_request_from_kafka_python(version: int) -> None:
    cls = KP[19]["request"]
    topic = cls.CreatableTopic(
        name="new-topic",
        num_partitions=3,
        replication_factor=1,
        assignments=[],
        configs=[
            cls.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="compact"),
            cls.CreatableTopic.CreatableTopicConfig(name="retention.ms", value=None),
        ],
    )
    req = cls[version](topics=[topic], timeout_ms=10000, validate_only=True)
    req.with_header(correlation_id=8, client_id="admin")
    _, body = _ours(req.encode(header=True, framed=True))
    t = body.topics[0]
    assert (t.name, t.num_partitions, t.replication_factor) == ("new-topic", 3, 1)
    assert [(c.name, c.value) for c in t.configs] == [("cleanup.policy", "compact"), ("retention.ms", None)]
    assert body.timeout_ms == 10000 and body.validate_only is True


@pytest.mark.parametrize("version", [0, 1, 3, 4, 6])
def test_find_coordinator_request_from_kafka_python(version: int) -> None:
    cls = KP[10]["request"]
    kwargs: dict[str, Any] = {"key_type": 0}
    if version <= 3:
        kwargs["key"] = "my-group"
    else:
        kwargs["coordinator_keys"] = ["g1", "g2"]
    req = cls[version](**kwargs)
    req.with_header(correlation_id=4, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    if version <= 3:
        assert body.key == "my-group"
    else:
        assert body.coordinator_keys == ["g1", "g2"]


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_find_coordinator_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse

    body = FindCoordinatorResponse(
        node_id=1, host="h", port=9092, coordinators=[Coordinator("g1", 1, "h", 9092, 0, None)]
    )
    frame = kp.encode_response(kp.RequestHeader(10, version, 6, "c"), body)
    theirs = KP[10]["response"].decode(frame[4:], version=version, header=True)
    if version <= 3:
        assert (theirs.error_code, theirs.node_id, theirs.host, theirs.port) == (0, 1, "h", 9092)
    else:
        c = theirs.coordinators[0]
        assert (c.key, c.node_id, c.host, c.port, c.error_code, c.error_message) == (
            "g1",
            1,
            "h",
            9092,
            0,
            None,
        )


@pytest.mark.parametrize("version", [0, 1, 5, 6, 8, 9])
def test_join_group_request_from_kafka_python(version: int) -> None:
    cls = KP[11]["request"]
    kwargs: dict[str, Any] = {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "member_id": "",
        "group_instance_id": "static-1",
        "protocol_type": "consumer",
        "protocols": [
            cls.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01meta"),
            cls.JoinGroupRequestProtocol(name="roundrobin", metadata=b""),
        ],
        "reason": "rejoin",
    }
    req = cls[version](**kwargs)
    req.with_header(correlation_id=11, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    assert (body.group_id, body.session_timeout_ms, body.member_id, body.protocol_type) == (
        "g",
        10000,
        "",
        "consumer",
    )
    assert [(p.name, p.metadata) for p in body.protocols] == [("range", b"\x00\x01meta"), ("roundrobin", b"")]
    assert body.rebalance_timeout_ms == (30000 if version >= 1 else -1)
    assert body.group_instance_id == ("static-1" if version >= 5 else None)
    assert body.reason == ("rejoin" if version >= 8 else None)


@pytest.mark.parametrize("version", [0, 5, 6, 7, 9])
def test_join_group_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember

    body = JoinGroupResponse(
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader="m-1",
        member_id="m-1",
        members=[JoinGroupResponseMember("m-1", "static-1", b"sub")],
    )
    frame = kp.encode_response(kp.RequestHeader(11, version, 12, "c"), body)
    theirs = KP[11]["response"].decode(frame[4:], version=version, header=True)
    assert (theirs.generation_id, theirs.protocol_name, theirs.leader, theirs.member_id) == (
        3,
        "range",
        "m-1",
        "m-1",
    )
    assert bytes(theirs.members[0].metadata) == b"sub"
    if version >= 5:
        assert theirs.members[0].group_instance_id == "static-1"
    if version >= 7:
        assert theirs.protocol_type == "consumer"


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_sync_group_request_from_kafka_python(version: int) -> None:
    cls = KP[14]["request"]
    req = cls[version](
        group_id="g",
        generation_id=3,
        member_id="m-1",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[cls.SyncGroupRequestAssignment(member_id="m-1", assignment=b"\x00\x01assign")],
    )
    req.with_header(correlation_id=13, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    assert (body.group_id, body.generation_id, body.member_id) == ("g", 3, "m-1")
    assert [(a.member_id, a.assignment) for a in body.assignments] == [("m-1", b"\x00\x01assign")]
    if version >= 5:
        assert (body.protocol_type, body.protocol_name) == ("consumer", "range")


@pytest.mark.parametrize("version", [0, 4, 5])
def test_sync_group_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.sync_group import SyncGroupResponse

    body = SyncGroupResponse(throttle_time_ms=0, error_code=0, protocol_type="consumer", assignment=b"xyz")
    frame = kp.encode_response(kp.RequestHeader(14, version, 14, "c"), body)
    theirs = KP[14]["response"].decode(frame[4:], version=version, header=True)
    assert bytes(theirs.assignment) == b"xyz" and theirs.error_code == 0


@pytest.mark.parametrize("version", [0, 1, 3, 4])
def test_heartbeat_from_kafka_python(version: int) -> None:
    cls = KP[12]["request"]
    req = cls[version](group_id="g", generation_id=9, member_id="m", group_instance_id="i")
    req.with_header(correlation_id=15, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    assert (body.group_id, body.generation_id, body.member_id) == ("g", 9, "m")
    assert body.group_instance_id == ("i" if version >= 3 else None)
    from kctl.protocol.messages.heartbeat import HeartbeatResponse

    frame = kp.encode_response(kp.RequestHeader(12, version, 15, "c"), HeartbeatResponse(7, 27))
    theirs = KP[12]["response"].decode(frame[4:], version=version, header=True)
    assert theirs.error_code == 27
    if version >= 1:
        assert theirs.throttle_time_ms == 7


@pytest.mark.parametrize("version", [2, 5, 6, 7, 8, 9])
def test_offset_commit_request_from_kafka_python(version: int) -> None:
    cls = KP[8]["request"]
    part = cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=1234, committed_leader_epoch=5, committed_metadata="meta"
    )
    req = cls[version](
        group_id="g",
        generation_id_or_member_epoch=3,
        member_id="m",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[cls.OffsetCommitRequestTopic(name="t", partitions=[part])],
    )
    req.with_header(correlation_id=16, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id) == ("g", 3, "m")
    p = body.topics[0].partitions[0]
    assert (p.partition_index, p.committed_offset, p.committed_metadata) == (0, 1234, "meta")
    if version >= 6:
        assert p.committed_leader_epoch == 5


@pytest.mark.parametrize("version", [0, 1])
def test_legacy_offset_commit_from_old_kafka_python(version: int) -> None:
    from kafka.protocol.old import commit as old_commit

    cls = getattr(old_commit, f"OffsetCommitRequest_v{version}")
    if version == 0:
        req = cls(group_id="g", topics=[("t", [(0, 42, "m")])])
    else:
        req = cls(
            group_id="g",
            consumer_group_generation_id=2,
            member_id="mem",
            topics=[("t", [(0, 42, 1700000000000, "m")])],
        )
    req.with_header(correlation_id=1, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    p = body.topics[0].partitions[0]
    assert (body.group_id, p.partition_index, p.committed_offset, p.committed_metadata) == ("g", 0, 42, "m")
    if version == 1:
        assert (body.generation_id_or_member_epoch, body.member_id, p.commit_timestamp) == (
            2,
            "mem",
            1700000000000,
        )


@pytest.mark.parametrize("version", [1, 2, 5, 6, 7, 8, 9])
def test_offset_fetch_request_from_kafka_python(version: int) -> None:
    cls = KP[9]["request"]
    if version <= 7:
        req = cls[version](
            group_id="g",
            topics=[cls.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])],
            require_stable=True,
        )
    else:
        group = cls.OffsetFetchRequestGroup(
            group_id="g",
            member_id="m",
            member_epoch=4,
            topics=[
                cls.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1, 2])
            ],
        )
        req = cls[version](groups=[group], require_stable=True)
    req.with_header(correlation_id=18, client_id="c")
    _, body = _ours(req.encode(header=True, framed=True))
    if version <= 7:
        assert body.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in body.topics] == [("t", [0, 1, 2])]
    else:
        g = body.groups[0]
        assert g.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in g.topics] == [("t", [0, 1, 2])]
        if version >= 9:
            assert (g.member_id, g.member_epoch) == ("m", 4)
    if version >= 7:
        assert body.require_stable is True


@pytest.mark.parametrize("version", [1, 3, 5, 7, 8])
def test_offset_fetch_response_to_kafka_python(version: int) -> None:
    from kctl.protocol.messages.offset_fetch import (
        OffsetFetchResponse,
        OffsetFetchResponseGroup,
        OffsetFetchResponsePartition,
        OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic,
        OffsetFetchResponseTopics,
    )

    body = OffsetFetchResponse(
        throttle_time_ms=2,
        topics=[OffsetFetchResponseTopic("t", [OffsetFetchResponsePartition(0, 99, 4, None, 0)])],
        groups=[
            OffsetFetchResponseGroup(
                "g", [OffsetFetchResponseTopics("t", [OffsetFetchResponsePartitions(0, 99, 4, "", 0)])]
            )
        ],
    )
    frame = kp.encode_response(kp.RequestHeader(9, version, 19, "c"), body)
    theirs = KP[9]["response"].decode(frame[4:], version=version, header=True)
    if version <= 7:
        p = theirs.topics[0].partitions[0]
        assert (p.partition_index, p.committed_offset, p.metadata) == (0, 99, None)
        if version >= 5:
            assert p.committed_leader_epoch == 4
    else:
        p = theirs.groups[0].topics[0].partitions[0]
        assert (theirs.groups[0].group_id, p.committed_offset, p.committed_leader_epoch) == ("g", 99, 4)
