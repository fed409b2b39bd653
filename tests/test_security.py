"""Security without a network: SCRAM against an independent implementation (``scramp``), Kafka's ACL
decision rules, the file security store, JAAS and listener parsing, certificate principals, and the
per-connection SASL state machine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kctl.broker.security.acls import AclBinding, AclFilter, Authorizer
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
