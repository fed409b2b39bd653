"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0, flexible. The
client salts the password: an upsertion carries the salt, the salted password and the iterations;
mechanisms are 1 (SCRAM-SHA-256) and 2 (SCRAM-SHA-512)."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BYTES, INT8, INT16, INT32, STRING, Field, array, struct

UserName = struct("UserName", Field("name", STRING))

DescribeUserScramCredentialsRequest = struct(
    "DescribeUserScramCredentialsRequest",
    Field("users", array(UserName), nullable="0+", default=None),
)

CredentialInfo = struct("CredentialInfo", Field("mechanism", INT8), Field("iterations", INT32))

DescribeUserScramCredentialsResult = struct(
    "DescribeUserScramCredentialsResult",
    Field("user", STRING),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("credential_infos", array(CredentialInfo)),
)

DescribeUserScramCredentialsResponse = struct(
    "DescribeUserScramCredentialsResponse",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
    Field("results", array(DescribeUserScramCredentialsResult)),
)

DESCRIBE_USER_SCRAM_CREDENTIALS = ApiSchema(
    50,
    "DescribeUserScramCredentials",
    "0",
    "0+",
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

ScramCredentialDeletion = struct("ScramCredentialDeletion", Field("name", STRING), Field("mechanism", INT8))

ScramCredentialUpsertion = struct(
    "ScramCredentialUpsertion",
    Field("name", STRING),
    Field("mechanism", INT8),
    Field("iterations", INT32),
    Field("salt", BYTES),
    Field("salted_password", BYTES),
)

AlterUserScramCredentialsRequest = struct(
    "AlterUserScramCredentialsRequest",
    Field("deletions", array(ScramCredentialDeletion)),
    Field("upsertions", array(ScramCredentialUpsertion)),
)

AlterUserScramCredentialsResult = struct(
    "AlterUserScramCredentialsResult",
    Field("user", STRING),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+", default=None),
)

AlterUserScramCredentialsResponse = struct(
    "AlterUserScramCredentialsResponse",
    Field("throttle_time_ms", INT32),
    Field("results", array(AlterUserScramCredentialsResult)),
)

ALTER_USER_SCRAM_CREDENTIALS = ApiSchema(
    51,
    "AlterUserScramCredentials",
    "0",
    "0+",
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
