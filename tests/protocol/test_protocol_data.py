"""Versioned data messages (kctl.protocol.data): the int16 version prefix, round trips of every
declared data schema at every version, the compatibility rules (newer versions, writers that stop
early, trailing bytes), their separation from the API registry, and the consumer embedded protocol
against kafka-python's two independent implementations (its JSON-spec classes and its older
hand-written structs)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kctl.protocol.compiler import compile_struct
from kctl.protocol.data import DataSchema, data_schema_of, decode_versioned, encode_versioned
from kctl.protocol.exceptions import ProtocolDecodeError, ProtocolEncodeError
from kctl.protocol.messages import consumer_protocol, group_coordinator_records
from kctl.protocol.messages.consumer_protocol import (
    ASSIGNMENT,
    SUBSCRIPTION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ConsumerProtocolTopicPartition,
)
from kctl.protocol.registry import SCHEMAS
from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import (
    BYTES,
    INT32,
    INT64,
    STRING,
    ArrayType,
    Field,
    PrimitiveType,
    array,
    is_struct_type,
    schema_of,
    struct,
)

DATA_MODULES = (consumer_protocol, group_coordinator_records)
DATA_SCHEMAS = [v for m in DATA_MODULES for v in vars(m).values() if isinstance(v, DataSchema)]
CASES = [
    pytest.param(s, v, id=f"{s.name}-v{v}")
    for s in DATA_SCHEMAS
    for v in range(s.min_version, s.max_version + 1)
]


def sample(cls: type, version: int, seed: int = 1) -> Any:
    """An instance with a non-default value in every field present at ``version`` (defaults in the
    others, which is what a decoder at ``version`` gives back)."""
    values: dict[str, Any] = {}
    for i, f in enumerate(schema_of(cls).fields):
        if not f.present(version):
            continue
        n = seed * 10 + i
        t = f.type
        if isinstance(t, ArrayType):
            el = t.element
            if is_struct_type(el):
                values[f.name] = [sample(el, version, n), sample(el, version, n + 1)]
            elif el is STRING:
                values[f.name] = [f"s{n}", "é✓"]
            else:
                values[f.name] = [n, -n, 2**31 - 1]
        elif is_struct_type(t):
            values[f.name] = sample(t, version, n)
        elif t is STRING:
            values[f.name] = f"{f.name}-{n}-é"
        elif t is BYTES:
            values[f.name] = bytes(range(n % 7 + 1))
        elif isinstance(t, PrimitiveType):
            values[f.name] = n + (2**40 if t is INT64 else 0)
    return cls(**values)


def test_every_data_schema_is_found() -> None:
    names = {s.name for s in DATA_SCHEMAS}
    assert names == {
        "ConsumerProtocolSubscription",
        "ConsumerProtocolAssignment",
        "StickyAssignorUserData",
        "OffsetCommitKey",
        "GroupMetadataKey",
        "OffsetCommitValue",
        "GroupMetadataValue",
    }


@pytest.mark.parametrize(("schema", "version"), CASES)
def test_round_trip_at_every_version(schema: DataSchema, version: int) -> None:
    obj = sample(schema.cls, version)
    data = encode_versioned(obj, version)
    assert data[:2] == version.to_bytes(2, "big")
    assert decode_versioned(schema.cls, data) == (version, obj)
    assert schema.encode_body(obj, version) == data[2:]
    assert schema.decode_body(data[2:], version) == obj
    # a dict of the fields encodes the same
    as_dict = {f.name: getattr(obj, f.name) for f in schema_of(schema.cls).fields}
    assert schema.encode(as_dict, version) == data
    # bytes that end inside the last field are an error, whatever the compatibility rules
    with pytest.raises(ProtocolDecodeError):
        schema.decode(data[:-1])


@pytest.mark.parametrize("schema", DATA_SCHEMAS, ids=lambda s: s.name)
def test_versions_outside_the_range_are_refused(schema: DataSchema) -> None:
    obj = sample(schema.cls, schema.max_version)
    with pytest.raises(ProtocolEncodeError, match="unsupported version"):
        schema.encode(obj, schema.max_version + 1)
    with pytest.raises(ProtocolEncodeError, match="unsupported version"):
        schema.encode(obj, schema.min_version - 1)
    with pytest.raises(ProtocolDecodeError, match="unsupported version"):
        schema.decode((schema.min_version - 1).to_bytes(2, "big", signed=True))
    newer = (schema.max_version + 1).to_bytes(2, "big") + schema.encode_body(obj, schema.max_version)
    if schema.read_newer:
        assert schema.decode(newer + b"appended") == (schema.max_version + 1, obj)
    else:
        with pytest.raises(ProtocolDecodeError, match="unsupported version"):
            schema.decode(newer)
    with pytest.raises(ProtocolDecodeError, match="too short"):
        schema.decode(b"\x00")


def test_trailing_bytes_are_an_error_unless_allowed() -> None:
    obj = ConsumerProtocolAssignment([ConsumerProtocolTopicPartition("t", [1])], b"u")
    data = ASSIGNMENT.encode(obj, 3) + b"\x00"
    with pytest.raises(ProtocolDecodeError, match="1 trailing bytes"):
        ASSIGNMENT.decode(data)
    assert ASSIGNMENT.decode(data, allow_trailing=True) == (3, obj)


def test_writers_may_stop_before_the_ignorable_fields_only() -> None:
    v0 = SUBSCRIPTION.encode(ConsumerProtocolSubscription(["t"], b"u"), 0)
    stopped = b"\x00\x03" + v0[2:]  # claims v3, ends after user_data
    assert SUBSCRIPTION.decode(stopped) == (3, ConsumerProtocolSubscription(["t"], b"u", [], -1, None))
    with_generation = stopped + b"\x00\x00\x00\x00" + (7).to_bytes(4, "big")  # no owned, generation 7
    assert SUBSCRIPTION.decode(with_generation)[1].generation_id == 7
    with pytest.raises(ProtocolDecodeError, match="generation_id"):
        SUBSCRIPTION.decode(with_generation[:-1])  # ends inside generation_id
    with pytest.raises(ProtocolDecodeError, match="user_data"):
        SUBSCRIPTION.decode(b"\x00\x03\x00\x00\x00\x00")  # user_data is not ignorable
    assert ASSIGNMENT.decode(b"\x00\x01\x00\x00\x00\x00") == (1, ConsumerProtocolAssignment([], None))


def test_may_end_before_is_checked() -> None:
    Thing = struct("Thing", Field("a", INT32), Field("b", INT32))
    with pytest.raises(ValueError, match="names no field"):
        DataSchema("Thing", "0", "none", Thing, may_end_before="c")
    with pytest.raises(ValueError, match="non-flexible"):
        DataSchema("Thing", "0-1", "1+", Thing, may_end_before="b")
    with pytest.raises(ValueError, match="non-flexible"):
        compile_struct(Thing, 0, True, may_end_before="b")
    with pytest.raises(ValueError, match="no field"):
        compile_struct(Thing, 0, False, may_end_before="c")
    Tagged = struct("Tagged", Field("a", INT32, tag=0))
    with pytest.raises(ValueError, match="tagged"):
        DataSchema("Tagged", "0", "none", Tagged)


def test_flexible_data_versions_use_compact_encodings_and_tags() -> None:
    Thing = struct("Thing", Field("name", STRING), Field("blob", BYTES), Field("ids", array(INT32)))
    schema = DataSchema("Thing", "0-1", "1+", Thing)
    assert schema.encode(Thing("ab", b"c", [5]), 0) == (
        b"\x00\x00" + b"\x00\x02ab" + b"\x00\x00\x00\x01c" + b"\x00\x00\x00\x01\x00\x00\x00\x05"
    )
    flexible = b"\x00\x01" + b"\x03ab" + b"\x02c" + b"\x02\x00\x00\x00\x05" + b"\x00"  # tag section
    assert schema.encode(Thing("ab", b"c", [5]), 1) == flexible


def test_data_schema_of_plain_structs_is_a_type_error() -> None:
    Thing = struct("Thing", Field("a", INT32))
    with pytest.raises(TypeError):
        data_schema_of(Thing)
    with pytest.raises(TypeError):
        encode_versioned(Thing(1), 0)
    assert data_schema_of(ConsumerProtocolSubscription) is SUBSCRIPTION


def test_data_modules_stay_out_of_the_api_registry() -> None:
    """Data modules declare DataSchemas and no ApiSchema (nor a ``SCHEMA``), so a registry that
    collects ApiSchemas from ``kctl.protocol.messages`` never takes them for APIs."""
    for module in DATA_MODULES:
        assert not hasattr(module, "SCHEMA")
        assert not [v for v in vars(module).values() if isinstance(v, ApiSchema)]
        assert [v for v in vars(module).values() if isinstance(v, DataSchema)]
    api_names = {s.name for s in SCHEMAS.values()}
    assert not api_names & {s.name for s in DATA_SCHEMAS}
    assert not any(isinstance(s, DataSchema) for s in SCHEMAS.values())


def test_keys_are_hashable_values_compare_by_fields() -> None:
    from kctl.protocol.messages.group_coordinator_records import GroupMetadataKey, OffsetCommitKey

    assert {OffsetCommitKey("g", "t", 1), OffsetCommitKey("g", "t", 1), GroupMetadataKey("g")} == {
        GroupMetadataKey("g"),
        OffsetCommitKey("g", "t", 1),
    }
    assert OffsetCommitKey("g", "t", 1) != OffsetCommitKey("g", "t", 2)
    assert dataclasses.is_dataclass(OffsetCommitKey)


# -- kafka-python's implementations of the consumer embedded protocol -------------------------------
import kafka.protocol.consumer.metadata as kp_meta  # noqa: E402  (kafka-python: a hard test dependency)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("user_data", [None, b"", b"\x00\x01data"])
def test_kafka_python_reads_our_subscription_and_assignment(version: int, user_data: bytes | None) -> None:
    ours = sample(ConsumerProtocolSubscription, version)
    ours.user_data = user_data
    theirs = kp_meta.ConsumerProtocolSubscription.decode(SUBSCRIPTION.encode(ours, version))
    assert theirs.version == version
    assert (theirs.topics, theirs.user_data) == (ours.topics, user_data)
    if version >= 1:
        assert [(tp.topic, tp.partitions) for tp in theirs.owned_partitions] == [
            (tp.topic, tp.partitions) for tp in ours.owned_partitions
        ]
    if version >= 2:
        assert theirs.generation_id == ours.generation_id
    if version >= 3:
        assert theirs.rack_id == ours.rack_id
    assignment = sample(ConsumerProtocolAssignment, version)
    assignment.user_data = user_data
    theirs_a = kp_meta.ConsumerProtocolAssignment.decode(ASSIGNMENT.encode(assignment, version))
    assert [(tp.topic, tp.partitions) for tp in theirs_a.assigned_partitions] == [
        (tp.topic, tp.partitions) for tp in assignment.assigned_partitions
    ]
    assert theirs_a.user_data == user_data


def test_kafka_python_old_structs_match_v0() -> None:
    import kafka.protocol.old.consumer_protocol as old

    theirs = old.ConsumerProtocolMemberMetadata_v0(0, ["a", "b"], b"xyz").encode()
    assert SUBSCRIPTION.encode(ConsumerProtocolSubscription(["a", "b"], b"xyz"), 0) == theirs
    assert SUBSCRIPTION.decode(theirs) == (0, ConsumerProtocolSubscription(["a", "b"], b"xyz"))
    tps = [ConsumerProtocolTopicPartition("a", [0, 1]), ConsumerProtocolTopicPartition("b", [7])]
    theirs = old.ConsumerProtocolMemberAssignment_v0(0, [("a", [0, 1]), ("b", [7])], b"").encode()
    assert ASSIGNMENT.encode(ConsumerProtocolAssignment(tps, b""), 0) == theirs
    assert ASSIGNMENT.decode(theirs) == (0, ConsumerProtocolAssignment(tps, b""))
    ours = ASSIGNMENT.encode(ConsumerProtocolAssignment(tps, b"u"), 0)
    decoded = old.ConsumerProtocolMemberAssignment_v0.decode(ours)
    assert decoded.partitions() == [("a", 0), ("a", 1), ("b", 7)] and decoded.user_data == b"u"


def test_sticky_user_data_is_kafka_pythons_without_its_version_prefix() -> None:
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData as KpSticky

    from kctl.protocol.messages.consumer_protocol import STICKY_ASSIGNOR_USER_DATA, StickyAssignorUserData

    ours = StickyAssignorUserData([ConsumerProtocolTopicPartition("a", [0, 1])], 9)
    theirs = KpSticky([("a", [0, 1])], 9).encode()
    assert theirs[:2] == b"\x00\x01"
    assert STICKY_ASSIGNOR_USER_DATA.encode_body(ours, 1) == theirs[2:]
    assert STICKY_ASSIGNOR_USER_DATA.decode(theirs) == (1, ours)
    assert STICKY_ASSIGNOR_USER_DATA.decode_body(theirs[2:-4], 1).generation == -1  # v0 layout
