"""SaslHandshake: the client names its SASL mechanism (kctl.broker.security.sasl holds the state).

Versions: v0-1. After v0 the client sends raw SASL tokens (answered by the server, unframed); after v1
SaslAuthenticate requests. An unsupported mechanism is UNSUPPORTED_SASL_MECHANISM with the enabled
ones, and the connection is closed; a handshake on a listener without SASL, or on an authenticated
session that is not due for re-authentication, is ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.sasl import SaslHandshakeRequest, SaslHandshakeResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.SASL_HANDSHAKE, versions=(0, 1))
async def handle(
    broker: SecurityServices, context: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    session = context.session
    if session is None or not session.listener.sasl:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    mechanisms = list(session.listener.mechanisms)
    if session.authenticated and session.expires_at is None:
        session.close_after_response = True
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms)
    if not session.handshake(request.mechanism):
        session.close_after_response = True
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
    if context.header.api_version == 0:
        session.raw_tokens = True
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms)
