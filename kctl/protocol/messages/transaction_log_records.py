"""Data schemas (not an API) of the transaction coordinator's ``__transaction_state`` records, written
from the facts of Apache Kafka's TransactionLogKey and TransactionLogValue message specs, so the topic
reads the same with Kafka's own tools. A record's key and value each start with an int16 version:

* TransactionLogKey v0: the transactional id;
* TransactionLogValue v0-1 (flexible from v1): producer id, producer epoch, transaction timeout,
  status (Kafka's TransactionState id), the partitions of the transaction (topic, partition ids;
  nullable), last update and start timestamps; v1 tags: previous producer id (0), next producer id
  (1), the client's transaction version (2).

A null value is a tombstone: the transactional id expired. These modules define ``DataSchema``
objects, never an ``ApiSchema`` named ``SCHEMA``."""

from __future__ import annotations

from kctl.protocol.data import DataSchema
from kctl.protocol.types import INT8, INT16, INT32, INT64, STRING, Field, array, struct

TransactionLogKey = struct("TransactionLogKey", Field("transactional_id", STRING))

TransactionLogPartitions = struct(
    "TransactionLogPartitions",
    Field("topic", STRING),
    Field("partition_ids", array(INT32)),
)

TransactionLogValue = struct(
    "TransactionLogValue",
    Field("producer_id", INT64),
    Field("previous_producer_id", INT64, "1+", tag=0, tagged="1+", default=-1),
    Field("next_producer_id", INT64, "1+", tag=1, tagged="1+", default=-1),
    Field("producer_epoch", INT16),
    Field("transaction_timeout_ms", INT32),
    Field("transaction_status", INT8),
    Field("transaction_partitions", array(TransactionLogPartitions), nullable="0+", default=None),
    Field("transaction_last_update_timestamp_ms", INT64),
    Field("transaction_start_timestamp_ms", INT64),
    Field("client_transaction_version", INT16, "1+", tag=2, tagged="1+", default=0),
)

TRANSACTION_LOG_KEY = DataSchema("TransactionLogKey", "0", "none", TransactionLogKey)
TRANSACTION_LOG_VALUE = DataSchema("TransactionLogValue", "0-1", "1+", TransactionLogValue)
