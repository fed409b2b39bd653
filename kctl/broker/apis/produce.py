"""Produce: append each partition's record batches (validated and offset-assigned as bytes) and
answer with the base offsets; acks=0 sends no response, acks=1 answers after the local append.
acks=-1 (all): refused with NOT_ENOUGH_REPLICAS before appending when the ISR is smaller than
min.insync.replicas; otherwise parked until the high watermark passes the last offset appended
(REQUEST_TIMED_OUT after the request's timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
below min.insync.replicas meanwhile). In embedded mode (one replica) it is answered at once.

Versions: v0-11. v0-2 carry the pre-0.11 message formats (magic 0 and 1), converted to one RecordBatch
v2 per partition before anything else looks at them (:mod:`kctl.records.upconvert`, as Kafka's brokers
up-convert them; CORRUPT_MESSAGE for a set that does not frame or fails a CRC); a RecordBatch (magic 2)
in them is taken as v3 takes it. v3+
carry record batches and a transactional id; v2+ answer with
log_append_time_ms, v5+ with the log start offset, v8+ with record errors and an error message; v9+ are
flexible.

Validation (as Kafka's): v3+ carry exactly one magic-2 batch per partition (INVALID_RECORD), zstd
needs v7+ (UNSUPPORTED_COMPRESSION_TYPE); the log then validates the batch
(:mod:`kctl.log.validation`): CORRUPT_MESSAGE for framing, CRC, codec or records that do not parse,
INVALID_RECORD for rule breaks, and per-record ``record_errors`` with INVALID_RECORD (a record without
a key on a compacted topic) or INVALID_TIMESTAMP (``message.timestamp.before/after.max.ms``).

Transactional batches (attribute bit 0x10): the log opens the producer's transaction at the first one
(:mod:`kctl.log.transactions`). As in Kafka, a request whose partitions' first batches include a
transactional one needs a transactional id with WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
every partition otherwise, also when the id is null); the id is not checked for other requests. A
non-transactional batch from a producer whose transaction is ongoing on the partition is
INVALID_TXN_STATE. A transactional batch that would open a transaction on the partition is appended
only once the coordinator confirmed the partition is in the producer's transaction (KIP-890 part 1,
:mod:`kctl.broker.transaction.verification`): INVALID_TXN_STATE otherwise, nothing appended.
Requests without transactional batches never look at it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.quotas import PRODUCE, throttle_request
from kctl.broker.replica_manager import RecordErrorsApiError
from kctl.common.topic_partition import TopicPartition
from kctl.log.validation import UnsupportedCompressionError, check_produce_records
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode, error_name
from kctl.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kctl.protocol.registry import ApiKey
from kctl.records.header import ATTRIBUTES_OFFSET, MAGIC_OFFSET, TRANSACTIONAL_FLAG_MASK
from kctl.records.legacy import InvalidLegacyMessage
from kctl.records.upconvert import up_convert
from kctl.records.validate import InvalidRecordError, RecordError

if TYPE_CHECKING:
    from kctl.broker.handler_services import ProduceServices
    from kctl.broker.request_context import RequestContext

FIRST_RECORD_BATCH_VERSION = 3  # v0-2 carry the pre-0.11 message formats, up-converted on arrival
#: refusals for what the records hold: their bytes count as BytesRejected
REJECTED_RECORDS = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    }
)

log = logging.getLogger("kctl.broker.produce")


def _partition_response(
    index: int, code: int, message: str | None = None, record_errors: list[RecordError] | None = None
) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[
            BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
            for e in record_errors or ()
        ],
        error_message=message,
    )


async def _wait_for_replication(
    broker: ProduceServices,
    waits: list[tuple[int, list[PartitionProduceResponse], TopicPartition, int]],
    timeout_ms: int,
) -> None:
    """acks=all: park until each appended partition's high watermark passes its last offset (or the
    request's timeout); a partition that fails gets its error code instead of its offsets."""
    timeout = max(timeout_ms, 0) / 1000
    codes = await asyncio.gather(
        *(broker.replicas.wait_for_replication(tp, required, timeout) for _i, _p, tp, required in waits)
    )
    for (index, partitions, tp, _required), code in zip(waits, codes, strict=True):
        if code != ErrorCode.NONE:
            # leadership moving is routine (the client retries on the new leader); the rest is not
            level = logging.DEBUG if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else logging.INFO
            log.log(level, "acks=all produce to %s: %s", tp, error_name(code))
            partitions[index] = _partition_response(partitions[index].index, code)


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether a partition's first batch is transactional (Kafka's check: one byte per partition)."""
    low_attributes = ATTRIBUTES_OFFSET + 1  # attributes are an int16; the flags are in its low byte
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records
            if (
                records is not None
                and len(records) > low_attributes
                and records[MAGIC_OFFSET] >= 2
                and records[low_attributes] & TRANSACTIONAL_FLAG_MASK
            ):
                return True
    return False


@api_handler(ApiKey.PRODUCE, versions=(0, 11))
async def handle(
    broker: ProduceServices, context: RequestContext, request: ProduceRequest
) -> ProduceResponse | None:
    version = context.header.api_version
    acks = request.acks
    responses = []
    stats = broker.metrics.stats  # counted once per partition (kctl.broker.metrics)
    waits: list[tuple[int, list[PartitionProduceResponse], TopicPartition, int]] = []
    # as Kafka: transactional batches need a transactional id with WRITE on it (checked only then)
    transactional = version >= FIRST_RECORD_BATCH_VERSION and _has_transactional_records(request)
    txn_id = request.transactional_id
    txn_writable = not transactional or (
        txn_id is not None
        and context.allowed(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, txn_id)
    )
    verdicts = None
    if transactional and txn_writable and broker.txn_verifier.enabled:
        assert txn_id is not None
        parked = time.monotonic()
        verdicts = await broker.txn_verifier.verify_produce(txn_id, request)  # KIP-890: asks the coordinator
        context.remote_time += time.monotonic() - parked
    for topic in request.topic_data:
        partitions = []
        writable = context.allowed(AclOperation.WRITE, AclResourceType.TOPIC, topic.name)
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            try:
                if not txn_writable:
                    raise ApiError(
                        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        f"WRITE on transactional id {request.transactional_id!r} denied",
                    )
                if not writable:
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"WRITE on {topic.name!r} denied")
                if acks not in (0, 1, -1):
                    raise ApiError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} must be 0, 1 or -1")
                if data.records is None or len(data.records) == 0:
                    raise ApiError(ErrorCode.CORRUPT_MESSAGE, "no records")
                if version < FIRST_RECORD_BATCH_VERSION and data.records[MAGIC_OFFSET] < 2:
                    try:
                        data.records = up_convert(data.records)
                    except InvalidLegacyMessage as error:
                        raise ApiError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
                try:
                    check_produce_records(data.records, max(version, FIRST_RECORD_BATCH_VERSION))
                except UnsupportedCompressionError as error:
                    raise ApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(error)) from None
                except InvalidRecordError as error:
                    raise ApiError(ErrorCode.INVALID_RECORD, str(error)) from None
                broker.topics.ensure_topic_for_produce(topic.name)
                if verdicts is not None:
                    verdicts.admit(tp)  # no await from here to the append: a marker cannot slip between
                info = broker.replicas.append(tp, data.records, acks=acks)
            except ApiError as error:
                if error.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                    log.warning("produce to %s from %s rejected: %s", tp, context.client_host, error.message)
                record_errors = error.record_errors if isinstance(error, RecordErrorsApiError) else None
                rejected = error.code in REJECTED_RECORDS and data.records is not None
                known = broker.metadata.topic(topic.name) is not None
                stats.produce_failed(
                    topic.name, len(data.records) if rejected and data.records else 0, known=known
                )
                partitions.append(_partition_response(data.index, error.code, error.message, record_errors))
                continue
            stats.produced(topic.name, info.records_count, len(data.records))
            if acks == -1 and broker.replicas.replicated:
                waits.append((len(partitions), partitions, tp, info.last_offset + 1))
            partitions.append(
                PartitionProduceResponse(
                    index=data.index,
                    error_code=0,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time,
                    log_start_offset=info.log_start_offset,
                    record_errors=[],
                    error_message=None,
                )
            )
        responses.append(TopicProduceResponse(name=topic.name, partition_responses=partitions))
    nbytes = sum(
        len(d.records) for t in request.topic_data for d in t.partition_data if d.records is not None
    )
    throttle_time_ms = throttle_request(broker.quotas, PRODUCE, context, nbytes)  # producer_byte_rate
    if acks == 0:
        return None
    if waits:
        parked = time.monotonic()
        await _wait_for_replication(broker, waits, request.timeout_ms)
        context.remote_time += time.monotonic() - parked
    return ProduceResponse(responses=responses, throttle_time_ms=throttle_time_ms)
