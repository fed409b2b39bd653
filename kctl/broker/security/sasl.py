"""SASL on the broker: one ``Session`` per connection (its principal, whether it is authenticated, the
state of its SASL exchange) and the server side of PLAIN and SCRAM-SHA-256/512.

The state machine (as Kafka's SaslServerAuthenticator): a SASL listener's connection starts
unauthenticated; only ApiVersions, SaslHandshake and SaslAuthenticate are served (the server closes
it on anything else). SaslHandshake picks an enabled mechanism (else UNSUPPORTED_SASL_MECHANISM);
after a v0 handshake the client sends raw size-prefixed SASL tokens, after v1 SaslAuthenticate
requests. PLAIN takes one token (``authzid NUL user NUL password``, checked against the listener's
JAAS ``user_<name>`` entries in constant time); SCRAM two (client-first, client-final; credentials
from the security store). A failure is logged and answered with SASL_AUTHENTICATION_FAILED (or, for
raw tokens, by closing), and the connection is closed. With ``connections.max.reauth.ms`` the
session has a lifetime (told to the client in SaslAuthenticate v1+): once it is over, anything but a
re-authentication closes the connection."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kctl.broker.security.listeners import ANONYMOUS, ListenerSecurity
from kctl.common.scram import MECHANISMS, ScramCredential, ScramError, ScramServer

log = logging.getLogger("kctl.broker.security")

#: user name -> {mechanism: stored credential text}; may block (ZooKeeper): called in a thread
CredentialLookup = Callable[[str], dict[str, str]]


class AuthenticationError(Exception):
    """The client failed to authenticate (the message is safe to send back)."""


class _Plain:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.done = False
        self.username = ""

    async def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationError("malformed PLAIN token")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationError("authorization id must be empty or the user name")
        expected = self._users.get(user)
        # compare against something even for an unknown user, so timing does not tell
        ok = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\0" * 16).encode()
        )
        if expected is None or not ok:
            raise AuthenticationError(f"Authentication failed: Invalid username or password (user {user!r})")
        self.username, self.done = user, True
        return b""


class _Scram:
    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self._server = ScramServer(mechanism)
        self._mechanism = mechanism
        self._lookup = lookup
        self._round = 0
        self.done = False
        self.username = ""

    async def step(self, token: bytes) -> bytes:
        try:
            if self._round == 0:
                self._round = 1
                user = self._server.first(token)
                stored = (await asyncio.to_thread(self._lookup, user)).get(self._mechanism)
                credential = ScramCredential.from_text(stored) if stored else None
                return self._server.server_first(credential)
            if self._round == 1:
                self._round = 2
                final = self._server.final(token)
                self.username, self.done = self._server.username, True
                return final
        except ScramError as error:
            raise AuthenticationError(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self._mechanism} (user {self._server.username!r}: {error})"
            ) from None
        raise AuthenticationError("unexpected SASL token after the exchange ended")


@dataclass
class Session:
    """The security state of one connection."""

    listener: ListenerSecurity
    principal: str = ANONYMOUS
    authenticated: bool = True
    mechanism: str | None = None
    raw_tokens: bool = False  # after SaslHandshake v0: raw SASL tokens follow
    close_after_response: bool = False
    expires_at: float | None = None
    _exchange: _Plain | _Scram | None = None

    @classmethod
    def start(cls, listener: ListenerSecurity | None, principal: str = ANONYMOUS) -> Session:
        if listener is None:
            listener = ListenerSecurity("PLAINTEXT", "PLAINTEXT")
        return cls(listener, principal=principal, authenticated=not listener.sasl)

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def handshake(self, mechanism: str) -> bool:
        """SaslHandshake: whether ``mechanism`` is enabled (the exchange starts if so)."""
        mechanism = mechanism.upper()
        if mechanism not in self.listener.mechanisms or (
            mechanism != "PLAIN" and mechanism not in MECHANISMS
        ):
            return False
        self.mechanism = mechanism
        self._exchange = None
        return True

    async def authenticate(self, token: bytes, lookup: CredentialLookup) -> bytes:
        """One SASL token from the client; the challenge (or final message) to send back. Raises
        AuthenticationError (the connection is to be closed after the answer)."""
        if self.mechanism is None:
            raise AuthenticationError("SaslAuthenticate before SaslHandshake")
        if self._exchange is None:
            self._exchange = (
                _Plain(self.listener.plain_users)
                if self.mechanism == "PLAIN"
                else _Scram(self.mechanism, lookup)
            )
        exchange = self._exchange
        try:
            answer = await exchange.step(token)
        except AuthenticationError:
            self.close_after_response = True
            raise
        if exchange.done:
            self.principal = f"User:{exchange.username}"
            self.authenticated = True
            self.raw_tokens = False
            self._exchange = None
            reauth = self.listener.reauth_ms
            self.expires_at = time.monotonic() + reauth / 1000 if reauth > 0 else None
        return answer

    @property
    def session_lifetime_ms(self) -> int:
        if self.expires_at is None:
            return 0
        return max(int((self.expires_at - time.monotonic()) * 1000), 1)
