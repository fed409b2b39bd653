"""The transaction APIs' ACL checks, as Kafka's (issue 27 §1), with confluent-kafka on a broker with an
authorizer that allows what no ACL covers: WRITE denied on a transactional id makes
``init_transactions()`` fail at once with the fatal TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(InitProducerId); DESCRIBE denied fails FindCoordinator the same way; an id without ACLs works. As in
Kafka, allow.everyone.if.no.acl.found stops applying to an id once some ACL covers it, so the id denied
WRITE is allowed DESCRIBE explicitly."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from cli_support import kctl
from raw_kafka import RawConnection, create_topic, unique
from txn_support import consume_all

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory

TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    broker: BrokerProcess = module_broker_factory(
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    acls = (("--deny-principal", "Write", "no-write-"), ("--allow-principal", "Describe", "no-write-"),
            ("--deny-principal", "Describe", "hidden-"))  # fmt: skip
    for permission, operation, prefix in acls:  # an ACL on an id ends allow.everyone.if.no.acl.found there
        added = kctl(
            "acl", "add", permission, "User:ANONYMOUS", "--operation", operation,
            "--transactional-id", prefix, "--resource-pattern-type", "prefixed", "-b", broker.bootstrap,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
    return broker


def _init(broker: BrokerProcess, transactional_id: str) -> ck.Producer:
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    return producer


@pytest.mark.parametrize("prefix", ["no-write-", "hidden-"])
def test_a_denied_transactional_id_fails_init_transactions_at_once(
    broker: BrokerProcess, prefix: str
) -> None:
    with pytest.raises(ck.KafkaException) as raised:
        _init(broker, unique(prefix))
    error = raised.value.args[0]
    assert error.code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    assert error.fatal(), error


def test_find_coordinator_needs_describe(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap) as conn:
        request = FindCoordinatorRequest(
            key_type=1, coordinator_keys=[unique("hidden-"), unique("no-write-")]
        )
        hidden, writable = conn.request(kp.ApiKey.FIND_COORDINATOR, 4, request).coordinators
    assert hidden.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert writable.error_code == 0  # DESCRIBE allowed


def test_an_id_without_acls_commits(broker: BrokerProcess) -> None:
    topic = unique("txn-acl")
    assert create_topic(broker.bootstrap, topic) == 0
    producer = _init(broker, unique("allowed-"))
    producer.begin_transaction()
    producer.produce(topic, b"allowed", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    assert consume_all(broker, {topic: 1}, "read_committed", 1) == [b"allowed"]
