"""Security without a network: SCRAM against an independent implementation (``scramp``), Kafka's ACL
decision rules, the file security store, JAAS and listener parsing, certificate principals, and the
per-connection SASL state machine."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from kctl.broker.security.acls import AclBinding, AclFilter, Authorizer
from kctl.broker.security.audit import DenialLog
from kctl.broker.security.listeners import (
    ListenerSecurity,
    SecurityConfigError,
    certificate_principal,
    parse_jaas,
    parse_protocol_map,
)
from kctl.broker.security.sasl import AuthenticationError, Session
from kctl.common.scram import ScramClient, ScramCredential, ScramError, ScramServer
from kctl.protocol.acl_types import AclOperation as Op
from kctl.protocol.acl_types import AclPermissionType as Perm
from kctl.protocol.acl_types import AclResourceType as Res
from kctl.protocol.acl_types import PatternType as Pat
from kctl.zk.security_store import FileSecurityStore

scramp = pytest.importorskip("scramp")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_scram_client_against_scramp(mechanism: str) -> None:
    m = scramp.ScramMechanism(mechanism)
    salt, stored_key, server_key, iterations = m.make_auth_info("pässword", iteration_count=4096)
    users: list[str] = []
    server = m.make_server(lambda user: users.append(user) or (salt, stored_key, server_key, iterations))
    client = ScramClient(mechanism, "al,ice=", "pässword")
    server.set_client_first(client.first().decode())
    final = client.final(server.get_server_first().encode())
    server.set_client_final(final.decode())
    client.verify(server.get_server_final().encode())
    assert users == ["al,ice="]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_scram_server_against_scramp(mechanism: str) -> None:
    credential = ScramCredential.from_text(ScramCredential.from_password(mechanism, "s3cret").to_text())
    for password, ok in (("s3cret", True), ("wrong", False)):
        client = scramp.ScramClient([mechanism], "bob", password)
        server = ScramServer(mechanism)
        assert server.first(client.get_client_first().encode()) == "bob"
        client.set_server_first(server.server_first(credential).decode())
        if ok:
            client.set_server_final(server.final(client.get_client_final().encode()).decode())
        else:
            with pytest.raises(ScramError):
                server.final(client.get_client_final().encode())


def test_unknown_user_fails_only_at_the_proof() -> None:
    client = ScramClient("SCRAM-SHA-512", "ghost", "x")
    server = ScramServer("SCRAM-SHA-512")
    server.first(client.first())
    final = client.final(server.server_first(None))
    with pytest.raises(ScramError):
        server.final(final)


@pytest.mark.parametrize("token", [b"", b"garbage", b"n,,", b"p=tls-unique,,n=a,r=b", b"\xff\xfe"])
def test_malformed_client_first_is_refused(token: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").first(token)


def _authorizer(tmp_path: Path, *bindings: AclBinding, **kw: object) -> Authorizer:
    authorizer = Authorizer(FileSecurityStore(tmp_path), enabled=True, super_users=["User:root"], **kw)  # type: ignore[arg-type]
    for b in bindings:
        authorizer.create(b)
    return authorizer


def _b(
    name: str, principal: str, op: Op, perm: Perm = Perm.ALLOW, pat: Pat = Pat.LITERAL, rtype: Res = Res.TOPIC
) -> AclBinding:
    return AclBinding(rtype, name, pat, principal, "*", op, perm)


def test_acl_decisions(tmp_path: Path) -> None:
    a = _authorizer(
        tmp_path,
        _b("ro-", "User:dave", Op.READ, pat=Pat.PREFIXED),
        _b("*", "User:erin", Op.WRITE),
        _b("orders", "User:*", Op.ALL),
        _b("orders", "User:mallory", Op.WRITE, Perm.DENY),
        _b("cfg", "User:dave", Op.ALTER_CONFIGS),
    )
    auth = a.authorize
    assert auth("User:dave", "h", Op.READ, Res.TOPIC, "ro-x")
    assert auth("User:dave", "h", Op.DESCRIBE, Res.TOPIC, "ro-x")  # implied by Read
    assert not auth("User:dave", "h", Op.WRITE, Res.TOPIC, "ro-x")
    assert not auth("User:dave", "h", Op.READ, Res.TOPIC, "r")
    assert auth("User:erin", "h", Op.WRITE, Res.TOPIC, "anything")
    assert not auth("User:erin", "h", Op.READ, Res.TOPIC, "anything")
    assert auth("User:mallory", "h", Op.READ, Res.TOPIC, "orders")
    assert not auth("User:mallory", "h", Op.WRITE, Res.TOPIC, "orders")  # deny wins over User:* All
    assert auth("User:dave", "h", Op.DESCRIBE_CONFIGS, Res.TOPIC, "cfg")
    assert not auth("User:dave", "h", Op.DESCRIBE, Res.TOPIC, "cfg")
    assert auth("User:root", "h", Op.DELETE, Res.CLUSTER, "kafka-cluster")  # super user
    assert not auth("User:nobody", "h", Op.READ, Res.GROUP, "g")  # no ACL: denied by default


def test_allow_everyone_if_no_acl_found_and_hosts(tmp_path: Path) -> None:
    a = _authorizer(
        tmp_path,
        AclBinding(Res.TOPIC, "t", Pat.LITERAL, "User:x", "10.0.0.1", Op.READ, Perm.ALLOW),
        allow_if_no_acl=True,
    )
    assert a.authorize("User:y", "h", Op.WRITE, Res.TOPIC, "other")
    assert not a.authorize("User:y", "h", Op.READ, Res.TOPIC, "t")  # the topic has ACLs
    assert a.authorize("User:x", "10.0.0.1", Op.READ, Res.TOPIC, "t")
    assert not a.authorize("User:x", "10.0.0.2", Op.READ, Res.TOPIC, "t")


def test_acls_are_stored_in_kafkas_json_and_deleted_by_filter(tmp_path: Path) -> None:
    a = _authorizer(tmp_path, _b("p-", "User:a", Op.READ, pat=Pat.PREFIXED), _b("t", "User:a", Op.WRITE))
    assert FileSecurityStore(tmp_path).all_acls()[("Topic", "PREFIXED", "p-")] == [
        {"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
    assert [
        b.resource_name
        for b in a.bindings()
        if AclFilter(pattern_type=Pat.MATCH, resource_name="p-x").matches(b)
    ] == ["p-"]
    removed = a.delete(AclFilter(resource_type=Res.TOPIC, operation=Op.WRITE))
    assert [b.resource_name for b in removed] == ["t"]
    assert [b.resource_name for b in Authorizer(FileSecurityStore(tmp_path), enabled=True).bindings()] == [
        "p-"
    ]


def test_file_store_users(tmp_path: Path) -> None:
    store = FileSecurityStore(tmp_path)
    text = ScramCredential.from_password("SCRAM-SHA-256", "pw").to_text()
    store.set_user_credential("u", "SCRAM-SHA-256", text)
    assert store.users() == {"u": {"SCRAM-SHA-256": text}}
    assert "pw" not in (tmp_path / "security.json").read_text().replace(text, "")
    assert (tmp_path / "security.json").stat().st_mode & 0o077 == 0
    assert store.set_user_credential("u", "SCRAM-SHA-256", None)
    assert not store.set_user_credential("u", "SCRAM-SHA-256", None)
    assert store.users() == {}


def test_listener_parsing() -> None:
    assert parse_protocol_map("A:SSL, b:sasl_ssl") == {"A": "SSL", "B": "SASL_SSL"}
    with pytest.raises(SecurityConfigError):
        parse_protocol_map("A:TLS")
    jaas = 'x.PlainLoginModule required username="admin" password="a\\"b" user_admin="a\\"b" user_bo="c";'
    assert parse_jaas(jaas) == {"username": "admin", "password": 'a"b', "user_admin": 'a"b', "user_bo": "c"}


def test_certificate_principal_is_the_rfc2253_subject() -> None:
    cert = {
        "subject": ((("countryName", "FR"),), (("organizationName", "Ex, Inc"),), (("commonName", "alice"),))
    }
    assert certificate_principal(cert) == "User:CN=alice,O=Ex\\, Inc,C=FR"
    assert certificate_principal(None) == "User:ANONYMOUS"


def test_session_state_machine_plain() -> None:
    listener = ListenerSecurity(
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", mechanisms=("PLAIN",), plain_users={"a": "pw"}
    )

    async def run() -> None:
        session = Session.start(listener)
        assert not session.authenticated
        assert not session.handshake("SCRAM-SHA-512")  # not enabled here
        with pytest.raises(AuthenticationError):
            await session.authenticate(b"\0a\0pw", lambda u: {})  # before the handshake
        assert session.handshake("plain")
        with pytest.raises(AuthenticationError):
            await session.authenticate(b"\0a\0nope", lambda u: {})
        assert session.close_after_response and not session.authenticated
        good = Session.start(listener)
        good.handshake("PLAIN")
        assert await good.authenticate(b"\0a\0pw", lambda u: {}) == b""
        assert good.authenticated and good.principal == "User:a"

    asyncio.run(run())


# ------------------------------------------------------------------------- inter-broker client


def test_inter_broker_security_from_the_listener_configuration(tmp_path: Path) -> None:
    from kctl.broker.security.inter_broker import inter_broker_security

    values = {
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,REPL:SASL_SSL,CLIENTS:SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.jaas.config": 'x.PlainLoginModule required username="everyone" password="pw0";',
    }
    plain = inter_broker_security({}, values, "internal")
    assert (plain.protocol, plain.tls, plain.sasl, plain.ssl_context) == ("PLAINTEXT", False, False, None)

    properties = {  # the mechanism's own JAAS entry wins over the listener's and the broker-wide one
        "listener.name.repl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="broker" password="b\\"pw";'
        ),
        "listener.name.repl.sasl.jaas.config": 'x required username="other" password="no";',
    }
    repl = inter_broker_security(properties, values, "REPL")
    assert (repl.protocol, repl.mechanism, repl.username, repl.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "broker",
        'b"pw',
    )
    assert repl.ssl_context is not None and repl.check_hostname and repl.ssl_context.check_hostname
    # without a mechanism-specific entry: the broker-wide JAAS config
    clients = inter_broker_security({}, values, "CLIENTS")
    assert (clients.tls, clients.username, clients.password) == (False, "everyone", "pw0")

    with pytest.raises(SecurityConfigError, match="username"):
        inter_broker_security({}, {**values, "sasl.jaas.config": None}, "CLIENTS")
    with pytest.raises(SecurityConfigError, match="not supported"):
        inter_broker_security({}, {**values, "sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "CLIENTS")
    with pytest.raises(SecurityConfigError, match=r"protocol\.map"):
        inter_broker_security({}, values, "NOWHERE")


def test_a_broker_refuses_an_inter_broker_listener_it_does_not_have(tmp_path: Path) -> None:
    from kctl.broker.security.manager import BrokerSecurity

    values = {
        "inter.broker.listener.name": "REPLICATION",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
    }
    security = BrokerSecurity({}, values, FileSecurityStore(tmp_path))
    with pytest.raises(SecurityConfigError, match="not one of the listeners"):
        security.check_inter_broker(["PLAINTEXT"])
    security.check_inter_broker(["PLAINTEXT", "replication"])  # listener names are case-insensitive
    # Kafka's older security.inter.broker.protocol names the listener by its protocol
    older = BrokerSecurity(
        {},
        {"security.inter.broker.protocol": "SSL", "listener.security.protocol.map": "SSL:SSL"},
        FileSecurityStore(tmp_path),
    )
    assert older.inter_broker_listener == "SSL"
    with pytest.raises(SecurityConfigError, match="not one of the listeners"):
        older.check_inter_broker(["PLAINTEXT"])
    both = BrokerSecurity(
        {}, {**values, "security.inter.broker.protocol": "PLAINTEXT"}, FileSecurityStore(tmp_path)
    )
    with pytest.raises(SecurityConfigError, match="not both"):
        both.check_inter_broker(["PLAINTEXT", "REPLICATION"])


# --------------------------------------------- the mirror and the Spark source take security properties

_SECURE = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "mirror",
    "sasl.password": "m-secret",
    "ssl.ca.location": "/etc/kctl/ca.pem",
    "ssl.certificate.location": "/etc/kctl/client.pem",
    "ssl.key.location": "/etc/kctl/client.key",
    "ssl.endpoint.identification.algorithm": "none",
}


def _expected_security() -> object:
    from kctl.client.security import SecuritySettings

    return SecuritySettings(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="mirror",
        sasl_password="m-secret",
        ssl_ca_location="/etc/kctl/ca.pem",
        ssl_certificate_location="/etc/kctl/client.pem",
        ssl_key_location="/etc/kctl/client.key",
        check_hostname=False,
    )


def test_the_mirror_takes_security_properties_from_a_named_cluster(tmp_path: Path) -> None:
    """A clusters-file entry's security properties reach every client the mirror opens on it (the
    clusters' ClientConfig, and the producers it builds from the same properties)."""
    from kctl.client.clusters_file import load_clusters
    from kctl.client.config import ClientConfig
    from kctl.client.consumer import ConsumerConfig
    from kctl.client.producer import ProducerConfig
    from kctl.mirror.mirror import ClusterSpec

    path = tmp_path / "clusters.toml"
    path.write_text(
        "[dc1]\n"
        + '"bootstrap.servers" = "10.0.0.1:9093"\n'
        + "".join(f'"{k}" = "{v}"\n' for k, v in _SECURE.items())
    )
    entry = load_clusters(path).get("dc1")
    assert entry is not None
    spec = ClusterSpec("dc1", entry.bootstrap_servers, entry.properties)
    assert spec.client_config().security == _expected_security()
    producer_keys = ProducerConfig.known_keys()
    producer = ProducerConfig.coerce({k: v for k, v in spec.properties.items() if k in producer_keys})
    assert producer.security == _expected_security()
    assert ConsumerConfig.coerce(dict(spec.properties)).security == _expected_security()
    assert set(_SECURE) <= ClientConfig.known_keys()


def test_the_spark_source_takes_security_options() -> None:
    """``kafka.``-prefixed options, as Spark's Kafka source takes them (librdkafka names or Java's
    ``sasl.jaas.config``), reach the consumer and the producer of the kctl data source."""
    from kctl.spark.options import parse_options
    from kctl.spark.planning import consumer_config
    from kctl.spark.writing import producer_config

    options = parse_options(
        {
            "kafka.bootstrap.servers": "10.0.0.1:9093",
            "subscribe": "t",
            **{f"kafka.{k}": v for k, v in _SECURE.items()},
        }
    )
    assert consumer_config(options).security == _expected_security()
    assert producer_config(options).security == _expected_security()

    java = parse_options(
        {
            "kafka.bootstrap.servers": "10.0.0.1:9093",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="spark" password="s-pw";'
            ),
        }
    )
    settings = consumer_config(java).security
    assert (settings.protocol, settings.sasl_mechanism, settings.sasl_username, settings.sasl_password) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "spark",
        "s-pw",
    )


# ---------------------------------------------------------------------------------- TLS options


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str | None, dict | None]:
    """A TLS handshake over a socket pair: (the negotiated version, the client certificate the server
    saw); raises ssl.SSLError when it fails."""
    left, right = socket.socketpair()
    outcome: dict[str, Any] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(left, server_side=True) as tls:
                outcome["peer"] = tls.getpeercert()
                tls.recv(1)
        except (ssl.SSLError, OSError) as error:
            outcome["error"] = error

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(right, server_hostname="localhost") as tls:
            version = tls.version()
            tls.sendall(b"x")
    finally:
        thread.join(10)
    if "error" in outcome:
        raise outcome["error"]
    return version, outcome.get("peer")


def test_tls_listener_options(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from kctl.broker.security.listeners import server_ssl_context
    from kctl.testing.certs import TestCA

    ca = TestCA(tmp_path)
    broker, alice = ca.issue("broker", "localhost", server=True), ca.issue("alice", "alice", server=False)
    # the key store given inline (ssl.keystore.certificate.chain + ssl.keystore.key), per listener
    properties = {
        "listener.name.ssl.ssl.keystore.certificate.chain": broker.certificate.read_text(),
        "listener.name.ssl.ssl.keystore.key": broker.key.read_text(),
        "listener.name.ssl.ssl.truststore.certificates": ca.pem.read_text(),
        "listener.name.ssl.ssl.client.auth": "requested",
    }
    values = {"ssl.enabled.protocols": ["TLSv1.3"], "ssl.cipher.suites": [], "ssl.client.auth": "none"}
    server = server_ssl_context(properties, values, "SSL")
    assert server.verify_mode == ssl.CERT_OPTIONAL

    client = ssl.create_default_context(cafile=str(ca.pem))
    assert _handshake(server, client) == ("TLSv1.3", None)  # requested: a client without one is fine
    client.load_cert_chain(str(alice.certificate), str(alice.key))
    version, peer = _handshake(server, client)
    assert version == "TLSv1.3" and certificate_principal(peer) == "User:CN=alice,O=kctl-test"
    old = ssl.create_default_context(cafile=str(ca.pem))
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):  # ssl.enabled.protocols=TLSv1.3
        _handshake(server, old)

    # TLS 1.2 with one cipher suite, required client certificates
    values = {
        "ssl.enabled.protocols": ["TLSv1.2"],
        "ssl.cipher.suites": ["ECDHE-ECDSA-AES128-GCM-SHA256"],
        "ssl.keystore.location": str(broker.keystore),
        "ssl.truststore.location": str(ca.pem),
        "ssl.client.auth": "required",
    }
    strict = server_ssl_context({}, values, "SSL")
    assert strict.verify_mode == ssl.CERT_REQUIRED
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    assert _handshake(strict, client)[0] == "TLSv1.2"
    anonymous = ssl.create_default_context(cafile=str(ca.pem))
    with pytest.raises((ssl.SSLError, OSError)):
        _handshake(strict, anonymous)
    other_cipher = ssl.create_default_context(cafile=str(ca.pem))
    other_cipher.load_cert_chain(str(alice.certificate), str(alice.key))
    other_cipher.maximum_version = ssl.TLSVersion.TLSv1_2
    other_cipher.set_ciphers("ECDHE-ECDSA-AES256-GCM-SHA384")
    with pytest.raises(ssl.SSLError):
        _handshake(strict, other_cipher)

    with pytest.raises(SecurityConfigError, match="trust store"):
        server_ssl_context({}, {**values, "ssl.truststore.location": None}, "SSL")
    with pytest.raises(SecurityConfigError, match="keystore"):
        server_ssl_context({}, {**values, "ssl.keystore.location": None}, "SSL")


def test_authorize_by_resource_type_as_kafka(tmp_path: Path) -> None:
    """KIP-679: Write on *some* topic, judged from the ACLs alone (no topic need exist)."""
    a = _authorizer(
        tmp_path,
        _b("fresh-", "User:bob", Op.WRITE, pat=Pat.PREFIXED),
        _b("only", "User:carl", Op.WRITE),
        _b("only", "User:carl", Op.WRITE, Perm.DENY),
        _b("app-", "User:dan", Op.ALL, pat=Pat.PREFIXED),
        _b("app", "User:dan", Op.WRITE, Perm.DENY, Pat.PREFIXED),
        _b("x", "User:eve", Op.WRITE),
        _b("*", "User:eve", Op.WRITE, Perm.DENY),
        _b("y", "User:fay", Op.READ),
        _b("z", "User:*", Op.WRITE, rtype=Res.GROUP),
    )

    def may(principal: str) -> bool:
        return a.authorize_by_resource_type(principal, "127.0.0.1", Op.WRITE, Res.TOPIC)

    assert may("User:bob")  # a prefixed allow, no topic needed
    assert not may("User:carl")  # the same literal denied
    assert not may("User:dan")  # a deny prefix covers the allow prefix
    assert not may("User:eve")  # a wildcard deny denies all
    assert not may("User:fay")  # Read is not Write
    assert not may("User:nobody")
    assert may("User:root")  # a super user
    assert Authorizer(FileSecurityStore(tmp_path / "none"), enabled=False).authorize_by_resource_type(
        "User:nobody", "h", Op.WRITE, Res.TOPIC
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_denials_are_logged_once_then_counted_at_most_once_an_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    denials = DenialLog(interval=60.0, max_keys=2, clock=clock)
    caplog.set_level(logging.INFO, logger="kctl.broker.authorizer")

    def deny(principal: str = "User:alice", name: str = "orders", port: int = 5000) -> None:
        denials.denied(principal, "Write", "Topic", name, host="10.0.0.7", port=port, request="Produce")

    deny()
    assert caplog.messages == [
        "Principal = User:alice is Denied Operation = Write from host = 10.0.0.7 on resource = "
        "Topic:LITERAL:orders for request = Produce (client 10.0.0.7:5000)"
    ]
    for port in range(5001, 5011):  # ten more within the interval: counted, not logged
        clock.now += 1
        deny(port=port)
    assert len(caplog.messages) == 1
    clock.now = 1000.0 + 59.9
    denials.flush()
    assert len(caplog.messages) == 1, "the interval is not over"
    clock.now = 1000.0 + 60
    denials.flush()
    assert caplog.messages[1] == (
        "Principal = User:alice was Denied Operation = Write on resource = Topic:LITERAL:orders 10 more "
        "time(s) in the last 60 s (last from client 10.0.0.7:5010, request = Produce)"
    )
    clock.now += 30
    deny()
    assert len(caplog.messages) == 2, "counted: a count was logged less than an interval ago"
    clock.now += 30
    deny()  # the interval is over: this denial logs the count (2: this one and the one before)
    assert caplog.messages[2].endswith(
        "2 more time(s) in the last 60 s (last from client 10.0.0.7:5000, request = Produce)"
    )
    clock.now += 60
    denials.flush()  # quiet for an interval: forgotten, so the next denial is logged in full
    assert len(caplog.messages) == 3
    deny()
    assert caplog.messages[3].startswith("Principal = User:alice is Denied Operation = Write")
    deny(principal="User:bob")  # another key: its own first line
    assert caplog.messages[4].startswith("Principal = User:bob is Denied")
    deny(principal="User:bob")
    deny(principal="User:carol")  # a third key over max_keys=2: the oldest (alice) is dropped
    assert caplog.messages[5].startswith("Principal = User:carol is Denied")
    assert len(caplog.messages) == 6

