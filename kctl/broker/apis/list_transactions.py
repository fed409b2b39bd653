"""ListTransactions: kctl has no transactions, so the list is empty whatever the filters; state
filters that are not one of Kafka's transaction states are reported back in
``unknown_state_filters``, as Kafka does.

Versions: v0-2 (flexible). v1+ filter by duration, v2+ by a transactional id pattern."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.messages.transactions import ListTransactionsRequest, ListTransactionsResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext

#: Kafka's transaction states (TransactionState.name)
TRANSACTION_STATES = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
)


@api_handler(ApiKey.LIST_TRANSACTIONS, versions=(0, 2))
async def handle(
    broker: Broker, context: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    unknown = [s for s in request.state_filters if s not in TRANSACTION_STATES]
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=[]
    )
