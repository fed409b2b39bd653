"""DescribeTransactions: the state of transactional ids this broker coordinates, from the transaction
coordinator's memory (kctl.broker.transaction): state name (Kafka's: ``Ongoing``, ``PrepareCommit``...),
timeout, start time of the open transaction (-1 when none), producer id and epoch, the partitions of the
transaction by topic. Each id needs DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an id this
broker does not coordinate is NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while loading), one it does
but does not know TRANSACTIONAL_ID_NOT_FOUND.

Versions: v0 only (flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.transaction.state import TransactionState
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.transactions import (
    DescribedTransactionState,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionTopicData,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext


def _describe(
    broker: TransactionServices, context: RequestContext, transactional_id: str
) -> DescribedTransactionState:
    described = DescribedTransactionState(
        error_code=ErrorCode.NONE,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
        topics=[],
    )
    if not context.allowed(AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, transactional_id):
        described.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return described
    coordinator = broker.transactions
    try:
        coordinator.check_owner(transactional_id)
    except ApiError as error:
        described.error_code = error.code
        return described
    metadata = coordinator.transactions.get(transactional_id)
    if metadata is None or metadata.producer_epoch < 0:
        described.error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        return described
    described.transaction_state = metadata.state.kafka_name
    described.transaction_timeout_ms = metadata.timeout_ms
    if metadata.state != TransactionState.EMPTY:
        described.transaction_start_time_ms = metadata.start_ms
    described.producer_id = metadata.producer_id
    described.producer_epoch = metadata.producer_epoch
    described.topics = [
        TransactionTopicData(topic=topic, partitions=partitions)
        for topic, partitions in metadata.topics().items()
    ]
    return described


@api_handler(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
async def handle(
    broker: TransactionServices, context: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states = [_describe(broker, context, tid) for tid in request.transactional_ids]
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
