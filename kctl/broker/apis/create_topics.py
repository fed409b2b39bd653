"""CreateTopics (answered by the controller): partitions, replication factor or an explicit
assignment, topic configs, validate-only.

A request asking for more than ``MAX_PARTITIONS_PER_REQUEST`` partitions in all is refused whole
with POLICY_VIOLATION (as Kafka does). Each topic is planned on the event loop, then their logs are
created and their registry writes made, all the topics together (`TopicAdmin.commit_topics`: a few
ZooKeeper multi-ops, one controller pass, one metadata refresh), in worker threads
(kctl.broker.topics), so a large create never stalls the other connections.

Once the topics are created, the answer waits until every live broker serves them with a leader for
each partition (``Broker.await_metadata``, kctl.broker.metadata_propagation) for up to the request's
``timeout_ms`` (from its arrival), then answers REQUEST_TIMED_OUT for the topics some broker does
not serve yet, as Kafka does; a ``timeout_ms`` of 0 or less answers at once, unwaited.

Versions: v0-7. v1+ may be validate-only and answer with an error message per topic; v5+ (flexible) answer
with each created topic's partition count, replication factor and configs; v7+ with its topic id."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kctl.broker.apis.describe_configs import topic_config_entries
from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.topics import PartitionPlan, check_request_partitions, create_hosted_logs, discard_logs
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TopicAdminServices
    from kctl.broker.request_context import RequestContext
from kctl.protocol.types import ZERO_UUID


@api_handler(ApiKey.CREATE_TOPICS, versions=(0, 7))
async def handle(
    broker: TopicAdminServices, context: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    deadline = asyncio.get_running_loop().time() + request.timeout_ms / 1000
    created: dict[str, frozenset[int]] = {}  # what every broker must serve before the answer
    results = []
    seen: dict[str, int] = {}
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    default_partitions = broker.config["num.partitions"]
    try:
        check_request_partitions(
            sum(
                len(t.assignments) if t.assignments else max(t.num_partitions, 0) or default_partitions
                for t in request.topics
            )
        )
    except ApiError as error:
        return CreateTopicsResponse(
            throttle_time_ms=0,
            topics=[
                CreatableTopicResult(
                    name=t.name, error_code=error.code, error_message=error.message, configs=None
                )
                for t in request.topics
            ],
        )
    errors: dict[str, ApiError] = {}
    plans: list[PartitionPlan] = []
    brokers = await broker.topics.live_brokers() if broker.is_controller else None
    for topic in request.topics:  # validated and placed one by one, committed together below
        try:
            if seen[topic.name] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} is named more than once")
            if not (
                context.allowed(
                    AclOperation.CREATE,
                    AclResourceType.CLUSTER,
                    CLUSTER_NAME,
                    log_denied=False,
                )
                or context.allowed(AclOperation.CREATE, AclResourceType.TOPIC, topic.name)
            ):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "CREATE on the topic denied")
            if not broker.is_controller:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
            configs = {c.name: c.value for c in topic.configs}
            plans.append(
                broker.topics.plan_topic(
                    topic.name,
                    topic.num_partitions,
                    topic.replication_factor,
                    assignment or None,
                    configs,
                    brokers=brokers,
                )
            )
        except ApiError as error:
            errors[topic.name] = error
    if plans and not request.validate_only:
        hosted = [await create_hosted_logs(broker.logs, broker.broker_id, plan) for plan in plans]
        try:
            outcomes = await asyncio.to_thread(broker.topics.commit_topics, plans)
        except BaseException:
            for logs in hosted:
                discard_logs(broker.logs, logs)
            raise
        for plan, logs, outcome in zip(plans, hosted, outcomes, strict=True):
            if isinstance(outcome, ApiError):
                discard_logs(broker.logs, logs)
                errors[plan.name] = outcome
            else:
                created[plan.name] = frozenset(plan.assignment)
        broker.on_metadata_changed()
    for topic in request.topics:
        failure = errors.get(topic.name)
        if failure is not None:
            results.append(
                CreatableTopicResult(
                    name=topic.name, error_code=failure.code, error_message=failure.message, configs=None
                )
            )
            continue
        record = broker.metadata.topic(topic.name) if not request.validate_only else None
        if record is None:  # validate_only
            partitions = topic.num_partitions if topic.num_partitions > 0 else broker.config["num.partitions"]
            factor = (
                topic.replication_factor
                if topic.replication_factor > 0
                else broker.config["default.replication.factor"]
            )
            configs_out = []
        else:
            partitions = len(record.assignment)
            factor = len(record.assignment[0])
            configs_out = [
                CreatableTopicConfigs(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.config_source,
                    is_sensitive=False,
                )
                for e in topic_config_entries(broker, topic.name, None, False, False)
            ]
        results.append(
            CreatableTopicResult(
                name=topic.name,
                topic_id=record.topic_id if record else ZERO_UUID,
                error_code=0,
                error_message=None,
                num_partitions=partitions,
                replication_factor=factor,
                configs=configs_out,
            )
        )
    if created and request.timeout_ms > 0:
        late = await broker.await_metadata(created, deadline)
        for result in results:
            if result.name in late:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = late[result.name]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
