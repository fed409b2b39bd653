"""SaslAuthenticate: one SASL token of the exchange begun by SaslHandshake v1.

Versions: v0-2. v1+ answer with the session lifetime (``connections.max.reauth.ms``); v2+ are flexible.
A failed authentication is logged and answered with SASL_AUTHENTICATION_FAILED, and the connection is
closed after the answer; a token before the handshake is ILLEGAL_SASL_STATE (and closes too)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.security.sasl import AuthenticationError
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import SecurityServices
    from kctl.broker.request_context import RequestContext

log = logging.getLogger("kctl.broker.security")


def _failure(code: ErrorCode, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0
    )


@api_handler(ApiKey.SASL_AUTHENTICATE, versions=(0, 2))
async def handle(
    broker: SecurityServices, context: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    session = context.session
    if session is None or not session.listener.sasl or session.mechanism is None:
        if session is not None:
            session.close_after_response = True
        return _failure(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
    try:
        answer = await session.authenticate(bytes(request.auth_bytes), broker.security.credentials)
    except AuthenticationError as error:
        log.warning(
            "SASL authentication from %s:%s failed: %s", context.client_host, context.client_port, error
        )
        session.close_after_response = True
        return _failure(ErrorCode.SASL_AUTHENTICATION_FAILED, str(error))
    if session.authenticated and session.mechanism is not None and answer is not None:
        log.debug("%s authenticated with %s", session.principal, session.mechanism)
    return SaslAuthenticateResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        auth_bytes=answer,
        session_lifetime_ms=session.session_lifetime_ms,
    )
