"""The broker as a client of other brokers (replica fetchers): how it connects to the inter-broker
listener (``inter.broker.listener.name``), as Kafka's inter-broker client does.

The listener's protocol (from ``listener.security.protocol.map``) says whether to speak TLS and SASL.
TLS trusts the listener's trust store (``ssl.truststore.*``, overridable per listener), presents the
broker's own key store (so ``ssl.client.auth=required`` on the inter-broker listener works), honours
``ssl.enabled.protocols`` / ``ssl.cipher.suites``, and checks the other broker's host name when
``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default). SASL uses
``sasl.mechanism.inter.broker.protocol`` with the ``username`` / ``password`` options of the
listener's JAAS configuration — ``listener.name.<l>.<mechanism>.sasl.jaas.config``, then
``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config`` — as Kafka's login modules read
them. The principal the other brokers see is what the authorizer checks for ClusterAction (a super
user, or an ACL), as in Kafka."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.broker.security.listeners import (
    _TLS_VERSIONS,
    PROTOCOLS,
    SecurityConfigError,
    listener_value,
    parse_jaas,
    parse_protocol_map,
)
from kctl.common.scram import MECHANISMS, ScramClient, ScramError
from kctl.protocol.errors import ErrorCode, error_name
from kctl.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kctl.protocol.registry import ApiKey

SASL_MECHANISMS = ("PLAIN", *MECHANISMS)

#: send(api_key, version, body) -> response body (the channel's request function)
Send = Callable[[int, int, Any], Awaitable[Any]]


class InterBrokerAuthenticationError(Exception):
    """The other broker refused this broker's credentials (or the exchange went wrong)."""


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How to connect to another broker's inter-broker listener ``listener``."""

    listener: str
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    async def authenticate(self, send: Send) -> int:
        """SaslHandshake v1 and SaslAuthenticate v1 over a connection that has done ApiVersions;
        the session lifetime in ms the other broker announced (0: none). Raises
        InterBrokerAuthenticationError."""
        assert self.mechanism is not None and self.username is not None and self.password is not None
        handshake = await send(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=self.mechanism))
        if handshake.error_code != ErrorCode.NONE:
            raise InterBrokerAuthenticationError(
                f"listener {self.listener} does not accept SASL mechanism {self.mechanism} "
                f"(it offers {', '.join(handshake.mechanisms)})"
            )
        lifetime = 0

        async def step(token: bytes) -> bytes:
            nonlocal lifetime
            response = await send(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=token))
            if response.error_code != ErrorCode.NONE:
                raise InterBrokerAuthenticationError(
                    response.error_message or error_name(response.error_code)
                )
            lifetime = int(getattr(response, "session_lifetime_ms", 0) or 0)
            return bytes(response.auth_bytes)

        if self.mechanism == "PLAIN":
            await step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return lifetime
        scram = ScramClient(self.mechanism, self.username, self.password)
        try:
            server_first = await step(scram.first())
            scram.verify(await step(scram.final(server_first)))
        except ScramError as error:
            raise InterBrokerAuthenticationError(f"SCRAM authentication failed: {error}") from None
        return lifetime


def _list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value or []]


def client_ssl_context(
    properties: Mapping[str, Any], values: Mapping[str, Any], listener: str
) -> tuple[ssl.SSLContext, bool]:
    """The TLS client context for ``listener`` and whether host names are checked."""

    def get(key: str) -> Any:
        return listener_value(properties, values, listener, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = [
        _TLS_VERSIONS[p.upper()] for p in _list(get("ssl.enabled.protocols")) if p.upper() in _TLS_VERSIONS
    ]
    if versions:
        context.minimum_version, context.maximum_version = min(versions), max(versions)
    ciphers = _list(get("ssl.cipher.suites"))
    if ciphers:
        context.set_ciphers(":".join(ciphers))
    trust_location, trust_text = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if trust_location:
        context.load_verify_locations(cafile=trust_location)
    elif trust_text:
        context.load_verify_locations(cadata=trust_text)
    else:
        context.load_default_certs()
    check_hostname = str(get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    context.check_hostname = check_hostname
    location = get("ssl.keystore.location")
    if location:  # present our own certificate: the inter-broker listener may require one
        context.load_cert_chain(location, password=get("ssl.key.password"))
    return context, check_hostname


def jaas_for(
    properties: Mapping[str, Any], values: Mapping[str, Any], listener: str, mechanism: str
) -> str | None:
    name = listener.lower()
    return (
        properties.get(f"listener.name.{name}.{mechanism.lower()}.sasl.jaas.config")
        or properties.get(f"listener.name.{name}.sasl.jaas.config")
        or values.get("sasl.jaas.config")
    )


def inter_broker_security(
    properties: Mapping[str, Any], values: Mapping[str, Any], listener: str
) -> InterBrokerSecurity:
    """How this broker connects to listener ``listener`` of the others (raises SecurityConfigError
    when the listener needs material that is not configured)."""
    protocol_map = parse_protocol_map(values.get("listener.security.protocol.map") or "")
    protocol = protocol_map.get(listener.upper())
    if protocol is None:
        if listener.upper() not in PROTOCOLS:
            raise SecurityConfigError(f"listener {listener} is not in listener.security.protocol.map")
        protocol = listener.upper()
    context, check_hostname = None, True
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context, check_hostname = client_ssl_context(properties, values, listener)
        except (OSError, ssl.SSLError) as error:
            raise SecurityConfigError(f"inter-broker listener {listener}: {error}") from None
    if not protocol.startswith("SASL_"):
        return InterBrokerSecurity(listener.upper(), protocol, context, check_hostname)
    mechanism = str(values.get("sasl.mechanism.inter.broker.protocol") or "PLAIN").upper()
    if mechanism not in SASL_MECHANISMS:
        raise SecurityConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism} is not supported "
            f"(kctl: {', '.join(SASL_MECHANISMS)})"
        )
    options = parse_jaas(jaas_for(properties, values, listener, mechanism))
    username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise SecurityConfigError(
            f"inter-broker listener {listener} speaks {protocol}: its JAAS configuration "
            f"(listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config or sasl.jaas.config) "
            'needs username="..." password="..." for this broker'
        )
    return InterBrokerSecurity(
        listener.upper(), protocol, context, check_hostname, mechanism, username, password
    )
