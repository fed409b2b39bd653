"""The client's side of security: TLS and SASL (PLAIN, SCRAM-SHA-256/512) for ``BrokerConnection``,
configured with the property names users already know from librdkafka and the Java client.

``SecuritySettings`` comes from a ``ClientConfig`` (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password`` or Java's ``sasl.jaas.config``, ``ssl.ca.location`` or
``ssl.truststore.location`` (PEM), ``ssl.certificate.location`` + ``ssl.key.location`` or
``ssl.keystore.location`` (PEM with key and chain), ``ssl.key.password``,
``ssl.endpoint.identification.algorithm`` (``https``: check the broker's host name, the default;
``none``: do not)). ``wrap`` does the TLS handshake on a connected socket; ``authenticate`` runs
SaslHandshake v1 and SaslAuthenticate over a connection that has done its ApiVersions handshake."""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

from kctl.common.scram import MECHANISMS, ScramClient, ScramError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *MECHANISMS)


class SecurityError(Exception):
    """The security settings cannot be used, or the broker refused the client's credentials."""


_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_credentials(text: str | None) -> tuple[str | None, str | None]:
    """``username`` and ``password`` of a JAAS line (Java's ``sasl.jaas.config``)."""
    options = {m[1]: m[2] for m in _JAAS_OPTION.finditer(text or "")}
    return options.get("username"), options.get("password")


@dataclass(frozen=True)
class SecuritySettings:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_config(cls, config: Any) -> SecuritySettings:
        """From a ClientConfig's fields (librdkafka names win over the Java ones)."""
        username, password = jaas_credentials(getattr(config, "sasl_jaas_config", None))
        return cls(
            protocol=config.security_protocol,
            sasl_mechanism=config.sasl_mechanism,
            sasl_username=config.sasl_username or username,
            sasl_password=config.sasl_password or password,
            ssl_ca_location=config.ssl_ca_location or config.ssl_truststore_location,
            ssl_certificate_location=config.ssl_certificate_location or config.ssl_keystore_location,
            ssl_key_location=config.ssl_key_location or config.ssl_keystore_location,
            ssl_key_password=config.ssl_key_password,
            check_hostname=(config.ssl_endpoint_identification_algorithm or "none").lower() == "https",
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ssl_ca_location)
        context.check_hostname = self.check_hostname
        if not self.check_hostname:
            context.verify_mode = ssl.CERT_REQUIRED if self.ssl_ca_location else ssl.CERT_NONE
        if self.ssl_certificate_location:
            context.load_cert_chain(
                self.ssl_certificate_location, self.ssl_key_location, password=self.ssl_key_password
            )
        return context

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """TLS over ``sock`` (already connected; its timeout bounds the handshake)."""
        try:
            return self.ssl_context().wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, ssl.CertificateError) as error:
            raise SecurityError(f"TLS handshake with {host} failed: {error}") from error

    def authenticate(self, conn: Any, timeout: float) -> None:
        """SaslHandshake v1 + SaslAuthenticate over ``conn`` (a BrokerConnection)."""
        from kctl.protocol import ApiKey, ErrorCode
        from kctl.protocol.errors import error_name
        from kctl.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        mechanism = self.sasl_mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise SecurityError(
                f"sasl.mechanism {mechanism} is not supported (kctl: {', '.join(SASL_MECHANISMS)})"
            )
        if self.sasl_username is None or self.sasl_password is None:
            raise SecurityError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)")
        handshake = conn.request(
            ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=mechanism), 1, timeout=timeout
        )
        if handshake.error_code != ErrorCode.NONE:
            raise SecurityError(
                f"the broker does not accept SASL mechanism {mechanism} "
                f"(it offers {', '.join(handshake.mechanisms)})"
            )

        def step(token: bytes) -> bytes:
            response = conn.request(
                ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token), timeout=timeout
            )
            if response.error_code != ErrorCode.NONE:
                raise SecurityError(response.error_message or error_name(response.error_code))
            return bytes(response.auth_bytes)

        if mechanism == "PLAIN":
            step(b"\0" + self.sasl_username.encode() + b"\0" + self.sasl_password.encode())
            return
        scram = ScramClient(mechanism, self.sasl_username, self.sasl_password)
        try:
            server_first = step(scram.first())
            scram.verify(step(scram.final(server_first)))
        except ScramError as error:
            raise SecurityError(f"the SCRAM exchange failed: {error}") from None
