"""TxnOffsetCommit: a transactional producer's consumer offsets, stored in the group's
``__consumer_offsets`` partition as the producer's transactional batch and acknowledged once written
(replicated to the ISR in a cluster); they stay pending, invisible to OffsetFetch, until the
producer's COMMIT marker (ABORT drops them) — see :mod:`kctl.broker.group.offsets`.

Checks, in Kafka's order: WRITE on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
every partition), READ on the group (GROUP_AUTHORIZATION_FAILED on every partition), then per topic
READ (TOPIC_AUTHORIZATION_FAILED) and its existence (UNKNOWN_TOPIC_OR_PARTITION); the coordinator then
answers for the rest: INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, the KIP-447 group metadata checks (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
ILLEGAL_GENERATION), INVALID_PRODUCER_EPOCH (an epoch older than the partition's for the producer),
OFFSET_METADATA_TOO_LARGE per partition.

Versions: v0-4. v2+ carry a committed leader epoch; v3+ are flexible and carry the group metadata
(generation id, member id, group instance id); v4 is v3 (it allows TRANSACTION_ABORTABLE, KIP-890)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.group.records import OffsetValue
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import GroupServices
    from kctl.broker.request_context import RequestContext

FIRST_GROUP_METADATA_VERSION = 3


def _response(
    request: TxnOffsetCommitRequest, results: dict[tuple[str, int], int]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=results[(topic.name, p.partition_index)]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


@api_handler(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 4))
async def handle(
    broker: GroupServices, context: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    version = context.header.api_version
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(request, dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return _response(request, dict.fromkeys(wanted, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    now = broker.clock.time_ms()
    results: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], OffsetValue] = {}
    for topic in request.topics:
        readable = context.allowed(AclOperation.READ, AclResourceType.TOPIC, topic.name)
        record = broker.metadata.topic(topic.name) if readable else None
        for part in topic.partitions:
            tp = (topic.name, part.partition_index)
            if not readable:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif record is None or part.partition_index not in record.assignment:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetValue(
                    part.committed_offset, part.committed_leader_epoch, part.committed_metadata or "", now
                )
    if not offsets:
        return _response(request, results)
    with_metadata = version >= FIRST_GROUP_METADATA_VERSION
    try:
        committed = broker.groups.offsets.commit_txn_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.member_id if with_metadata else "",
            request.group_instance_id if with_metadata else None,
            request.generation_id if with_metadata else -1,
            offsets,
        )
        code = await broker.groups.wait_replicated(request.group_id)
        if code != ErrorCode.NONE:
            committed = {tp: code if result == ErrorCode.NONE else result for tp, result in committed.items()}
    except ApiError as error:
        committed = dict.fromkeys(offsets, error.code)
    results.update(committed)
    return _response(request, results)
