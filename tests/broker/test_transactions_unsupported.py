"""Transactions are not supported, and clients learn it at once: FindCoordinator for a transaction
key and InitProducerId with a transactional id answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED with the
message "transactions are not supported by this broker". That is the answer librdkafka, the Java
client and kafka-python all treat as fatal when looking for a transaction coordinator; with
COORDINATOR_NOT_AVAILABLE (kctl's answer before) both confluent-kafka and kafka-python retried for
their whole 60 s timeout, and with UNSUPPORTED_VERSION librdkafka still did (it retries every
FindCoordinator error but the two authorization failures). Idempotent producers (InitProducerId
without a transactional id) and group coordinators are unaffected."""

from __future__ import annotations

import time

import confluent_kafka as ck
import kafka
import kafka.errors
import pytest
from raw_kafka import RawConnection

import kctl.protocol as kp
from kctl.protocol import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.testing import BrokerProcess
from kctl.testing.pytest_plugin import BrokerFactory

FAST_S = 10.0
"""An answer within this is "at once": the clients' own timeouts below are a minute."""
CLIENT_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory()


@pytest.mark.parametrize("version", [1, 3])
def test_find_coordinator_for_a_transaction_key_is_unsupported(broker: BrokerProcess, version: int) -> None:
    with RawConnection(broker.bootstrap) as conn:
        response = conn.request(
            kp.ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key="txn-1", key_type=1)
        )
    assert response.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert response.error_message == "transactions are not supported by this broker"
    assert (response.node_id, response.port) == (-1, -1)


def test_find_coordinator_v4_batches_answer_per_key(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap) as conn:
        request = FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"])
        transactions = conn.request(kp.ApiKey.FIND_COORDINATOR, 4, request)
        groups = conn.request(
            kp.ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g"])
        )
    assert [(c.key, c.error_code) for c in transactions.coordinators] == [
        ("a", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ("b", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ]
    [group] = groups.coordinators
    assert group.error_code == 0 and group.node_id == broker.broker_id  # groups still work


@pytest.mark.parametrize("version", [0, 4])
def test_init_producer_id_with_a_transactional_id_is_unsupported(broker: BrokerProcess, version: int) -> None:
    with RawConnection(broker.bootstrap) as conn:
        refused = conn.request(
            kp.ApiKey.INIT_PRODUCER_ID,
            version,
            InitProducerIdRequest(transactional_id="txn-1", transaction_timeout_ms=60000),
        )
        idempotent = conn.request(
            kp.ApiKey.INIT_PRODUCER_ID,
            version,
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        )
    assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    assert idempotent.error_code == 0 and idempotent.producer_id >= 0


def test_confluent_transactional_producer_fails_at_once(broker: BrokerProcess) -> None:
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "txn-confluent",
            "transaction.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
        }
    )
    started = time.monotonic()
    with pytest.raises(ck.KafkaException) as raised:
        producer.init_transactions(CLIENT_TIMEOUT_S)
    elapsed = time.monotonic() - started
    error = raised.value.args[0]
    assert error.code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    assert error.fatal(), error
    assert "transactions are not supported by this broker" in error.str(), error
    assert elapsed < FAST_S, f"init_transactions took {elapsed:.1f}s to fail"


def test_kafka_python_transactional_producer_fails_at_once(broker: BrokerProcess) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="txn-kafka-python",
        max_block_ms=int(CLIENT_TIMEOUT_S * 1000),
    )
    started = time.monotonic()
    try:
        with pytest.raises(kafka.errors.KafkaError) as raised:
            producer.init_transactions()
    finally:
        producer.close(timeout=5)
    elapsed = time.monotonic() - started
    assert isinstance(raised.value, kafka.errors.TransactionalIdAuthorizationFailedError), repr(raised.value)
    assert elapsed < FAST_S, f"init_transactions took {elapsed:.1f}s to fail"
