"""Metadata (v8+) and DescribeCluster answer the authorized operations (KIP-430) when asked:
``include_topic_authorized_operations`` / ``include_cluster_authorized_operations`` give a bit field
(bit n: the AclOperation with code n) over the operations Kafka defines for the resource type, the
full set without an authorizer, the principal's allowed set with the ACL authorizer; not asked,
-2^31. Checked with confluent-kafka's describe_cluster/describe_topics
(include_authorized_operations=True) and kafka-python's admin client, through SASL; the handlers'
answers to raw requests are in test_authorized_operations_handlers.py (in-process broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType
from kctl.testing import BrokerProcess
from kctl.testing.cluster_clients import create_topic
from kctl.testing.pytest_plugin import BrokerFactory

NOT_REQUESTED = -(2**31)
TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
CLUSTER_OPERATIONS = {
    "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
}  # fmt: skip
ALL_TOPIC_BITS = 0b1101_1111_1000  # Kafka's answer without an authorizer: 3576
ALL_CLUSTER_BITS = 0b1_1111_1010_0000  # 8096
ADMIN_PASSWORD, ALICE_PASSWORD = "admin-secret", "alice-secret"
TOPIC = "ops-topic"


def names(bits: int) -> set[str]:
    return {operation.name for operation in AclOperation if bits & (1 << operation)}


def _confluent_operations(bootstrap: str, topic: str, config: dict[str, str]) -> tuple[set[str], set[str]]:
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, **config})
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=20).result(20)
    topics = admin.describe_topics(
        confluent_kafka.TopicCollection([topic]), include_authorized_operations=True, request_timeout=20
    )
    described = topics[topic].result(20)
    return (
        {operation.name for operation in described.authorized_operations},
        {operation.name for operation in cluster.authorized_operations},
    )


# ------------------------------------------------------------------------------- no authorizer


@pytest.fixture(scope="module")
def plain_broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    broker = module_broker_factory()
    create_topic(broker.bootstrap, TOPIC, 1, 1)
    return broker






def test_confluent_describe_with_authorized_operations(plain_broker: BrokerProcess) -> None:
    topic_operations, cluster_operations = _confluent_operations(plain_broker.bootstrap, TOPIC, {})
    assert topic_operations == TOPIC_OPERATIONS
    assert cluster_operations == CLUSTER_OPERATIONS


def test_kafka_python_describe_with_authorized_operations(plain_broker: BrokerProcess) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=plain_broker.bootstrap)
    try:
        cluster = admin.describe_cluster()
        [topic] = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    assert set(cluster["authorized_operations"]) == CLUSTER_OPERATIONS, cluster
    assert set(topic["authorized_operations"]) == TOPIC_OPERATIONS, topic


# ---------------------------------------------------------------------------- with the authorizer


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """SASL_PLAINTEXT with PLAIN users admin (a super user) and alice, and the ACL authorizer; alice
    may Read topics ops-*, AlterConfigs on ops-topic, IdempotentWrite on the cluster, and is denied
    Read on ops-denied."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
        f'user_alice="{ALICE_PASSWORD}";'
    )
    directory: Path = tmp_path_factory.mktemp("authorized-operations")
    broker = BrokerProcess(
        directory / "data",
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": jaas,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        },
    ).start()
    try:
        from kctl.client.admin import AdminClient, NewTopic
        from kctl.client.admin.security import AclBinding

        allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
        with AdminClient(broker.bootstrap, sasl("admin", ADMIN_PASSWORD)) as admin:
            admin.create_topics([NewTopic(name, 1, 1) for name in (TOPIC, "ops-denied", "hidden")])
            bindings = [
                AclBinding(AclResourceType.TOPIC, "ops-", PatternType.PREFIXED, "User:alice", "*",
                           AclOperation.READ, allow),
                AclBinding(AclResourceType.TOPIC, TOPIC, PatternType.LITERAL, "User:alice", "*",
                           AclOperation.ALTER_CONFIGS, allow),
                AclBinding(AclResourceType.TOPIC, "ops-denied", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, deny),
                AclBinding(AclResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.IDEMPOTENT_WRITE, allow),
            ]  # fmt: skip
            assert all(result.error_code == 0 for result in admin.create_acls(bindings))
        yield broker
    finally:
        broker.stop()


def sasl(user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


ALICE_TOPIC = {
    "READ",
    "DESCRIBE",
    "ALTER_CONFIGS",
    "DESCRIBE_CONFIGS",
}  # Describe and DescribeConfigs implied





def test_with_authorizer_confluent_describe_reports_the_allowed_set(secured: BrokerProcess) -> None:
    topic_operations, cluster_operations = _confluent_operations(
        secured.bootstrap, TOPIC, sasl("alice", ALICE_PASSWORD)
    )
    assert topic_operations == ALICE_TOPIC
    assert cluster_operations == {"IDEMPOTENT_WRITE"}
