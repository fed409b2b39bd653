"""AlterPartitionReassignments (answered by the controller): start or cancel partition reassignments.

Versions: v0 only (flexible; v1, which may refuse replication factor changes, is not answered). Only
the controller answers (others: NOT_CONTROLLER at the top). Each partition
is checked as Kafka's controller does — UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT for an
empty or duplicated replica list or a broker that is not alive — then the targets are added to
the registry's reassignment requests (ZooKeeper: /admin/reassign_partitions, Kafka's format), which
the controller executes (union of old and new replicas, wait for the new ones in the ISR, leader from
the new set, shrink). ``replicas`` null cancels: the partition's request is withdrawn and, when the
controller has started it (adding/removing replicas in the topic), a reassignment back to the original
replicas is requested (from the topic znode, under the controller's event lock, so that no event is
half done); NO_REASSIGNMENT_IN_PROGRESS when there is neither. The answer does not wait for
the data to move (ListPartitionReassignments shows progress). A target the registry refuses is
INVALID_REPLICA_ASSIGNMENT: an embedded (ZooKeeper-less) broker accepts only its current assignment
(nothing to move)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.acl_types import AclOperation
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kctl.protocol.registry import ApiKey
from kctl.zk.model import RegistryError, RegistryUnavailableError

if TYPE_CHECKING:
    from kctl.broker.handler_services import ControllerServices
    from kctl.broker.request_context import RequestContext

Key = tuple[str, int]


def _check(
    broker: ControllerServices, topic: str, partition: int, replicas: list[int] | None
) -> tuple[int, str | None]:
    record = broker.metadata.topic(topic)
    if record is None or partition not in record.assignment:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
    if replicas is None:
        return 0, None
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list is empty"
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"duplicate replicas in {replicas}"
    alive = {b.broker_id for b in broker.metadata.brokers()}
    dead = [r for r in replicas if r not in alive]
    if dead:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers not alive: {dead}"
    return 0, None


def _submit(
    broker: ControllerServices, targets: dict[Key, list[int]], cancels: list[Key]
) -> dict[Key, tuple[int, str | None]]:
    """Ask the registry (blocking: run in a thread); returns the outcome of each partition asked."""
    registry = broker.registry
    if registry is None:
        raise RegistryUnavailableError("the broker is stopping")
    requests = registry.admin_requests
    refused = requests.request_reassignments(targets) if targets else {}
    outcomes: dict[Key, tuple[int, str | None]] = {
        key: (ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason) for key, reason in refused.items()
    }
    if not cancels:
        return outcomes
    # Between the controller reading a request and writing its start into the topic znode, a
    # cancel would find the request to withdraw but no start to undo, and the started
    # reassignment would then wait for a request that is gone: the cancel runs between two of the
    # controller's events, never inside one.
    with broker.controller.exclusive():
        withdrawn = requests.withdraw_reassignments(cancels)
        started = {topic: registry.get_topic(topic) for topic in dict.fromkeys(topic for topic, _ in cancels)}
        back: dict[Key, tuple[int, ...]] = {}
        for topic, partition in cancels:
            stored = started[topic]
            if stored is None:
                continue
            adding = stored.adding_replicas.get(partition, ())
            if partition in stored.adding_replicas or partition in stored.removing_replicas:
                current = stored.assignment.get(partition, ())
                back[topic, partition] = tuple(r for r in current if r not in adding)
        if back:
            requests.request_reassignments(back)
    for key in cancels:
        outcomes[key] = (
            (0, None) if key in back or key in withdrawn else (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        )
    return outcomes


@api_handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 0))
async def handle(
    broker: ControllerServices, context: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    denied = context.cluster_action_denied(AclOperation.ALTER)
    if denied is not None:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=denied[0],
            error_message=denied[1],
            responses=[
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=[
                        ReassignablePartitionResponse(
                            partition_index=p.partition_index, error_code=denied[0], error_message=denied[1]
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )
    if not broker.is_controller:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message="this broker is not the controller",
            responses=[],
        )
    results: dict[Key, tuple[int, str | None]] = {}
    targets: dict[Key, list[int]] = {}
    cancels: list[Key] = []
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            results[key] = _check(broker, topic.name, p.partition_index, p.replicas)
            if results[key][0] == 0:
                if p.replicas is None:
                    cancels.append(key)
                else:
                    targets[key] = list(p.replicas)
    if targets or cancels:
        try:
            results.update(await asyncio.to_thread(_submit, broker, targets, cancels))
        except RegistryError as error:
            for key in [*targets, *cancels]:
                results[key] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for (topic_name, partition), (code, message) in results.items():
        by_topic.setdefault(topic_name, []).append(
            ReassignablePartitionResponse(partition_index=partition, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=0,
        responses=[ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
