"""The registry's values and Kafka's znode encodings, without any server: identifiers, topic name
and replica assignment validation, and decoding the formats older Kafka versions wrote."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from kctl.zk.model import (
    BrokerRegistration,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    PartitionState,
    TopicRecord,
    decode_uuid,
    encode_uuid,
    parse_endpoint,
    random_kafka_uuid,
    validate_new_partitions,
    validate_replica_assignment,
    validate_topic_name,
)
from kctl.zk.znodes import (
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    ZNodeDecodeError,
)


def test_kafka_uuids() -> None:
    for _ in range(200):
        value = random_kafka_uuid()
        text = encode_uuid(value)
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", text) and not text.startswith("-")
        assert decode_uuid(text) == value
    assert encode_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    with pytest.raises(ValueError):
        decode_uuid("not base64!!")
    with pytest.raises(ValueError):
        decode_uuid("A" * 30)


def test_broker_registration_listeners() -> None:
    plain = BrokerRegistration(1, "h", 9092)
    assert plain.listeners == ("PLAINTEXT://h:9092",)
    assert BrokerRegistration(1, "::1", 9092).listeners == ("PLAINTEXT://[::1]:9092",)
    assert parse_endpoint("SSL://[::1]:9093") == ("SSL", "::1", 9093)
    custom = BrokerRegistration(1, "h", 9092, listeners=["INTERNAL://h:9092", "SASL_SSL://h:9093"])  # type: ignore[arg-type]
    assert custom.listeners == ("INTERNAL://h:9092", "SASL_SSL://h:9093")
    assert custom.security_protocol_map == {"INTERNAL": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    with pytest.raises(ValueError):
        BrokerRegistration(1, "h", 9092, listeners=("h:9092",))


def test_topic_record() -> None:
    record = TopicRecord("t", uuid.uuid4(), {1: [2, 1], 0: [1, 2]}, {})  # type: ignore[dict-item]
    assert list(record.assignment) == [0, 1] and record.assignment[1] == (2, 1)
    assert (record.partitions, record.replication_factor) == (2, 2)
    assert PartitionState(1, 0, [1]).isr == (1,)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "é", "x" * 250])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_legal_topic_names() -> None:
    for name in ("a", "__consumer_offsets", "my.topic-1_x", "x" * 249):
        validate_topic_name(name)


def test_replica_assignment_validation() -> None:
    assert validate_replica_assignment({1: [2], 0: [1]}) == {0: (1,), 1: (2,)}  # type: ignore[dict-item]
    for bad in ({}, {1: (1,)}, {0: ()}, {0: (1, 1)}, {0: (-1,)}, {0: (1,), 1: (1, 2)}):
        with pytest.raises(InvalidReplicaAssignmentError):
            validate_replica_assignment(bad)
    existing = {0: (1, 2), 1: (2, 1)}
    assert validate_new_partitions(existing, {3: (1, 2), 2: (2, 1)}) == {2: (2, 1), 3: (1, 2)}
    for bad_partitions in ({}, {1: (1, 2)}, {3: (1, 2)}):
        with pytest.raises(InvalidPartitionsError):
            validate_new_partitions(existing, bad_partitions)
    with pytest.raises(InvalidReplicaAssignmentError):
        validate_new_partitions(existing, {2: (1, 1)})


def test_znode_round_trips() -> None:
    registration = BrokerRegistration(5, "h", 1, rack="r", listeners=("PLAINTEXT://h:1", "SSL://h:2"))
    assert BrokerIdZNode.decode(5, BrokerIdZNode.encode(registration)) == registration
    assert ClusterIdZNode.decode(ClusterIdZNode.encode("abc")) == "abc"
    assert ControllerZNode.decode(ControllerZNode.encode(3, 1700000000000)) == 3
    assert ControllerEpochZNode.decode(ControllerEpochZNode.encode(12)) == 12
    topic_id = uuid.uuid4()
    assert TopicZNode.decode("t", TopicZNode.encode(topic_id, {0: (1, 2)})) == (topic_id, {0: (1, 2)})
    state = PartitionState(2, 3, (2, 1), 4, partition_epoch=9)
    assert TopicPartitionStateZNode.decode("t", 0, TopicPartitionStateZNode.encode(state), 9) == state
    assert b"eligible" not in TopicPartitionStateZNode.encode(state)  # Kafka's format unless there are any
    eligible = PartitionState(2, 3, (2,), 4, partition_epoch=9, elr=(3, 1))
    assert TopicPartitionStateZNode.decode("t", 0, TopicPartitionStateZNode.encode(eligible), 9) == eligible
    with pytest.raises(ZNodeDecodeError):
        TopicPartitionStateZNode.decode(
            "t",
            0,
            b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
            b'"eligible_leader_replicas":"x"}',
            1,
        )
    assert ConfigEntityZNode.decode("topics", "t", ConfigEntityZNode.encode({"a": "1"})) == {"a": "1"}
    notification = ConfigEntityChangeNotificationSequenceZNode.encode("topics", "t")
    assert ConfigEntityChangeNotificationSequenceZNode.decode(notification) == ("topics", "t")


def test_znodes_are_compact_json() -> None:
    assert ClusterIdZNode.encode("abc") == b'{"version":"1","id":"abc"}'
    assert (
        ControllerZNode.encode(3, 17)
        == b'{"version":2,"brokerid":3,"timestamp":"17","kraftControllerEpoch":-1}'
    )
    state = TopicPartitionStateZNode.encode(PartitionState(1, 0, (1,), 2))
    assert state == b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":2}'


def test_older_and_odd_formats_decode() -> None:
    assert ControllerZNode.decode(b"7") == 7  # Kafka 0.8
    assert ControllerZNode.decode(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert ConfigEntityZNode.decode("topics", "t", None) == {}
    assert ConfigEntityZNode.decode("topics", "t", b'{"version":1}') == {}
    assert TopicZNode.decode("t", b'{"version":1}') == (None, {})
    state = {
        "version": 1,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1],
        "controller_epoch": 0,
        "leader_recovery_state": 1,
    }  # Kafka adds this only while a leader is recovering
    assert TopicPartitionStateZNode.decode("t", 0, json.dumps(state).encode(), 0).leader == 1
    assert ConfigEntityChangeNotificationSequenceZNode.sequence_number("config_change_0000000042") == 42
    assert ConfigEntityChangeNotificationSequenceZNode.sequence_number("other") is None


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"not json",
        b"[1]",
        b'{"version":1,"leader":"x","leader_epoch":0,"isr":[],"controller_epoch":0}',
        b'{"version":1,"leader":1,"leader_epoch":0,"isr":["a"],"controller_epoch":0}',
    ],
)
def test_malformed_partition_state(data: bytes | None) -> None:
    with pytest.raises(ZNodeDecodeError):
        TopicPartitionStateZNode.decode("t", 0, data, 0)


def test_malformed_topic_and_broker() -> None:
    with pytest.raises(ZNodeDecodeError):
        TopicZNode.decode("t", b'{"version":3,"topic_id":"short","partitions":{}}')
    with pytest.raises(ZNodeDecodeError):
        TopicZNode.decode("t", b'{"version":3,"partitions":{"x":[1]}}')
    with pytest.raises(ZNodeDecodeError):
        BrokerIdZNode.decode(1, b'{"version":0,"host":"h","port":1,"jmx_port":-1}')
    with pytest.raises(ZNodeDecodeError):
        BrokerIdZNode.decode(1, b'{"version":4,"endpoints":["nonsense"],"jmx_port":-1}')
