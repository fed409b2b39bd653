"""Consumer groups with kafka-python 3.x KafkaConsumer(group_id=...) against a real `kctl broker
start`: the scenarios of test_groups_confluent.py (shared in group_clients.py) with three kafka-python
members — every partition owned by exactly one member, a clean leave and a crash (SIGKILL, noticed
after the session timeout) hand partitions over, every record consumed at least once, exactly once
with clean shutdowns and synchronous commits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from group_clients import BROKER_PROPERTIES, clean_leave_scenario, crash_scenario
from raw_kafka import running_broker

from kctl.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "groups-kp") as process:
        yield process


def test_three_members_split_partitions_and_a_clean_leave_hands_over_exactly_once(
    broker: BrokerProcess,
) -> None:
    clean_leave_scenario(broker, ["kp"] * 3)
    assert broker.running, broker.log_tail()


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(broker: BrokerProcess) -> None:
    crash_scenario(broker, "kp")
    assert broker.running, broker.log_tail()


def test_a_group_mixing_kafka_python_and_confluent_kafka_members(broker: BrokerProcess) -> None:
    """Both clients offer the "range" assignor with the consumer protocol: they form one group, the
    broker picks the protocol they share and passes the subscriptions to whichever client leads."""
    clean_leave_scenario(broker, ["kp", "ck", "kp"])
    assert broker.running, broker.log_tail()
