"""AddPartitionsToTxn: a transactional producer adds the partitions it is about to write to its
transaction (kctl.broker.transaction.operations.add_partitions), before its first Produce to each.

v0-3 (from producers): needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
every partition) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic or partition that does not
exist is UNKNOWN_TOPIC_OR_PARTITION; when some partition has such an error the others answer
OPERATION_NOT_ATTEMPTED and nothing is added. Otherwise every partition answers the coordinator's code:
NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS (the previous transaction's markers are
still being written; the producer retries).

v4+ (KIP-890, between brokers) need CLUSTER_ACTION (else the top-level CLUSTER_AUTHORIZATION_FAILED) and
carry several transactions, each answered on its own; one with ``verify_only`` adds nothing and answers
per partition whether it is in the producer's open transaction (NONE or INVALID_TXN_STATE).

Versions: v0-4 (v3+ flexible), as Kafka 3.9."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.transaction.operations import add_partitions, verify_partitions
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

FIRST_PRODUCER_FENCED_VERSION = 2
FIRST_BATCHED_VERSION = 4


def _results(codes: dict[TopicPartition, int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=tp.partition, partition_error_code=code)
        )
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=r) for t, r in by_topic.items()]


def _partitions(topics: list[Any]) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in topics for index in topic.partitions]


async def _add(
    broker: TransactionServices,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: list[TopicPartition],
) -> int:
    try:
        await add_partitions(broker.transactions, transactional_id, producer_id, epoch, partitions)
    except ApiError as error:
        return error.code
    return ErrorCode.NONE


async def _from_producer(
    broker: TransactionServices, context: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    tid = request.v3_and_below_transactional_id
    partitions = _partitions(request.v3_and_below_topics)
    codes: dict[TopicPartition, int] = {}
    if not context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, tid):
        codes = dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(codes))
    for tp in partitions:
        record = broker.metadata.topic(tp.topic)
        if not context.allowed(AclOperation.WRITE, AclResourceType.TOPIC, tp.topic):
            codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif record is None or tp.partition not in record.assignment:
            codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if codes:
        for tp in partitions:
            codes.setdefault(tp, ErrorCode.OPERATION_NOT_ATTEMPTED)
    else:
        code = await _add(
            broker, tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, partitions
        )
        if code == ErrorCode.PRODUCER_FENCED and context.header.api_version < FIRST_PRODUCER_FENCED_VERSION:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        codes = dict.fromkeys(partitions, code)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(codes))


async def _from_broker(broker: TransactionServices, transaction: Any) -> AddPartitionsToTxnResult:
    partitions = _partitions(transaction.topics)
    args = (transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, partitions)
    codes: dict[TopicPartition, int]
    if transaction.verify_only:
        try:
            codes = verify_partitions(broker.transactions, *args)
        except ApiError as error:
            codes = dict.fromkeys(partitions, error.code)
    else:
        codes = dict.fromkeys(partitions, await _add(broker, *args))
    return AddPartitionsToTxnResult(
        transactional_id=transaction.transactional_id, topic_results=_results(codes)
    )


@api_handler(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 4))
async def handle(
    broker: TransactionServices, context: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if context.header.api_version < FIRST_BATCHED_VERSION:
        return await _from_producer(broker, context, request)
    denied = context.cluster_action_denied(AclOperation.CLUSTER_ACTION)
    if denied is not None:
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=denied[0], results_by_transaction=[])
    results = [await _from_broker(broker, transaction) for transaction in request.transactions]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
