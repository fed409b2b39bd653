"""CreatePartitions (answered by the controller): raise a topic's partition count.

As CreateTopics: more than ``MAX_PARTITIONS_PER_REQUEST`` new partitions in all is POLICY_VIOLATION
for every topic; logs are created and registry writes made in worker threads.

As CreateTopics too, the answer waits (up to ``timeout_ms``) until every live broker serves the new
partitions with a leader, else REQUEST_TIMED_OUT for that topic.

Versions: v0-3. The versions differ only in encoding (v2+ are flexible); the request and the answer are
the same."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.topics import PartitionPlan, check_request_partitions, create_hosted_logs, discard_logs
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TopicAdminServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def handle(
    broker: TopicAdminServices, context: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    deadline = asyncio.get_running_loop().time() + request.timeout_ms / 1000
    grown: dict[str, frozenset[int]] = {}  # the new partitions every broker must serve
    results = []
    try:
        check_request_partitions(sum(_new_partitions(broker, t.name, t.count) for t in request.topics))
    except ApiError as error:
        return CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                CreatePartitionsTopicResult(name=t.name, error_code=error.code, error_message=error.message)
                for t in request.topics
            ],
        )
    plans: dict[str, PartitionPlan] = {}
    brokers = await broker.topics.live_brokers() if broker.is_controller else None
    for topic in request.topics:
        try:
            context.require(AclOperation.ALTER, AclResourceType.TOPIC, topic.name)
            if not broker.is_controller:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            if topic.name in plans:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} is in the request twice")
            assignment = [tuple(a.broker_ids) for a in topic.assignments] if topic.assignments else None
            plans[topic.name] = broker.topics.plan_partitions(
                topic.name, topic.count, assignment, brokers=brokers
            )
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=0))
        except ApiError as error:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=error.code, error_message=error.message
                )
            )
    if plans and not request.validate_only:
        # every topic's partitions written together: the controller and the metadata refresh run
        # once for the request, not once per topic
        created = {}
        for name, plan in plans.items():
            created[name] = await create_hosted_logs(broker.logs, broker.broker_id, plan)
        try:
            outcomes = await asyncio.to_thread(broker.topics.commit_partitions_of, list(plans.values()))
        except BaseException:
            for logs in created.values():
                discard_logs(broker.logs, logs)
            raise
        failed = {name: out for name, out in zip(plans, outcomes, strict=True) if out is not None}
        for result in results:
            refused = failed.get(result.name)
            if refused is not None:
                discard_logs(broker.logs, created[result.name])
                result.error_code, result.error_message = refused.code, refused.message
            elif result.name in plans:
                grown[result.name] = frozenset(plans[result.name].assignment)
        broker.on_metadata_changed()
    if grown and request.timeout_ms > 0:
        late = await broker.await_metadata(grown, deadline)
        for result in results:
            if result.name in late:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = late[result.name]
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _new_partitions(broker: TopicAdminServices, name: str, count: int) -> int:
    """How many partitions growing ``name`` to ``count`` adds (0 for an unknown topic: its own error)."""
    record = broker.metadata.topic(name)
    return max(count - len(record.assignment), 0) if record is not None else 0
