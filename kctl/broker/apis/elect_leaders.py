"""ElectLeaders (answered by the controller): preferred or unclean leader elections.

Versions: v0-2 (v1+ carry the election type and a top-level error code; v2+ are flexible). Only the
controller answers (others: NOT_CONTROLLER). Each partition is checked first — UNKNOWN_TOPIC_OR_PARTITION;
ELECTION_NOT_NEEDED when the preferred replica leads already (preferred) or the partition has a leader
(unclean); PREFERRED_LEADER_NOT_AVAILABLE when the preferred replica is not alive or not in the ISR;
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive (unclean) — then the eligible ones are handed
to the controller's event loop through the registry's election requests (ZooKeeper:
/admin/preferred_replica_election, or kctl's /kctl/elect_leaders for unclean elections), and the
answer waits, until the request's timeout, for the partition states to show the new leader (else
REQUEST_TIMED_OUT), as Kafka's controller answers from its purgatory. A partition the registry
refuses to elect is ELIGIBLE_LEADERS_NOT_AVAILABLE: an embedded (ZooKeeper-less) broker is a cluster
of one, it never needs an election."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.acl_types import AclOperation
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.elect_leaders import (
    UNCLEAN,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kctl.protocol.registry import ApiKey
from kctl.zk.model import RegistryError, RegistryUnavailableError
from kctl.zk.registry import PREFERRED as PREFERRED_ELECTION
from kctl.zk.registry import UNCLEAN as UNCLEAN_ELECTION

if TYPE_CHECKING:
    from kctl.broker.handler_services import ControllerServices
    from kctl.broker.request_context import RequestContext

POLL_INTERVAL_S = 0.05


def _requested(broker: ControllerServices, request: ElectLeadersRequest) -> list[tuple[str, int]]:
    if request.topic_partitions is None:
        return [(t, p) for t, record in sorted(broker.metadata.topics().items()) for p in record.assignment]
    return list(dict.fromkeys((tp.topic, p) for tp in request.topic_partitions for p in tp.partitions))


def _check(broker: ControllerServices, topic: str, partition: int, unclean: bool) -> tuple[int, str | None]:
    """(error code, message) before any election: 0 when the partition is eligible."""
    record = broker.metadata.topic(topic)
    if record is None or partition not in record.assignment:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
    replicas = record.assignment[partition]
    state = broker.metadata.partition_state(topic, partition)
    leader = state.leader if state is not None else -1
    isr = state.isr if state is not None else ()
    alive = {b.broker_id for b in broker.metadata.brokers()}
    if unclean:
        if leader >= 0:
            return ErrorCode.ELECTION_NOT_NEEDED, f"partition {topic}-{partition} has a leader ({leader})"
        if not any(r in alive for r in replicas):
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {topic}-{partition} is alive"
        return 0, None
    preferred = replicas[0] if replicas else -1
    if leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, f"the preferred replica {preferred} leads already"
    if preferred not in alive or preferred not in isr:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"the preferred replica {preferred} is not {'in the ISR' if preferred in alive else 'alive'}",
        )
    return 0, None


def _elected(broker: ControllerServices, topic: str, partition: int, unclean: bool) -> bool:
    record = broker.metadata.topic(topic)
    state = broker.metadata.partition_state(topic, partition)
    if record is None or state is None or partition not in record.assignment:
        return False
    if unclean:
        return state.leader >= 0
    return state.leader == record.assignment[partition][0]


def _request(
    broker: ControllerServices, unclean: bool, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], str]:
    """Ask the registry for the elections (blocking: run in a thread); returns the partitions it
    refuses, with why."""
    registry = broker.registry
    if registry is None:
        raise RegistryUnavailableError("the broker is stopping")
    election_type = UNCLEAN_ELECTION if unclean else PREFERRED_ELECTION
    return registry.admin_requests.request_elections(election_type, partitions)


@api_handler(ApiKey.ELECT_LEADERS, versions=(0, 2))
async def handle(
    broker: ControllerServices, context: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    unclean = request.election_type == UNCLEAN
    results: dict[tuple[str, int], tuple[int, str | None]] = {}
    top_error = 0
    denied = context.cluster_action_denied(AclOperation.ALTER)
    if denied is not None:  # as Kafka: Alter on the cluster, checked first (no topic names leak)
        top_error = denied[0]
        wanted = (
            []
            if request.topic_partitions is None
            else list(dict.fromkeys((tp.topic, p) for tp in request.topic_partitions for p in tp.partitions))
        )
        results = {tp: denied for tp in wanted}
    elif not broker.is_controller:
        wanted = _requested(broker, request)
        top_error = ErrorCode.NOT_CONTROLLER
        results = {tp: (ErrorCode.NOT_CONTROLLER, "this broker is not the controller") for tp in wanted}
    else:
        wanted = _requested(broker, request)
        results = {tp: _check(broker, *tp, unclean) for tp in wanted}
        eligible = [tp for tp, (code, _) in results.items() if code == 0]
        if eligible:
            try:
                refused = await asyncio.to_thread(_request, broker, unclean, eligible)
            except RegistryError as error:
                for tp in eligible:
                    results[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
            else:
                for tp, reason in refused.items():
                    results[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, reason)
                deadline = time.monotonic() + max(request.timeout_ms, 0) / 1000
                waiting = set(eligible) - set(refused)
                while waiting:
                    waiting = {tp for tp in waiting if not _elected(broker, *tp, unclean)}
                    if not waiting or time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(POLL_INTERVAL_S)
                for tp in waiting:
                    results[tp] = (
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"the controller has not elected a leader of {tp[0]}-{tp[1]} within "
                        f"{request.timeout_ms} ms (the request stays in ZooKeeper)",
                    )
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(partition_id=partition, error_code=code, error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=top_error,  # absent from v0, where each partition says NOT_CONTROLLER
        replica_election_results=[
            ReplicaElectionResult(topic=t, partition_result=rs) for t, rs in by_topic.items()
        ],
    )
