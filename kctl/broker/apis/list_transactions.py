"""ListTransactions: the transactional ids this broker coordinates (clients ask every broker), filtered
by state (Kafka's state names; those that are not one are reported back in ``unknown_state_filters``,
as Kafka does), producer id, and (v1+) the open transaction's duration and (v2+) a regular expression
the id must match whole. Only the ids the principal may DESCRIBE are listed. While a
``__transaction_state`` partition is being loaded the answer is COORDINATOR_LOAD_IN_PROGRESS.

Versions: v0-2 (flexible). v1+ filter by duration, v2+ by a transactional id pattern."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.transaction.operations import listed
from kctl.broker.transaction.state import TransactionState
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.transactions import (
    ListedTransactionState,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

#: Kafka's transaction states (TransactionState.name)
TRANSACTION_STATES = frozenset(state.kafka_name for state in TransactionState)


@api_handler(ApiKey.LIST_TRANSACTIONS, versions=(0, 2))
async def handle(
    broker: TransactionServices, context: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    unknown = [s for s in request.state_filters if s not in TRANSACTION_STATES]
    coordinator = broker.transactions
    if coordinator.loading:
        return ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            unknown_state_filters=unknown,
            transaction_states=[],
        )
    try:
        found = listed(
            coordinator,
            [s for s in request.state_filters if s in TRANSACTION_STATES],
            request.producer_id_filters,
            request.duration_filter,
            request.transactional_id_pattern,
        )
    except re.error:
        return ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            unknown_state_filters=unknown,
            transaction_states=[],
        )
    if unknown and not [s for s in request.state_filters if s in TRANSACTION_STATES]:
        found = []  # only unknown states asked for: none matches
    states = [
        ListedTransactionState(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            transaction_state=m.state.kafka_name,
        )
        for m in found
        if m.producer_epoch >= 0
        and context.allowed(
            AclOperation.DESCRIBE,
            AclResourceType.TRANSACTIONAL_ID,
            m.transactional_id,
            log_denied=False,
        )
    ]
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=states
    )
