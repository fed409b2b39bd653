"""Listeners' security: which protocol each listener speaks (``listener.security.protocol.map``), the
TLS server context built from PEM material (``ssl.*``, overridable per listener as Kafka's
``listener.name.<listener>.ssl.*``), the JAAS configuration of SASL listeners, and the principal a
TLS client certificate stands for (its subject's distinguished name, RFC 2253, as Kafka's default
``ssl.principal.mapping.rules``).

A TLS listener's key and trust material can be replaced while it serves (dynamic broker configs,
``listener.name.<l>.ssl.keystore.location`` and the others of DYNAMIC_SECURITY_CONFIGS): asyncio's
``start_server`` keeps the one SSLContext it was given for every connection it accepts, so that context
stays and, through its ``sni_callback`` (which OpenSSL calls on every ClientHello, with or without a
server name), hands each new handshake to the listener's current context (``SSLObject.context = ...``,
OpenSSL's ``SSL_set_SSL_CTX``: certificate, key and trust store of the new one). Connections already
established keep theirs. Mutating the served context in place instead (``load_cert_chain``) could not
drop CA certificates from its trust store and would leave it half-changed when a load fails."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ANONYMOUS = "User:ANONYMOUS"


class SecurityConfigError(ValueError):
    """Security properties that cannot be used (an unknown protocol, missing key material...)."""


def parse_protocol_map(text: str) -> dict[str, str]:
    """``"PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL"`` to ``{"PLAINTEXT": "PLAINTEXT", ...}``."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, protocol = part.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise SecurityConfigError(f"listener.security.protocol.map: bad entry {part!r}")
        out[name.strip().upper()] = protocol
    return out


def listener_value(properties: Mapping[str, Any], values: Mapping[str, Any], listener: str, key: str) -> Any:
    """``listener.name.<listener>.<key>`` if given, else the broker-wide ``key``."""
    override = properties.get(f"listener.name.{listener.lower()}.{key}")
    if override is not None:
        return override
    return values.get(key)


_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas(text: str | None) -> dict[str, str]:
    """The ``key="value"`` options of a JAAS login module line."""
    if not text:
        return {}
    return {m[1]: m[2].replace('\\"', '"').replace("\\\\", "\\") for m in _JAAS_OPTION.finditer(text)}


def plain_users(properties: Mapping[str, Any], values: Mapping[str, Any], listener: str) -> dict[str, str]:
    """PLAIN users of ``listener``: the ``user_<name>="<password>"`` options of its JAAS config
    (``listener.name.<l>.plain.sasl.jaas.config``, ``listener.name.<l>.sasl.jaas.config`` or
    ``sasl.jaas.config``), as Kafka's PlainLoginModule reads them."""
    text = (
        properties.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
        or properties.get(f"listener.name.{listener.lower()}.sasl.jaas.config")
        or values.get("sasl.jaas.config")
    )
    return {k[5:]: v for k, v in parse_jaas(text).items() if k.startswith("user_")}


def _pem_file(text: str) -> str:
    """``text`` in a temporary file (the caller unlinks it): OpenSSL loads key material from files."""
    handle, path = tempfile.mkstemp(prefix="kctl-pem-", suffix=".pem")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    return path


_TLS_VERSIONS = {
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1": ssl.TLSVersion.TLSv1,
}


def server_ssl_context(
    properties: Mapping[str, Any], values: Mapping[str, Any], listener: str
) -> ssl.SSLContext:
    """The TLS context of ``listener`` from its PEM key store, trust store and options."""

    def get(key: str) -> Any:
        return listener_value(properties, values, listener, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = get("ssl.enabled.protocols")
    if isinstance(protocols, str):
        protocols = [p.strip() for p in protocols.split(",") if p.strip()]
    versions = [
        _TLS_VERSIONS[p.upper()] for p in protocols or ["TLSv1.2", "TLSv1.3"] if p.upper() in _TLS_VERSIONS
    ]
    if not versions:
        raise SecurityConfigError(f"listener {listener}: ssl.enabled.protocols names no usable TLS version")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    ciphers = get("ssl.cipher.suites")
    if isinstance(ciphers, str):
        ciphers = [c.strip() for c in ciphers.split(",") if c.strip()]
    if ciphers:
        context.set_ciphers(":".join(ciphers))
    password = get("ssl.key.password")
    location, chain, key = (
        get("ssl.keystore.location"),
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
    )
    if location:
        context.load_cert_chain(location, password=password)
    elif chain and key:
        paths = [_pem_file(chain), _pem_file(key)]
        try:
            context.load_cert_chain(paths[0], paths[1], password=password)
        finally:
            for path in paths:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    else:
        raise SecurityConfigError(
            f"listener {listener} speaks TLS: set ssl.keystore.location (or ssl.keystore.certificate.chain "
            "and ssl.keystore.key)"
        )
    trust_location, trust_text = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if trust_location:
        context.load_verify_locations(cafile=trust_location)
    elif trust_text:
        context.load_verify_locations(cadata=trust_text)
    client_auth = str(get("ssl.client.auth") or "none").lower()
    if client_auth == "required":
        context.verify_mode = ssl.CERT_REQUIRED
    elif client_auth == "requested":
        context.verify_mode = ssl.CERT_OPTIONAL
    if context.verify_mode != ssl.CERT_NONE and not (trust_location or trust_text):
        raise SecurityConfigError(f"listener {listener}: ssl.client.auth={client_auth} needs a trust store")
    return context


def keystore_certificate(
    properties: Mapping[str, Any], values: Mapping[str, Any], listener: str
) -> dict[str, Any] | None:
    """The first certificate of ``listener``'s key store, decoded as ``getpeercert()`` gives it (subject,
    subjectAltName, serialNumber); None without a key store, or where this Python cannot decode one."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return None
    location = listener_value(properties, values, listener, "ssl.keystore.location")
    chain = listener_value(properties, values, listener, "ssl.keystore.certificate.chain")
    try:
        if location:
            return dict(decode(location))
        if chain:
            path = _pem_file(chain)
            try:
                return dict(decode(path))
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    except (OSError, ssl.SSLError) as error:
        raise SecurityConfigError(f"listener {listener}: the key store's certificate: {error}") from None
    return None


def _distinguished_name(certificate: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v).strip().lower()) for rdn in certificate.get("subject", ()) for k, v in rdn)


def ensure_compatible(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, listener: str) -> None:
    """Kafka's check of a reloaded key store (``SslFactory.CertificateEntries.ensureCompatible``): the
    new certificate has the old one's subject (distinguished name) and at least its subject
    alternative names, so clients that verified the old one accept the new one."""
    if old is None or new is None:
        return
    if _distinguished_name(old) != _distinguished_name(new):
        raise SecurityConfigError(
            f"listener {listener}: Keystore DistinguishedName does not match: existing="
            f"{certificate_principal(dict(old))[5:]}, new={certificate_principal(dict(new))[5:]}"
        )
    old_names, new_names = set(old.get("subjectAltName", ())), set(new.get("subjectAltName", ()))
    if not old_names <= new_names:
        missing = ", ".join(f"{kind}:{value}" for kind, value in sorted(old_names - new_names))
        raise SecurityConfigError(
            f"listener {listener}: Keystore SubjectAltNames do not match: missing {missing}"
        )


def material_digest(properties: Mapping[str, Any], values: Mapping[str, Any], listener: str) -> str:
    """A digest of ``listener``'s key store and trust store files' contents (what Kafka's
    ``reloadUpdatedFilesWithoutConfigChange`` compares, by modification time, for files rewritten in
    place under the same name)."""
    digest = hashlib.sha256()
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        path = listener_value(properties, values, listener, key)
        try:
            digest.update(Path(path).read_bytes() if path else b"-")
        except OSError as error:
            digest.update(f"unreadable {error.errno}".encode())
        digest.update(b"\0")
    return digest.hexdigest()


_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def certificate_principal(peercert: dict[str, Any] | None) -> str:
    """``User:CN=alice,OU=eng,O=example`` from ``SSLSocket.getpeercert()``; ANONYMOUS without one."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape_dn(v)}" for k, v in rdn))
    return "User:" + ",".join(parts)


def _escape_dn(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    return out


@dataclass
class ListenerSecurity:
    """What a listener's connections need to know: its protocol, TLS context, SASL mechanisms,
    PLAIN users, and the SASL session lifetime."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0
    #: the key store's certificate (decoded) new key material is checked against
    certificate: dict[str, Any] | None = field(default=None, repr=False)
    #: the context new handshakes get (``ssl_context``, the one asyncio serves, until a reload)
    current_ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    #: material_digest of the files the current context was loaded from
    material: str = field(default="", repr=False)

    def serve_reloadable(self) -> None:
        """Make ``ssl_context`` hand each new handshake to ``current_ssl_context`` (module docstring)."""
        if self.ssl_context is None:
            return
        self.current_ssl_context = self.ssl_context

        def select(sslobj: Any, server_name: str | None, served: ssl.SSLContext) -> None:
            current = self.current_ssl_context
            if current is not None and current is not served:
                sslobj.context = current

        self.ssl_context.sni_callback = select

    def validate_reconfiguration(
        self, properties: Mapping[str, Any], values: Mapping[str, Any]
    ) -> tuple[ssl.SSLContext, dict[str, Any] | None]:
        """The context (and certificate) the listener would have with ``properties``; raises
        SecurityConfigError (with the reason) when the material cannot be used."""
        try:
            context = server_ssl_context(properties, values, self.name)
            certificate = keystore_certificate(properties, values, self.name)
        except (OSError, ssl.SSLError, ValueError) as error:
            if isinstance(error, SecurityConfigError):
                raise
            raise SecurityConfigError(
                f"listener {self.name}: cannot load the TLS material: {error}"
            ) from None
        ensure_compatible(self.certificate, certificate, self.name)
        return context, certificate

    def reconfigure(self, properties: Mapping[str, Any], values: Mapping[str, Any]) -> None:
        """New handshakes use the TLS material of ``properties`` (connections up keep theirs); raises
        SecurityConfigError and changes nothing when it cannot be used."""
        material = material_digest(properties, values, self.name)
        context, certificate = self.validate_reconfiguration(properties, values)
        self.current_ssl_context, self.certificate, self.material = context, certificate, material

    def reload_changed_files(self, properties: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
        """Reconfigure when the key or trust store files were rewritten since they were loaded (same
        configs); whether it did. Raises SecurityConfigError, changing nothing, when they cannot be
        used."""
        if material_digest(properties, values, self.name) == self.material:
            return False
        self.reconfigure(properties, values)
        return True

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


def listener_security(
    properties: Mapping[str, Any], values: Mapping[str, Any], name: str
) -> ListenerSecurity:
    """The security of listener ``name`` (a name missing from the protocol map is an error, as in Kafka,
    unless the name is itself a protocol)."""
    protocol_map = parse_protocol_map(values.get("listener.security.protocol.map") or "")
    protocol = protocol_map.get(name.upper())
    if protocol is None:
        if name.upper() not in PROTOCOLS:
            raise SecurityConfigError(f"listener {name} is not in listener.security.protocol.map")
        protocol = name.upper()
    reauth_ms = int(listener_value(properties, values, name, "connections.max.reauth.ms") or 0)
    security = ListenerSecurity(name.upper(), protocol, reauth_ms=reauth_ms)
    if security.tls:
        security.ssl_context = server_ssl_context(properties, values, name)
        security.certificate = keystore_certificate(properties, values, name)
        security.material = material_digest(properties, values, name)
        security.serve_reloadable()
    if security.sasl:
        mechanisms = listener_value(properties, values, name, "sasl.enabled.mechanisms") or []
        if isinstance(mechanisms, str):
            mechanisms = [m.strip() for m in mechanisms.split(",") if m.strip()]
        security.mechanisms = tuple(m.upper() for m in mechanisms)
        security.plain_users = plain_users(properties, values, name)
    return security


def advertised_endpoint(registration: Any, listener: str | None) -> tuple[str, int]:
    """(host, port) of a registered broker on the listener named ``listener`` (the one the request
    came in on, as Kafka answers Metadata and FindCoordinator); its first endpoint otherwise."""
    if listener is not None:
        from kctl.zk.model import parse_endpoint

        for endpoint in registration.listeners:
            try:
                name, host, port = parse_endpoint(endpoint)
            except ValueError:
                continue
            if name.upper() == listener:
                return host, port
    return registration.host, registration.port


def request_listener(context: Any) -> str | None:
    session = getattr(context, "session", None)
    return session.listener.name if session is not None else None
