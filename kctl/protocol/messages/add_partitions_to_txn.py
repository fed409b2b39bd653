"""AddPartitionsToTxn (key 24), v0–5, flexible from v3: a transactional producer tells its transaction
coordinator the partitions it is about to write to. v0–3 carry one transaction; v4+ (KIP-890, sent
between brokers) carry several, each with ``verify_only`` (check that the partitions are in the
transaction rather than add them), and answer per transaction with a top-level error code."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, array, struct

AddPartitionsToTxnTopic = struct(
    "AddPartitionsToTxnTopic",
    Field("name", STRING),
    Field("partitions", array(INT32)),
)

AddPartitionsToTxnTransaction = struct(
    "AddPartitionsToTxnTransaction",
    Field("transactional_id", STRING, "4+"),
    Field("producer_id", INT64, "4+"),
    Field("producer_epoch", INT16, "4+"),
    Field("verify_only", BOOL, "4+", default=False),
    Field("topics", array(AddPartitionsToTxnTopic), "4+"),
)

AddPartitionsToTxnRequest = struct(
    "AddPartitionsToTxnRequest",
    Field("transactions", array(AddPartitionsToTxnTransaction), "4+"),
    Field("v3_and_below_transactional_id", STRING, "0-3"),
    Field("v3_and_below_producer_id", INT64, "0-3"),
    Field("v3_and_below_producer_epoch", INT16, "0-3"),
    Field("v3_and_below_topics", array(AddPartitionsToTxnTopic), "0-3"),
)

AddPartitionsToTxnPartitionResult = struct(
    "AddPartitionsToTxnPartitionResult",
    Field("partition_index", INT32),
    Field("partition_error_code", INT16),
)

AddPartitionsToTxnTopicResult = struct(
    "AddPartitionsToTxnTopicResult",
    Field("name", STRING),
    Field("results_by_partition", array(AddPartitionsToTxnPartitionResult)),
)

AddPartitionsToTxnResult = struct(
    "AddPartitionsToTxnResult",
    Field("transactional_id", STRING, "4+"),
    Field("topic_results", array(AddPartitionsToTxnTopicResult), "4+"),
)

AddPartitionsToTxnResponse = struct(
    "AddPartitionsToTxnResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, "4+"),
    Field("results_by_transaction", array(AddPartitionsToTxnResult), "4+"),
    Field("results_by_topic_v3_and_below", array(AddPartitionsToTxnTopicResult), "0-3"),
)

SCHEMA = ApiSchema(
    24, "AddPartitionsToTxn", "0-5", "3+", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
)
