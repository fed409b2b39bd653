"""DeleteTopics (answered by the controller), by name (v0-5) or by topic id (v6+). The topics a
request may delete are deleted together in a worker thread, with one metadata refresh (a hundred
topics do not stop the event loop for a hundred refreshes).

The answer waits (up to the request's ``timeout_ms``) until no live broker serves the deleted topics
any more (kctl.broker.metadata_propagation; the deleted topic is its id: a topic a client's Metadata
request auto-creates again meanwhile does not hold the answer), else REQUEST_TIMED_OUT for the topics
some broker still serves, as Kafka does; a ``timeout_ms`` of 0 or less answers at once.

Versions: v0-6. v0-5 name the topics; v6+ name them or give their topic ids, and answer with both. v4+ are
flexible; v5+ answer with an error message per topic."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TopicAdminServices
    from kctl.broker.request_context import RequestContext
from kctl.protocol.types import ZERO_UUID


@api_handler(ApiKey.DELETE_TOPICS, versions=(0, 6))
async def handle(
    broker: TopicAdminServices, context: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    version = context.header.api_version
    wanted = (
        [(t.name, t.topic_id) for t in request.topics]
        if version >= 6
        else [(n, ZERO_UUID) for n in request.topic_names]
    )
    deadline = asyncio.get_running_loop().time() + request.timeout_ms / 1000
    deleted: dict[str, uuid.UUID] = {}  # topics (their ids) no broker may serve before the answer
    results: list[DeletableTopicResult] = []
    doomed: list[tuple[str, DeletableTopicResult]] = []  # allowed: deleted together in a worker thread
    for name, topic_id in wanted:
        try:
            if name is None:
                name = broker.metadata.topic_name(topic_id)
                if name is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}")
            if not context.allowed(AclOperation.DELETE, AclResourceType.TOPIC, name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "DELETE on the topic denied")
            record = broker.metadata.topic(name)
            if not broker.is_controller:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            result = DeletableTopicResult(
                name=name, topic_id=record.topic_id if record else topic_id, error_code=0
            )
            doomed.append((name, result))
        except ApiError as error:
            result = DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error.code, error_message=error.message
            )
        results.append(result)
    if doomed:  # the registry's writes and one metadata refresh, off the event loop
        outcomes = await asyncio.to_thread(broker.topics.delete_topics, [name for name, _ in doomed])
        for (name, result), outcome in zip(doomed, outcomes, strict=True):
            if outcome is None:
                deleted[name] = result.topic_id
            else:
                result.error_code, result.error_message = outcome.code, outcome.message
        if deleted:
            broker.on_metadata_changed()
    if deleted and request.timeout_ms > 0:
        late = await broker.await_metadata(deleted, deadline)
        for result in results:
            if result.name in late:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = late[result.name]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
