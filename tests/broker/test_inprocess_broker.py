"""kctl.testing's in-process broker (a real Broker built without listeners, requests through its
dispatch), and what moved out of the Broker with it (issue 23 §3): the group coordinator's lookup that
creates __consumer_offsets on first use, and the topic admin's auto-creation for Metadata and
Produce."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import make_batch

from kctl.protocol import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.testing.helpers import wait_for
from kctl.testing.inprocess import InProcessBroker

AutoCreating = Callable[..., InProcessBroker]


def _produce(broker: InProcessBroker, topic: str) -> int:
    data = [
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=make_batch(1))])
    ]
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=data)
    return int(broker.call(request).responses[0].partition_responses[0].error_code)


def test_the_broker_is_built_before_it_is_started_and_refuses_unknown_requests(
    inprocess_broker: InProcessBroker,
) -> None:
    broker = inprocess_broker.broker
    assert broker.servers == []  # nothing listens
    assert broker.metadata.controller_id == broker.broker_id  # registered, the controller
    with pytest.raises(TypeError, match="not a request class"):
        inprocess_broker.call(object())
    with pytest.raises(ValueError, match="v99"):
        inprocess_broker.call(MetadataRequest(topics=None), version=99)


def test_find_coordinator_creates_the_offsets_topic_on_first_use(inprocess_broker: InProcessBroker) -> None:
    assert inprocess_broker.broker.metadata.topic("__consumer_offsets") is None

    def coordinator() -> int | None:
        [answer] = inprocess_broker.call(
            FindCoordinatorRequest(key_type=0, coordinator_keys=["g"])
        ).coordinators
        return answer.node_id if answer.error_code == ErrorCode.NONE else None

    assert wait_for(lambda: coordinator() == 0, "the group's coordinator")
    record = inprocess_broker.broker.metadata.topic("__consumer_offsets")
    assert record is not None and record.configs.get("cleanup.policy") == "compact"


def test_without_auto_creation_an_unknown_topic_stays_unknown(inprocess_broker: InProcessBroker) -> None:
    assert _produce(inprocess_broker, "absent") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    request = MetadataRequest(topics=[MetadataRequestTopic(name="absent")], allow_auto_topic_creation=True)
    [topic] = inprocess_broker.call(request).topics
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert inprocess_broker.broker.metadata.topic("absent") is None


def test_metadata_and_produce_auto_create_topics(inprocess_broker_factory: AutoCreating) -> None:
    broker = inprocess_broker_factory({"auto.create.topics.enable": "true", "num.partitions": "2"})
    request = MetadataRequest(topics=[MetadataRequestTopic(name="asked")], allow_auto_topic_creation=True)
    broker.call(request)
    asked = broker.broker.metadata.topic("asked")
    assert asked is not None and len(asked.assignment) == 2
    assert wait_for(
        lambda: _produce(broker, "produced") == ErrorCode.NONE, "a produce to an auto-created topic"
    )
