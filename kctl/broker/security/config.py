"""The broker's security properties, under Kafka's names (one ConfigKey each; part of BROKER_CONFIGS).

Per-listener overrides are Kafka's ``listener.name.<listener>.<property>`` (for example
``listener.name.sasl_ssl.ssl.keystore.location`` or
``listener.name.sasl_ssl.plain.sasl.jaas.config``); they are read by kctl.broker.security.listeners
from the properties the broker was given."""

from __future__ import annotations

import re
from dataclasses import replace

from kctl.common.config_def import ConfigKey, Dynamic, Importance, OneOf, Range
from kctl.common.config_def import ConfigType as T

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT, SSL:SSL, SASL_PLAINTEXT:SASL_PLAINTEXT, SASL_SSL:SASL_SSL"

#: The TLS key and trust material Kafka reloads without a restart (``SslConfigs.RECONFIGURABLE_CONFIGS``,
#: those kctl knows: PEM stores, so no store passwords). Per broker and only under a listener's prefix
#: (``listener.name.<listener>.ssl.keystore.location``), as Kafka's DynamicBrokerConfig has them
#: (kctl.broker.dynamic_config).
DYNAMIC_SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
    }
)

#: Kafka's SASL/Kerberos (GSSAPI) listener configs, dynamic per broker in Kafka
#: (DynamicListenerConfig); kctl has no GSSAPI: accepted, stored and described, no effect.
KERBEROS_CONFIGS = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
    }
)
_NO_GSSAPI = "(Accepted, stored and described for compatibility; no effect in kctl, which has no GSSAPI.)"

_LISTENER_CONFIG = re.compile(r"listener\.name\.([^.]+)\.(.+)")


def listener_config(name: str) -> tuple[str, str] | None:
    """``("SSL", "ssl.keystore.location")`` for ``listener.name.ssl.ssl.keystore.location``; None for a
    name without a listener prefix."""
    match = _LISTENER_CONFIG.fullmatch(name)
    return (match[1].upper(), match[2]) if match else None


def is_dynamic_listener_config(name: str) -> bool:
    """A listener-prefixed config AlterConfigs may set (per broker): its base is dynamic TLS material."""
    parts = listener_config(name)
    return parts is not None and parts[1] in DYNAMIC_SECURITY_CONFIGS


SECURITY_CONFIGS = [
    ConfigKey(
        "listener.security.protocol.map",
        T.STRING,
        DEFAULT_PROTOCOL_MAP,
        None,
        "Listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, as NAME:PROTOCOL pairs.",
        Importance.HIGH,
    ),
    ConfigKey(
        "ssl.keystore.type",
        T.STRING,
        "PEM",
        OneOf(("PEM",), case_insensitive=True),
        "Format of the key store (kctl: PEM only).",
    ),
    ConfigKey(
        "ssl.keystore.location",
        T.STRING,
        None,
        None,
        "PEM file holding the broker's private key and certificate chain.",
        Importance.HIGH,
    ),
    ConfigKey(
        "ssl.keystore.certificate.chain", T.PASSWORD, None, None, "The certificate chain itself, in PEM."
    ),
    ConfigKey("ssl.keystore.key", T.PASSWORD, None, None, "The private key itself, in PEM."),
    ConfigKey("ssl.key.password", T.PASSWORD, None, None, "Password of an encrypted private key."),
    ConfigKey(
        "ssl.truststore.type",
        T.STRING,
        "PEM",
        OneOf(("PEM",), case_insensitive=True),
        "Format of the trust store (kctl: PEM only).",
    ),
    ConfigKey(
        "ssl.truststore.location",
        T.STRING,
        None,
        None,
        "PEM file of the CA certificates trusted for clients.",
    ),
    ConfigKey(
        "ssl.truststore.certificates",
        T.PASSWORD,
        None,
        None,
        "The trusted CA certificates themselves, in PEM.",
    ),
    ConfigKey(
        "ssl.client.auth",
        T.STRING,
        "none",
        OneOf(("required", "requested", "none"), case_insensitive=True),
        "Ask TLS clients for a certificate; its subject's distinguished name becomes the principal.",
    ),
    ConfigKey("ssl.enabled.protocols", T.LIST, "TLSv1.2,TLSv1.3", None, "TLS versions accepted."),
    ConfigKey(
        "ssl.cipher.suites", T.LIST, "", None, "TLS 1.2 cipher suites (OpenSSL names; empty: the defaults)."
    ),
    ConfigKey(
        "sasl.enabled.mechanisms",
        T.LIST,
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        None,
        "SASL mechanisms offered (kctl: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default is GSSAPI).",
    ),
    ConfigKey(
        "security.inter.broker.protocol",
        T.STRING,
        None,
        OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), case_insensitive=True),
        "Kafka's older way to pick the inter-broker listener: the listener of that name "
        "(only without inter.broker.listener.name; both at once is an error).",
    ),
    ConfigKey(
        "sasl.mechanism.inter.broker.protocol",
        T.STRING,
        "PLAIN",
        OneOf(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), case_insensitive=True),
        "SASL mechanism brokers use with each other on a SASL inter-broker listener (Kafka's default is "
        "GSSAPI); the credentials are the username/password options of that listener's JAAS config.",
    ),
    ConfigKey(
        "ssl.endpoint.identification.algorithm",
        T.STRING,
        "https",
        None,
        "https: a broker connecting to another over TLS checks its certificate names the host; empty: not.",
    ),
    ConfigKey(
        "sasl.jaas.config",
        T.PASSWORD,
        None,
        None,
        'kctl: JAAS configuration of every SASL listener (PlainLoginModule user_<name>="<password>").',
    ),
    ConfigKey(
        "connections.max.reauth.ms",
        T.LONG,
        0,
        Range(0),
        "Lifetime of a SASL session told to clients (0: unlimited); past it the connection is closed.",
    ),
    ConfigKey(
        "authorizer.class.name",
        T.STRING,
        "",
        None,
        "Any non-empty value (e.g. kafka.security.authorizer.AclAuthorizer) turns ACL authorization on.",
        Importance.HIGH,
    ),
    ConfigKey(
        "super.users",
        T.STRING,
        None,
        None,
        "Principals allowed everything, semicolon-separated (User:admin;User:bob).",
    ),
    ConfigKey(
        "allow.everyone.if.no.acl.found",
        T.BOOLEAN,
        False,
        None,
        "With the authorizer on, allow an operation on a resource that has no ACL at all.",
    ),
]
SECURITY_CONFIGS += [
    ConfigKey(
        "sasl.kerberos.service.name",
        T.STRING,
        None,
        None,
        f"Kerberos principal name Kafka runs as. {_NO_GSSAPI}",
    ),
    ConfigKey(
        "sasl.kerberos.kinit.cmd",
        T.STRING,
        "/usr/bin/kinit",
        None,
        f"Kerberos kinit command path. {_NO_GSSAPI}",
    ),
    ConfigKey(
        "sasl.kerberos.ticket.renew.window.factor",
        T.DOUBLE,
        0.8,
        None,
        f"Share of a ticket's lifetime after which it is renewed. {_NO_GSSAPI}",
    ),
    ConfigKey(
        "sasl.kerberos.ticket.renew.jitter",
        T.DOUBLE,
        0.05,
        None,
        f"Random jitter added to the renewal time. {_NO_GSSAPI}",
    ),
    ConfigKey(
        "sasl.kerberos.min.time.before.relogin",
        T.LONG,
        60000,
        None,
        f"Login thread sleep time between refresh attempts (ms). {_NO_GSSAPI}",
    ),
    ConfigKey(
        "sasl.kerberos.principal.to.local.rules",
        T.LIST,
        "DEFAULT",
        None,
        f"Rules mapping principal names to short names. {_NO_GSSAPI}",
    ),
]
SECURITY_CONFIGS = [
    replace(key, dynamic=Dynamic.PER_BROKER) if key.name in DYNAMIC_SECURITY_CONFIGS else key
    for key in SECURITY_CONFIGS
]
SECURITY_CONFIGS = [
    replace(key, dynamic=Dynamic.PER_BROKER, applied=False) if key.name in KERBEROS_CONFIGS else key
    for key in SECURITY_CONFIGS
]
