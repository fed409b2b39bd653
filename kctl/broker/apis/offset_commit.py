"""OffsetCommit: store a group's positions in __consumer_offsets; acknowledged once written.

Versions: v0-9. v0 commits without a group generation (simple consumers); v1 carries a per-partition
commit timestamp; v1+ a generation and member id; v2-4 carry a retention time (ignored:
offsets.retention.minutes rules); v6+ a committed leader epoch; v7+ a group instance id; v8+ are flexible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.group.records import OffsetValue
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.OFFSET_COMMIT, versions=(0, 9))
async def handle(
    broker: GroupServices, context: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    version = context.header.api_version
    now = broker.clock.time_ms()
    offsets = {}
    for topic in request.topics:
        for part in topic.partitions:
            timestamp = part.commit_timestamp if version == 1 and part.commit_timestamp >= 0 else now
            offsets[(topic.name, part.partition_index)] = OffsetValue(
                part.committed_offset, part.committed_leader_epoch, part.committed_metadata or "", timestamp
            )
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    instance_id = request.group_instance_id if version >= 7 else None
    read, topic_type = AclOperation.READ, AclResourceType.TOPIC
    denied = {t.name for t in request.topics if not context.allowed(read, topic_type, t.name)}
    if denied:
        offsets = {tp: v for tp, v in offsets.items() if tp[0] not in denied}
    try:
        if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "READ on the group denied")
        results, apply = broker.groups.offsets.commit_offsets(
            request.group_id, member_id, instance_id, generation, offsets
        )
        code = await broker.groups.wait_replicated(request.group_id)
        if code == ErrorCode.NONE:
            apply()  # only a replicated commit is the group's committed offset (OffsetFetch)
        else:
            results = {tp: code if result == ErrorCode.NONE else result for tp, result in results.items()}
    except ApiError as error:
        results = dict.fromkeys(offsets, error.code)
    for topic in request.topics:
        if topic.name in denied:
            for p in topic.partitions:
                results[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=results[(topic.name, p.partition_index)]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )
