"""EndTxn: a transactional producer commits or aborts its transaction
(kctl.broker.transaction.operations.end_transaction). Answered once PrepareCommit/PrepareAbort is
written (replicated); the markers and CompleteCommit/CompleteAbort follow, and the producer's next
AddPartitionsToTxn answers CONCURRENT_TRANSACTIONS until they are done.

Needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Errors: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
before v2), CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE (nothing to end, or the other result already
chosen); a retry of an EndTxn already done answers NONE.

Versions: v0-4 (v3+ flexible), as Kafka 3.9."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.transaction.operations import end_transaction
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

FIRST_PRODUCER_FENCED_VERSION = 2


@api_handler(ApiKey.END_TXN, versions=(0, 4))
async def handle(
    broker: TransactionServices, context: RequestContext, request: EndTxnRequest
) -> EndTxnResponse:
    tid = request.transactional_id
    code: int = ErrorCode.NONE
    if not context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, tid):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        try:
            await end_transaction(
                broker.transactions, tid, request.producer_id, request.producer_epoch, request.committed
            )
        except ApiError as error:
            code = error.code
    if code == ErrorCode.PRODUCER_FENCED and context.header.api_version < FIRST_PRODUCER_FENCED_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
