"""Metadata (v8+) and DescribeCluster's authorized operations (KIP-430) as the handlers compute them:
the full set without an authorizer, the principal's allowed set with the ACL authorizer (deny wins,
Describe implied, a topic it may not describe refused with none), -2^31 when not asked.

On kctl.testing's in-process broker: the request comes from a principal directly, so no SASL
exchange is needed to test the handlers' answers. The same answers through SASL and real clients
(confluent-kafka, kafka-python) stay in test_authorized_operations.py, on broker processes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_authorized_operations import (
    ALICE_TOPIC,
    ALL_CLUSTER_BITS,
    ALL_TOPIC_BITS,
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC,
    TOPIC_OPERATIONS,
    names,
)

from kctl.protocol import ErrorCode
from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType
from kctl.protocol.messages.acls import AclCreation, CreateAclsRequest
from kctl.protocol.messages.describe_cluster import DescribeClusterRequest
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.testing.inprocess import InProcessBroker

ALICE, ADMIN = "User:alice", "User:admin"


def _metadata(
    broker: InProcessBroker, version: int, topic: str, *, include: bool, principal: str | None = None
) -> tuple[int, int]:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=include,
        include_topic_authorized_operations=include,
    )
    response = broker.call(request, version=version, principal=principal)
    [answer] = response.topics
    assert answer.error_code == 0, answer
    cluster = response.cluster_authorized_operations if version <= 10 else NOT_REQUESTED
    return answer.topic_authorized_operations, cluster


def _describe_cluster(broker: InProcessBroker, *, include: bool, principal: str | None = None) -> int:
    request = DescribeClusterRequest(include_cluster_authorized_operations=include)
    response = broker.call(request, version=0, principal=principal)
    assert response.error_code == 0
    return int(response.cluster_authorized_operations)


@pytest.fixture
def plain(inprocess_broker: InProcessBroker) -> InProcessBroker:
    inprocess_broker.create_topic(TOPIC)
    return inprocess_broker


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_without_authorizer_answers_every_operation(plain: InProcessBroker, version: int) -> None:
    topic_bits, cluster_bits = _metadata(plain, version, TOPIC, include=True)
    assert topic_bits == ALL_TOPIC_BITS and names(topic_bits) == TOPIC_OPERATIONS
    if version <= 10:
        assert cluster_bits == ALL_CLUSTER_BITS and names(cluster_bits) == CLUSTER_OPERATIONS
    assert _metadata(plain, version, TOPIC, include=False) == (NOT_REQUESTED, NOT_REQUESTED)


def test_describe_cluster_without_authorizer_answers_every_operation(plain: InProcessBroker) -> None:
    assert _describe_cluster(plain, include=True) == ALL_CLUSTER_BITS
    assert _describe_cluster(plain, include=False) == NOT_REQUESTED


@pytest.fixture
def secured(inprocess_broker_factory: Callable[..., InProcessBroker]) -> InProcessBroker:
    """The ACL authorizer, admin a super user; alice may Read topics ops-*, AlterConfigs on ops-topic,
    IdempotentWrite on the cluster, and is denied Read on ops-denied."""
    broker: InProcessBroker = inprocess_broker_factory(
        {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": ADMIN}
    )
    for name in (TOPIC, "ops-denied", "hidden"):
        broker.create_topic(name)
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    creations = [
        (AclResourceType.TOPIC, "ops-", PatternType.PREFIXED, AclOperation.READ, allow),
        (AclResourceType.TOPIC, TOPIC, PatternType.LITERAL, AclOperation.ALTER_CONFIGS, allow),
        (AclResourceType.TOPIC, "ops-denied", PatternType.LITERAL, AclOperation.READ, deny),
        (AclResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.IDEMPOTENT_WRITE, allow),
    ]
    request = CreateAclsRequest(
        creations=[
            AclCreation(
                resource_type=resource_type,
                resource_name=name,
                resource_pattern_type=pattern,
                principal=ALICE,
                host="*",
                operation=operation,
                permission_type=permission,
            )
            for resource_type, name, pattern, operation, permission in creations
        ]
    )
    results = broker.call(request, principal=ADMIN).results
    assert [result.error_code for result in results] == [0] * len(creations)
    return broker


def test_with_authorizer_the_principal_gets_its_allowed_operations(secured: InProcessBroker) -> None:
    topic_bits, cluster_bits = _metadata(secured, 10, TOPIC, include=True, principal=ALICE)
    assert names(topic_bits) == ALICE_TOPIC
    assert names(cluster_bits) == {"IDEMPOTENT_WRITE"}
    assert names(_describe_cluster(secured, include=True, principal=ALICE)) == {"IDEMPOTENT_WRITE"}
    # Read on ops-* but denied on ops-denied: deny wins; Describe stays (implied by the prefix's Read,
    # and a deny of Read does not deny Describe)
    assert names(_metadata(secured, 12, "ops-denied", include=True, principal=ALICE)[0]) == {"DESCRIBE"}
    # a topic alice may not describe: refused, with no operations answered (as Kafka)
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name="hidden")], include_topic_authorized_operations=True
    )
    [hidden] = secured.call(request, version=12, principal=ALICE).topics
    assert hidden.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert hidden.topic_authorized_operations == NOT_REQUESTED
    assert _metadata(secured, 10, TOPIC, include=True, principal=ADMIN) == (ALL_TOPIC_BITS, ALL_CLUSTER_BITS)
