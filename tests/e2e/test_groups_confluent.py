"""Consumer groups with confluent-kafka (librdkafka) against a real `kctl broker start`: three members
share a six-partition topic — every partition owned by exactly one member (the members' rebalance
callbacks and DescribeGroups agree), a clean leave and a crash (SIGKILL, noticed after the session
timeout) hand partitions over, and every record is consumed at least once (exactly once with clean
shutdowns and synchronous commits). The scenarios live in group_clients.py, shared with
test_groups_kafka_python.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from group_clients import BROKER_PROPERTIES, clean_leave_scenario, crash_scenario
from raw_kafka import running_broker

from kctl.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "groups-ck") as process:
        yield process


def test_three_members_split_partitions_and_a_clean_leave_hands_over_exactly_once(
    broker: BrokerProcess,
) -> None:
    clean_leave_scenario(broker, ["ck"] * 3)
    assert broker.running, broker.log_tail()


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(broker: BrokerProcess) -> None:
    crash_scenario(broker, "ck")
    assert broker.running, broker.log_tail()
