"""InitProducerId: a producer id and epoch. With a transactional id the transaction coordinator answers
(kctl.broker.transaction.operations.init_producer_id): a new producer id on the id's first use, else
the epoch bumped, fencing every older producer of the id (an ongoing transaction is aborted first and
CONCURRENT_TRANSACTIONS answered; the producer retries); it needs WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a timeout within ``transaction.max.timeout.ms``
(INVALID_TRANSACTION_TIMEOUT), and is answered NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS by a broker
that does not coordinate it (yet). Without a transactional id (an idempotent producer) a new id, or the
same id with its epoch bumped when the producer asks (KIP-360); the producer needs IdempotentWrite on the
cluster or Write on some topic, judged by resource type as Kafka does (KIP-679): a prefixed or literal
ALLOW counts even before a topic it covers exists.

Versions: v0-5. v2+ are flexible; v3+ carry the producer's current id and epoch, so a producer can ask
for its epoch to be bumped (KIP-360); PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH before v4."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.transaction.operations import init_producer_id
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

MAX_EPOCH = 32767
FIRST_PRODUCER_FENCED_VERSION = 4


async def _transactional(
    broker: TransactionServices, context: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    tid = request.transactional_id
    assert tid is not None
    if not context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, tid):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    try:
        given = await init_producer_id(
            broker.transactions,
            tid,
            request.transaction_timeout_ms,
            request.producer_id,
            request.producer_epoch,
        )
    except ApiError as error:
        code = error.code
        if code == ErrorCode.PRODUCER_FENCED and context.header.api_version < FIRST_PRODUCER_FENCED_VERSION:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=given.producer_id, producer_epoch=given.producer_epoch
    )


@api_handler(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
async def handle(
    broker: TransactionServices, context: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return await _transactional(broker, context, request)
    idempotent_write = (AclOperation.IDEMPOTENT_WRITE, AclResourceType.CLUSTER, CLUSTER_NAME)
    if not (
        context.allowed(*idempotent_write, log_denied=False)
        or context.allowed_by_resource_type(AclOperation.WRITE, AclResourceType.TOPIC)
    ):  # Write on some topic is enough (Kafka's rule): only a producer refused both is reported
        context.log_denial(*idempotent_write)
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id, epoch = request.producer_id, request.producer_epoch
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=epoch + 1
        )
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=broker.producer_ids.next_id(), producer_epoch=0
    )
