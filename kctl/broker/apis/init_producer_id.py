"""InitProducerId: a producer id and epoch for an idempotent producer (a new id, or the same id with
its epoch bumped when the producer asks, KIP-360). Transactions are not supported: a request with a
transactional id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal in clients, as FindCoordinator's answer
for a transaction key, so a transactional producer fails at once). Without a transactional id the
producer needs IdempotentWrite on the cluster or Write on some topic, judged by resource type as Kafka
does (KIP-679): a prefixed or literal ALLOW counts even before a topic it covers exists.

Versions: v0-5. v2+ are flexible; v3+ carry the producer's current id and epoch, so an idempotent producer
can ask for its epoch to be bumped (KIP-360)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.acls import allowed, allowed_by_resource_type, log_denial
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext

MAX_EPOCH = 32767


@api_handler(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
async def handle(
    broker: Broker, context: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    idempotent_write = (AclOperation.IDEMPOTENT_WRITE, AclResourceType.CLUSTER, CLUSTER_NAME)
    if not (
        allowed(broker, context, *idempotent_write, log_denied=False)
        or allowed_by_resource_type(broker, context, AclOperation.WRITE, AclResourceType.TOPIC)
    ):  # Write on some topic is enough (Kafka's rule): only a producer refused both is reported
        log_denial(broker, context, *idempotent_write)
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
