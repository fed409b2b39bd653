"""The key and value formats of ``__transaction_state`` records, as Kafka writes them, so the topic
reads the same with Kafka's own tools: key v0 (the transactional id), value v0 (producer id and
epoch, timeout, state id, the partitions of the transaction, last update and start timestamps). The
layouts are the data schemas of ``kctl.protocol.messages.transaction_log_records``; v1 values
(flexible, with tagged fields) are read too. A null value is a tombstone. Also: which partition of
the topic a transactional id belongs to (Kafka's formula)."""

from __future__ import annotations

from kctl.broker.group.records import java_string_hash
from kctl.broker.transaction.state import TransactionMetadata, TransactionState
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.data import decode_versioned, encode_versioned
from kctl.protocol.exceptions import ProtocolDecodeError
from kctl.protocol.messages.transaction_log_records import (
    TransactionLogKey,
    TransactionLogPartitions,
    TransactionLogValue,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0


class CorruptTransactionRecordError(ValueError):
    """A __transaction_state record that does not parse."""


def partition_for_transactional_id(transactional_id: str, partitions: int) -> int:
    """Kafka's placement of a transactional id in __transaction_state: abs(hashCode) mod partitions."""
    return (java_string_hash(transactional_id) & 0x7FFFFFFF) % partitions


def encode_key(transactional_id: str) -> bytes:
    return encode_versioned(TransactionLogKey(transactional_id=transactional_id), KEY_VERSION)


def encode_value(metadata: TransactionMetadata) -> bytes:
    partitions = [
        TransactionLogPartitions(topic=topic, partition_ids=ids) for topic, ids in metadata.topics().items()
    ]
    value = TransactionLogValue(
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.timeout_ms,
        transaction_status=int(metadata.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=metadata.last_update_ms,
        transaction_start_timestamp_ms=metadata.start_ms,
    )
    return encode_versioned(value, VALUE_VERSION)


def decode_key(data: bytes) -> str:
    try:
        _, key = decode_versioned(TransactionLogKey, data)
    except ProtocolDecodeError as error:
        raise CorruptTransactionRecordError(f"transaction log key: {error}") from None
    transactional_id: str = key.transactional_id
    return transactional_id


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        _, value = decode_versioned(TransactionLogValue, data, allow_trailing=True)
        state = TransactionState(value.transaction_status)
    except (ProtocolDecodeError, ValueError) as error:
        raise CorruptTransactionRecordError(
            f"transaction log value of {transactional_id!r}: {error}"
        ) from None
    partitions = frozenset(
        TopicPartition(p.topic, index)
        for p in value.transaction_partitions or []
        for index in p.partition_ids
    )
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        start_ms=value.transaction_start_timestamp_ms,
        last_update_ms=value.transaction_last_update_timestamp_ms,
        last_producer_id=value.previous_producer_id,
    )
