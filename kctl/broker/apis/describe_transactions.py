"""DescribeTransactions: kctl has no transaction coordinator and no transactions, so every
transactional id asked about is TRANSACTIONAL_ID_NOT_FOUND (what Kafka answers for an id it does not
know). Needs DESCRIBE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

Versions: v0 only (flexible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.acls import allowed
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.transactions import (
    DescribedTransactionState,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext


@api_handler(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
async def handle(
    broker: Broker, context: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states = []
    for transactional_id in request.transactional_ids:
        permitted = allowed(
            broker, context, AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, transactional_id
        )
        states.append(
            DescribedTransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
                if permitted
                else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                transactional_id=transactional_id,
                transaction_state="",
                transaction_timeout_ms=0,
                transaction_start_time_ms=-1,
                producer_id=-1,
                producer_epoch=-1,
                topics=[],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
