"""AddOffsetsToTxn: a transactional producer adds a consumer group's ``__consumer_offsets`` partition
to its transaction (``send_offsets_to_transaction``), so that the transaction's COMMIT or ABORT marker
is written there too (where the group coordinator makes the offsets committed in the transaction
visible, or drops them). The topic is created on first use, as by FindCoordinator.

Needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
(GROUP_AUTHORIZATION_FAILED); then answers as AddPartitionsToTxn does for the one partition
(PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2).

Versions: v0-4 (v3+ flexible), as Kafka 3.9."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.group.coordinator import OFFSETS_TOPIC
from kctl.broker.transaction.operations import add_partitions
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

FIRST_PRODUCER_FENCED_VERSION = 2


async def _add(broker: TransactionServices, context: RequestContext, request: AddOffsetsToTxnRequest) -> int:
    tid = request.transactional_id
    if not context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, tid):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not context.allowed(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    try:
        broker.groups.coordinator_for(request.group_id)  # creates __consumer_offsets on first use
        tp = TopicPartition(OFFSETS_TOPIC, broker.groups.partition_of(request.group_id))
        await add_partitions(broker.transactions, tid, request.producer_id, request.producer_epoch, [tp])
    except ApiError as error:
        return error.code
    except OSError:  # the offsets topic's logs could not be created
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


@api_handler(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4))
async def handle(
    broker: TransactionServices, context: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    code = await _add(broker, context, request)
    if code == ErrorCode.PRODUCER_FENCED and context.header.api_version < FIRST_PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
