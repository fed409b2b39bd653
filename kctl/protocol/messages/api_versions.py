"""ApiVersions (key 18), v0–4, flexible from v3.

The client's first request: which versions of which APIs the broker speaks. Its response always uses
response header v0 (even in flexible versions), and a request at a version the broker does not speak
is answered in the v0 layout with UNSUPPORTED_VERSION — see ``kctl.protocol.codec``.
"""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BOOL, INT16, INT32, INT64, STRING, Field, array, struct

ApiVersionsRequest = struct(
    "ApiVersionsRequest",
    Field("client_software_name", STRING, "3+"),
    Field("client_software_version", STRING, "3+"),
)

ApiVersion = struct(
    "ApiVersion",
    Field("api_key", INT16),
    Field("min_version", INT16),
    Field("max_version", INT16),
)

SupportedFeatureKey = struct(
    "SupportedFeatureKey",
    Field("name", STRING, "3+"),
    Field("min_version", INT16, "3+"),
    Field("max_version", INT16, "3+"),
)

FinalizedFeatureKey = struct(
    "FinalizedFeatureKey",
    Field("name", STRING, "3+"),
    Field("max_version_level", INT16, "3+"),
    Field("min_version_level", INT16, "3+"),
)

ApiVersionsResponse = struct(
    "ApiVersionsResponse",
    Field("error_code", INT16),
    Field("api_keys", array(ApiVersion)),
    Field("throttle_time_ms", INT32, "1+"),
    Field("supported_features", array(SupportedFeatureKey), "3+", tag=0),
    Field("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
    Field("finalized_features", array(FinalizedFeatureKey), "3+", tag=2),
    Field("zk_migration_ready", BOOL, "3+", tag=3, default=False),
)

SCHEMA = ApiSchema(18, "ApiVersions", "0-4", "3+", ApiVersionsRequest, ApiVersionsResponse)
