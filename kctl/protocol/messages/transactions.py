"""The transaction admin APIs: DescribeTransactions (key 65), v0, and ListTransactions (key 66),
v0–2, flexible in every version. v1 of ListTransactions filters by duration, v2 by a transactional id
pattern."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import INT16, INT32, INT64, STRING, Field, array, struct

DescribeTransactionsRequest = struct(
    "DescribeTransactionsRequest",
    Field("transactional_ids", array(STRING)),
)

TransactionTopicData = struct(
    "TransactionTopicData",
    Field("topic", STRING),
    Field("partitions", array(INT32)),
)

DescribedTransactionState = struct(
    "DescribedTransactionState",
    Field("error_code", INT16),
    Field("transactional_id", STRING),
    Field("transaction_state", STRING),
    Field("transaction_timeout_ms", INT32),
    Field("transaction_start_time_ms", INT64),
    Field("producer_id", INT64),
    Field("producer_epoch", INT16),
    Field("topics", array(TransactionTopicData)),
)

DescribeTransactionsResponse = struct(
    "DescribeTransactionsResponse",
    Field("throttle_time_ms", INT32),
    Field("transaction_states", array(DescribedTransactionState)),
)

ListTransactionsRequest = struct(
    "ListTransactionsRequest",
    Field("state_filters", array(STRING)),
    Field("producer_id_filters", array(INT64)),
    Field("duration_filter", INT64, "1+", default=-1),
    Field("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),
)

ListedTransactionState = struct(
    "ListedTransactionState",
    Field("transactional_id", STRING),
    Field("producer_id", INT64),
    Field("transaction_state", STRING),
)

ListTransactionsResponse = struct(
    "ListTransactionsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("unknown_state_filters", array(STRING)),
    Field("transaction_states", array(ListedTransactionState)),
)

DESCRIBE_SCHEMA = ApiSchema(
    65, "DescribeTransactions", "0", "0+", DescribeTransactionsRequest, DescribeTransactionsResponse
)
LIST_SCHEMA = ApiSchema(
    66, "ListTransactions", "0-2", "0+", ListTransactionsRequest, ListTransactionsResponse
)
