"""OffsetFetch: a group's committed offsets (all of them when no topics are named; several groups
per request from v8).

Versions: v0-9. v0-1 report a group error per partition, v2+ once at the top level; v5+ answer with
committed leader epochs; v6+ are flexible; v7+ carry require_stable: a named partition with a
transactional offset commit pending (KIP-447) then answers UNSTABLE_OFFSET_COMMIT (offset -1; the
consumer retries), and without it the last committed offset; v8+ ask for several groups at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext

FIRST_BATCHED_VERSION = 8
FIRST_REQUIRE_STABLE_VERSION = 7


def _unstable_v8(partition: int) -> OffsetFetchResponsePartitions:
    """A partition with a transactional offset commit pending, asked for with require_stable."""
    return OffsetFetchResponsePartitions(
        partition_index=partition,
        committed_offset=-1,
        committed_leader_epoch=-1,
        metadata="",
        error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
    )


def _fetch(
    broker: GroupServices,
    group_id: str,
    topics: Any,
    context: RequestContext | None = None,
    require_stable: bool = False,
) -> tuple[int, dict[str, list[tuple[int, Any]]], set[tuple[str, int]]]:
    """(group error, topic -> [(partition, OffsetValue | None)], the partitions to answer
    UNSTABLE_OFFSET_COMMIT); the topics the principal may not describe are left out (Kafka answers
    them TOPIC_AUTHORIZATION_FAILED)."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    try:
        if context is not None and not context.allowed(
            AclOperation.DESCRIBE, AclResourceType.GROUP, group_id
        ):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "DESCRIBE on the group denied")
        found = broker.groups.offsets.fetch_offsets(group_id, wanted)
    except ApiError as error:
        found = {tp: None for tp in wanted or []}
        by_topic: dict[str, list[tuple[int, Any]]] = {}
        for (topic, partition), value in found.items():
            by_topic.setdefault(topic, []).append((partition, value))
        return error.code, by_topic, set()
    unstable = (
        broker.groups.offsets.unstable_partitions(group_id, wanted) if require_stable and wanted else set()
    )
    by_topic = {}
    for (topic, partition), value in found.items():
        if context is None or context.allowed(
            AclOperation.DESCRIBE,
            AclResourceType.TOPIC,
            topic,
            log_denied=wanted is not None,
        ):
            by_topic.setdefault(topic, []).append((partition, value))
    return ErrorCode.NONE, by_topic, unstable


@api_handler(ApiKey.OFFSET_FETCH, versions=(0, 9))
async def handle(
    broker: GroupServices, context: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    version = context.header.api_version
    if version >= FIRST_BATCHED_VERSION:
        groups = []
        for group in request.groups:
            code, by_topic, unstable = _fetch(
                broker, group.group_id, group.topics, context, request.require_stable
            )
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    error_code=code,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=topic,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=v.offset if v else -1,
                                    committed_leader_epoch=v.leader_epoch if v else -1,
                                    metadata=v.metadata if v else "",
                                    error_code=0,
                                )
                                if (topic, p) not in unstable
                                else _unstable_v8(p)
                                for p, v in parts
                            ],
                        )
                        for topic, parts in by_topic.items()
                    ],
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    require_stable = version >= FIRST_REQUIRE_STABLE_VERSION and request.require_stable
    code, by_topic, unstable = _fetch(broker, request.group_id, request.topics, context, require_stable)
    partition_code = code if version < 2 else ErrorCode.NONE
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=code,
        topics=[
            OffsetFetchResponseTopic(
                name=topic,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=v.offset if v else -1,
                        committed_leader_epoch=v.leader_epoch if v else -1,
                        metadata=v.metadata if v else "",
                        error_code=partition_code,
                    )
                    if (topic, p) not in unstable
                    else OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
                    )
                    for p, v in parts
                ],
            )
            for topic, parts in by_topic.items()
        ],
    )
