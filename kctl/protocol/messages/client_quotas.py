"""The client quota APIs: DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0–1 each,
flexible from v1. An entity is a list of (entity type, name) pairs — types ``user``, ``client-id``
(and ``ip``); a null name is the entity's default (``<default>`` in ZooKeeper). A describe filter
component matches by exact name (0), the default (1) or any specified name (2)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Field, array, struct

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

QuotaFilterComponent = struct(
    "QuotaFilterComponent",
    Field("entity_type", STRING),
    Field("match_type", INT8),
    Field("match", STRING, nullable="0+", default=None),
)

DescribeClientQuotasRequest = struct(
    "DescribeClientQuotasRequest",
    Field("components", array(QuotaFilterComponent)),
    Field("strict", BOOL),
)

QuotaEntityData = struct(
    "QuotaEntityData",
    Field("entity_type", STRING),
    Field("entity_name", STRING, nullable="0+", default=None),
)

QuotaValueData = struct(
    "QuotaValueData",
    Field("key", STRING),
    Field("value", FLOAT64),
)

DescribeClientQuotasEntry = struct(
    "DescribeClientQuotasEntry",
    Field("entity", array(QuotaEntityData)),
    Field("values", array(QuotaValueData)),
)

DescribeClientQuotasResponse = struct(
    "DescribeClientQuotasResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("entries", array(DescribeClientQuotasEntry), nullable="0+", default=None),
)

QuotaOpData = struct(
    "QuotaOpData",
    Field("key", STRING),
    Field("value", FLOAT64),
    Field("remove", BOOL),
)

AlterClientQuotasEntry = struct(
    "AlterClientQuotasEntry",
    Field("entity", array(QuotaEntityData)),
    Field("ops", array(QuotaOpData)),
)

AlterClientQuotasRequest = struct(
    "AlterClientQuotasRequest",
    Field("entries", array(AlterClientQuotasEntry)),
    Field("validate_only", BOOL),
)

AlterClientQuotasEntryResult = struct(
    "AlterClientQuotasEntryResult",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("entity", array(QuotaEntityData)),
)

AlterClientQuotasResponse = struct(
    "AlterClientQuotasResponse",
    Field("throttle_time_ms", INT32),
    Field("entries", array(AlterClientQuotasEntryResult)),
)

DESCRIBE_SCHEMA = ApiSchema(
    48, "DescribeClientQuotas", "0-1", "1+", DescribeClientQuotasRequest, DescribeClientQuotasResponse
)
ALTER_SCHEMA = ApiSchema(
    49, "AlterClientQuotas", "0-1", "1+", AlterClientQuotasRequest, AlterClientQuotasResponse
)
