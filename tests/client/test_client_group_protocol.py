"""The consumer embedded protocol (kctl.client.consumer_protocol): byte-compatible with Kafka's
ConsumerProtocol as kafka-python (an independent implementation of Kafka's message specs) writes it."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from kctl.client.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    StickyUserData,
    Subscription,
    decode_generation,
    encode_generation,
)
from kctl.common.topic_partition import TopicPartition

OWNED = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 3))


def kp_subscription(version: int) -> KpSubscription:
    fields = {"version": version, "topics": ["a", "b"], "user_data": b"\x00\x01xyz"}
    if version >= 1:
        fields["owned_partitions"] = [
            KpSubscription.TopicPartition(topic="a", partitions=[0, 1]),
            KpSubscription.TopicPartition(topic="b", partitions=[3]),
        ]
    if version >= 2:
        fields["generation_id"] = 42
    if version >= 3:
        fields["rack_id"] = "rack-1"
    return KpSubscription(**fields)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_kafka_python(version: int) -> None:
    ours = Subscription(
        topics=("a", "b"),
        user_data=b"\x00\x01xyz",
        owned_partitions=OWNED if version >= 1 else (),
        generation_id=42 if version >= 2 else -1,
        rack_id="rack-1" if version >= 3 else None,
        version=version,
    )
    theirs = kp_subscription(version).encode()
    assert ours.encode() == theirs
    assert Subscription.decode(theirs) == ours


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_bytes_match_kafka_python(version: int) -> None:
    theirs = KpAssignment(
        version=version,
        assigned_partitions=[
            KpAssignment.TopicPartition(topic="a", partitions=[0, 1]),
            KpAssignment.TopicPartition(topic="b", partitions=[3]),
        ],
        user_data=None,
    ).encode()
    ours = Assignment(OWNED, None, version)
    assert ours.encode() == theirs
    assert Assignment.decode(theirs) == ours


def test_newer_versions_are_read_as_far_as_known() -> None:
    data = bytearray(Subscription(("t",), None, OWNED, 7, "r", version=3).encode())
    data[0:2] = (9).to_bytes(2, "big")  # a future version with a field appended
    decoded = Subscription.decode(bytes(data) + b"\x00\x00\x00\x05future")
    assert (decoded.topics, decoded.owned_partitions, decoded.generation_id, decoded.rack_id) == (
        ("t",),
        OWNED,
        7,
        "r",
    )
    assignment = bytearray(Assignment(OWNED, b"u").encode())
    assignment[0:2] = (5).to_bytes(2, "big")
    assert Assignment.decode(bytes(assignment) + b"more").partitions == OWNED


def test_writers_that_stop_early_and_empty_assignments() -> None:
    # a v1 subscription without owned partitions (some clients leave the ignorable fields out)
    v0_body = Subscription(("t",), None, version=0).encode()[2:]
    decoded = Subscription.decode(b"\x00\x01" + v0_body)
    assert decoded.owned_partitions == () and decoded.version == 1
    assert Assignment.decode(b"") == Assignment(())
    assert Assignment.decode(Assignment((), None).encode()) == Assignment((), None)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        b"\x00\x00\x00\x00\x00\x05\x00\x01a",
        b"\x00\x00\x00\x00\x00\x01\x00\x09abc",
        b"\xff\xff\x00\x00",
    ],
)
def test_malformed_subscriptions_raise(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        Subscription.decode(data)


def test_sticky_user_data_kafka_layout_and_kafka_python_layout() -> None:
    data = StickyUserData(OWNED, 9)
    encoded = data.encode()
    # Kafka's StickyAssignorUserData v1: [topic, [partition]] then int32 generation, no version prefix
    assert encoded[:4] == b"\x00\x00\x00\x02"
    assert encoded[-4:] == (9).to_bytes(4, "big")
    assert StickyUserData.decode(encoded) == data
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

    prefixed = StickyAssignorUserData([("a", [0, 1]), ("b", [3])], 9).encode()
    assert StickyUserData.decode(prefixed) == data
    assert decode_generation(encode_generation(12)) == 12
    assert decode_generation(None) == -1


# -- group configuration --------------------------------------------------------------------------
def test_group_config_from_consumer_properties() -> None:
    from kctl.client.group.assignors import RebalanceProtocol
    from kctl.client.group_config import GroupConfig

    config = GroupConfig.from_properties(
        {
            "group.id": "billing",
            "group.instance.id": "host-1",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": "1000",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",  # a consumer setting: not the group's
            "client.id": "tool",
        }
    )
    assert (config.group_id, config.group_instance_id, config.session_timeout_ms, config.client_id) == (
        "billing",
        "host-1",
        10000,
        "tool",
    )
    assert config.partition_assignment_strategy == "cooperative-sticky"
    assert config.rebalance_protocol is RebalanceProtocol.COOPERATIVE
    assert config.enable_auto_commit is False
    assert config.unknown == ("auto.offset.reset",)
    assert GroupConfig().partition_assignment_strategy == "range"
    assert GroupConfig().rebalance_protocol is RebalanceProtocol.EAGER


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"heartbeat.interval.ms": "50000"}, "must be lower than session.timeout.ms"),
        ({"partition.assignment.strategy": "fair"}, "unknown partition assignor"),
        ({"enable.auto.commit": "maybe"}, "expected true or false"),
    ],
)
def test_group_config_errors(properties: dict[str, str], message: str) -> None:
    from kctl.client.config import ClientConfigError
    from kctl.client.group_config import GroupConfig

    with pytest.raises(ClientConfigError, match=message):
        GroupConfig.from_properties(properties)
