"""Metadata: brokers, cluster id, controller, and topics with their partitions' leaders and replicas.
Auto-creates requested topics when allowed by the request and ``auto.create.topics.enable``.

Versions: v0-12. v0 with an empty topic list means all topics (v1+: null does); v1+ answer with racks, the
controller and internal flags; v2+ with the cluster id; v4+ carry allow_auto_topic_creation (before,
creation is allowed); v7+ answer with leader epochs; v8+ answer, when asked, each topic's authorized
operations (v8-10: the cluster's too); v9+ are flexible; v10+ carry and answer with topic ids.

Authorized operations (KIP-430) are a bit field: bit n set when the principal may do the `AclOperation`
with code n on the resource, over the operations Kafka defines for the resource type (a topic: Read,
Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs; the cluster: Create, Alter,
Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite). Without an authorizer all of
them; not asked for: -2^31, as Kafka answers. DescribeCluster uses the same `authorized_operations`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.metadata_cache import INTERNAL_TOPICS
from kctl.broker.security.listeners import advertised_endpoint, request_listener
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import ClusterServices
    from kctl.broker.request_context import RequestContext


NOT_REQUESTED = -(2**31)
"""The authorized operations field when the request did not ask for it (Kafka's INT32_MIN)."""

SUPPORTED_OPERATIONS: dict[AclResourceType, tuple[AclOperation, ...]] = {
    AclResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    AclResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    ),
}


def authorized_operations(
    broker: ClusterServices, context: RequestContext, resource_type: AclResourceType, name: str
) -> int:
    """The bit field of the operations on the resource the request's principal is allowed to do."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if context.allowed(operation, resource_type, name, log_denied=False):
            bits |= 1 << operation
    return bits


def topic_metadata(broker: ClusterServices, name: str) -> MetadataResponseTopic:
    record = broker.metadata.topic(name)
    if record is None:
        return MetadataResponseTopic(
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]
        )
    live = {b.broker_id for b in broker.metadata.brokers()}
    # a broker cut off from ZooKeeper (fenced) leads nothing, whatever its last view says: it sends
    # its clients elsewhere for the leaders instead of back to itself (a zombie leader's clients
    # otherwise asked it again and again while another broker led)
    fenced_self = broker.broker_id if broker.replicas.fenced else None
    partitions = []
    for index, replicas in sorted(record.assignment.items()):
        state = broker.metadata.partition_state(name, index)
        leader = state.leader if state and state.leader != fenced_self else -1
        error = ErrorCode.NONE if leader in live else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(
            MetadataResponsePartition(
                error_code=error,
                partition_index=index,
                leader_id=leader if leader in live else -1,
                leader_epoch=state.leader_epoch if state else -1,
                replica_nodes=list(replicas),
                isr_nodes=list(state.isr) if state else [],
                offline_replicas=[r for r in replicas if r not in live],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=name,
        topic_id=record.topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=partitions,
    )


def _denied(name: str) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[])


@api_handler(ApiKey.METADATA, versions=(0, 12))
async def handle(
    broker: ClusterServices, context: RequestContext, request: MetadataRequest
) -> MetadataResponse:
    version = context.header.api_version
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        names = sorted(broker.metadata.topics())
    else:
        names = []
        for topic in requested:
            name = topic.name
            if name is None:
                name = broker.metadata.topic_name(topic.topic_id)
            if name is not None:
                names.append(name)
    topics = []
    listing = requested is None or (version == 0 and not requested)
    allow_create = version < 4 or request.allow_auto_topic_creation
    for name in names:
        describe = AclOperation.DESCRIBE
        if not context.allowed(describe, AclResourceType.TOPIC, name, log_denied=not listing):
            if not listing:  # a topic the principal may not describe is invisible in a listing
                topics.append(_denied(name))
            continue
        if (
            broker.metadata.topic(name) is None
            and allow_create
            and broker.config["auto.create.topics.enable"]
        ):
            if not (
                context.allowed(
                    AclOperation.CREATE,
                    AclResourceType.CLUSTER,
                    CLUSTER_NAME,
                    log_denied=False,
                )
                or context.allowed(AclOperation.CREATE, AclResourceType.TOPIC, name)
            ):
                topics.append(_denied(name))
                continue
            try:
                broker.topics.auto_create_topic(name)
            except ApiError as error:
                topics.append(MetadataResponseTopic(error_code=error.code, name=name, partitions=[]))
                continue
        topics.append(topic_metadata(broker, name))
    if version >= 8 and request.include_topic_authorized_operations:
        for answer in topics:
            if answer.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and answer.name is not None:
                answer.topic_authorized_operations = authorized_operations(
                    broker, context, AclResourceType.TOPIC, answer.name
                )
    cluster_operations = NOT_REQUESTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = authorized_operations(broker, context, AclResourceType.CLUSTER, CLUSTER_NAME)
    listener = request_listener(context)
    # A fenced broker (cut off from ZooKeeper: its view is old) leaves itself out of the brokers it
    # names, so its clients drop it and ask the others, which know the new leaders (librdkafka
    # connects only to the brokers it needs: told only of leaderless partitions, it asked this
    # broker again and again, for as long as it was cut off).
    fenced_self = broker.broker_id if broker.replicas.fenced else None
    brokers = [
        MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
        for b in broker.metadata.brokers()
        if b.broker_id != fenced_self
        for host, port in (advertised_endpoint(b, listener),)
    ]
    controller = broker.metadata.controller_id
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.metadata.cluster_id,
        controller_id=controller if controller is not None else -1,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )
