"""SASL: SaslHandshake (key 17, v0–1, never flexible) and SaslAuthenticate (key 36, v0–2, flexible
from v2). Handshake v0 is followed by raw SASL tokens; v1 by SaslAuthenticate requests."""

from __future__ import annotations

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import BYTES, INT16, INT64, STRING, Field, array, struct

SaslHandshakeRequest = struct(
    "SaslHandshakeRequest",
    Field("mechanism", STRING),
)

SaslHandshakeResponse = struct(
    "SaslHandshakeResponse",
    Field("error_code", INT16),
    Field("mechanisms", array(STRING)),
)

SASL_HANDSHAKE = ApiSchema(17, "SaslHandshake", "0-1", "none", SaslHandshakeRequest, SaslHandshakeResponse)

SaslAuthenticateRequest = struct(
    "SaslAuthenticateRequest",
    Field("auth_bytes", BYTES),
)

SaslAuthenticateResponse = struct(
    "SaslAuthenticateResponse",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable="0+"),
    Field("auth_bytes", BYTES),
    Field("session_lifetime_ms", INT64, "1+", default=0),
)

SASL_AUTHENTICATE = ApiSchema(
    36, "SaslAuthenticate", "0-2", "2+", SaslAuthenticateRequest, SaslAuthenticateResponse
)
