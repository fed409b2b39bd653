"""ListPartitionReassignments (answered by the controller): the partitions being reassigned.

Versions: v0 only (the only version; flexible). Only the controller answers (others: NOT_CONTROLLER at
the top). A partition
is being reassigned when the controller has started it (adding/removing replicas in its topic) or it
is still waiting in the registry's reassignment requests (ZooKeeper: /admin/reassign_partitions;
the registry's AdminRequests.ongoing_reassignments); ``topics`` null lists every one. An embedded
(ZooKeeper-less) broker never has one."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.acl_types import AclOperation
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kctl.protocol.registry import ApiKey
from kctl.zk.model import OngoingReassignment, RegistryError, RegistryUnavailableError

if TYPE_CHECKING:
    from kctl.broker.handler_services import ControllerServices
    from kctl.broker.request_context import RequestContext


def _ongoing(
    broker: ControllerServices, assignments: dict[str, dict[int, tuple[int, ...]]]
) -> dict[tuple[str, int], OngoingReassignment]:
    """Read the ongoing reassignments from the registry (blocking: run in a thread)."""
    registry = broker.registry
    if registry is None:
        raise RegistryUnavailableError("the broker is stopping")
    return registry.admin_requests.ongoing_reassignments(assignments)


@api_handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0))
async def handle(
    broker: ControllerServices, context: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    denied = context.cluster_action_denied(AclOperation.DESCRIBE)
    if denied is not None:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=denied[0], error_message=denied[1], topics=[]
        )
    if not broker.is_controller:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message="this broker is not the controller",
            topics=[],
        )
    assignments = {name: record.assignment for name, record in broker.metadata.topics().items()}
    try:
        ongoing = await asyncio.to_thread(_ongoing, broker, assignments)
    except RegistryError as error:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(error), topics=[]
        )
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, partition), r in sorted(ongoing.items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(
            OngoingPartitionReassignment(
                partition_index=partition,
                replicas=list(r.replicas),
                adding_replicas=list(r.adding_replicas),
                removing_replicas=list(r.removing_replicas),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
