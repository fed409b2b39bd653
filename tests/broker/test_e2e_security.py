"""Security end to end on one real broker (embedded metadata) with four listeners — PLAINTEXT,
SASL_SSL, SSL with required client certificates and SASL_PLAINTEXT — and the ACL authorizer on:
kcat, confluent-kafka and kafka-python over SASL_SSL with SCRAM-SHA-512 and with PLAIN and over SSL
with a client certificate (produce, consume, group commit); bad credentials and bad bytes (an error
or a closed connection, nothing served, the broker unaffected); ACL semantics (prefix Read without
Write, invisible topics, deny over allow, super users); `kctl user` and `kctl acl` round trips.
Certificates are made by the test (kctl.testing.certs, ``cryptography``)."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_kafka import kcat, kctl, run, unique

from kctl.client import AdminClient, KafkaAuthenticationError, KafkaConnectionError
from kctl.client.connection import BrokerConnection
from kctl.client.security import SecuritySettings
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kctl.testing import BrokerProcess, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
pytest.importorskip("cryptography")
from kctl.testing import certs as security_certs  # noqa: E402

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
CAROL_PASSWORD = "carol-Scram-512"
DAVE_PASSWORD = "dave-reads-only"


class Setup:
    """The broker, its listeners' addresses and the certificate files."""

    def __init__(self, broker: BrokerProcess, certs: Any, ca: Path) -> None:
        self.broker = broker
        self.plaintext, self.sasl_ssl, self.ssl, self.sasl_plaintext = broker.addresses
        self.ca = ca
        self.certs = certs

    def sasl(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """librdkafka / kctl properties for SASL_SSL."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca),
        }

    def cert(self, name: str) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.certs[name].certificate),
            "ssl.key.location": str(self.certs[name].key),
        }

    def admin(self) -> AdminClient:
        return AdminClient(self.sasl_ssl, self.sasl("admin", ADMIN_PASSWORD, "PLAIN"))

    def x(self, props: dict[str, str]) -> list[str]:
        return [arg for k, v in props.items() for arg in ("-X", f"{k}={v}")]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    directory = tmp_path_factory.mktemp("security")
    ca = security_certs.TestCA(directory / "certs")
    server = ca.issue("broker", "localhost", server=True)
    certs = {name: ca.issue(name, name, server=False) for name in ("alice", "admin", "mallory")}
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
        f'user_alice="{ALICE_PASSWORD}";'
    )
    properties = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
        "SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.keystore),
        "ssl.truststore.location": str(ca.pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:CN=admin,O=kctl-test",
        "num.partitions": "1",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "1500",
    }
    broker = BrokerProcess(directory / "data", properties).start()
    try:
        s = Setup(broker, certs, ca.pem)
        with s.admin() as admin:
            for user, password in (("carol", CAROL_PASSWORD), ("dave", DAVE_PASSWORD)):
                results = admin.alter_users([(user, "SCRAM-SHA-512", password)])
                assert [r.error_code for r in results] == [0], results
            bindings = []
            from kctl.client.admin.security import AclBinding
            from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType

            allow = AclPermissionType.ALLOW
            for principal in ("User:alice", "User:carol", "User:CN=alice,O=kctl-test"):
                for rtype in (AclResourceType.TOPIC, AclResourceType.GROUP):
                    bindings.append(
                        AclBinding(
                            rtype, "sec-", PatternType.PREFIXED, principal, "*", AclOperation.ALL, allow
                        )
                    )
            bindings.append(
                AclBinding(
                    AclResourceType.TOPIC,
                    "ro-",
                    PatternType.PREFIXED,
                    "User:dave",
                    "*",
                    AclOperation.READ,
                    allow,
                )
            )
            bindings.append(
                AclBinding(
                    AclResourceType.GROUP,
                    "*",
                    PatternType.LITERAL,
                    "User:dave",
                    "*",
                    AclOperation.READ,
                    allow,
                )
            )
            assert all(r.error_code == 0 for r in admin.create_acls(bindings))
        yield s
    finally:
        broker.stop()


def _healthy(s: Setup) -> None:
    """The broker still answers an authenticated client."""
    assert s.broker.running, s.broker.log_tail()
    with BrokerConnection(
        *_hp(s.sasl_ssl),
        security=SecuritySettings.from_config(_cfg(s.sasl("admin", ADMIN_PASSWORD, "PLAIN"))),
    ) as conn:
        assert conn.request(ApiKey.METADATA, MetadataRequest(topics=None)).brokers


def _hp(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _cfg(props: dict[str, str]) -> Any:
    from kctl.client.config import ClientConfig

    return ClientConfig.from_properties(props)


# ------------------------------------------------------------------------------------------ clients


def _confluent_round_trip(address: str, props: dict[str, str]) -> None:
    topic, group = unique("sec-ck"), unique("sec-g")
    conf = {"bootstrap.servers": address, **props}
    producer = confluent_kafka.Producer(conf)
    for i in range(5):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert got == [f"v{i}".encode() for i in range(5)]
        committed = consumer.commit(asynchronous=False)
        assert committed and committed[0].offset == 5
    finally:
        consumer.close()


def test_confluent_sasl_ssl_scram_sha_512(setup: Setup) -> None:
    _confluent_round_trip(setup.sasl_ssl, setup.sasl("carol", CAROL_PASSWORD))


def test_confluent_sasl_ssl_plain(setup: Setup) -> None:
    _confluent_round_trip(setup.sasl_ssl, setup.sasl("alice", ALICE_PASSWORD, "PLAIN"))


def test_confluent_ssl_client_certificate(setup: Setup) -> None:
    _confluent_round_trip(setup.ssl, setup.cert("alice"))


def _kafka_python_round_trip(address: str, **kw: Any) -> None:
    topic, group = unique("sec-kp"), unique("sec-g")
    producer = kafka.KafkaProducer(bootstrap_servers=address, **kw)
    for i in range(3):
        producer.send(topic, f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=address,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kw,
    )
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        assert got == [b"k0", b"k1", b"k2"]
        consumer.commit()
        tp = kafka.TopicPartition(topic, 0)
        assert consumer.committed(tp) == 3
    finally:
        consumer.close()


def test_kafka_python_sasl_ssl_scram_sha_512(setup: Setup) -> None:
    _kafka_python_round_trip(
        setup.sasl_ssl,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="carol",
        sasl_plain_password=CAROL_PASSWORD,
        ssl_cafile=str(setup.ca),
    )


def test_kafka_python_sasl_ssl_plain(setup: Setup) -> None:
    _kafka_python_round_trip(
        setup.sasl_ssl,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=ALICE_PASSWORD,
        ssl_cafile=str(setup.ca),
    )


def test_kafka_python_ssl_client_certificate(setup: Setup) -> None:
    _kafka_python_round_trip(
        setup.ssl,
        security_protocol="SSL",
        ssl_cafile=str(setup.ca),
        ssl_certfile=str(setup.certs["alice"].certificate),
        ssl_keyfile=str(setup.certs["alice"].key),
    )


def _kcat_props(props: dict[str, str]) -> list[str]:
    renamed = {("sasl.mechanisms" if k == "sasl.mechanism" else k): v for k, v in props.items()}
    return [arg for k, v in renamed.items() for arg in ("-X", f"{k}={v}")]


@pytest.mark.parametrize("how", ["scram", "plain", "certificate"])
def test_kcat(setup: Setup, how: str) -> None:
    if how == "scram":
        address, props = setup.sasl_ssl, setup.sasl("carol", CAROL_PASSWORD)
    elif how == "plain":
        address, props = setup.sasl_ssl, setup.sasl("alice", ALICE_PASSWORD, "PLAIN")
    else:
        address, props = setup.ssl, setup.cert("alice")
    topic, group = unique("sec-kcat"), unique("sec-g")
    x = _kcat_props(props)
    kcat(address, *x, "-P", "-t", topic, input=b"one\ntwo\n")
    out = kcat(address, *x, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e", "-q")
    assert out.stdout.split() == [b"one", b"two"]
    # a group consumer commits (kcat -G), then the committed offset is visible to the admin
    kcat(address, *x, "-X", "auto.offset.reset=earliest", "-G", group, "-c", "2", "-e", "-q", topic)
    admin = setup.sasl("admin", ADMIN_PASSWORD, "PLAIN")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": setup.sasl_ssl, **admin, "group.id": group})
    try:
        [committed] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=20)
    finally:
        consumer.close()
    assert committed.offset == 2


# ------------------------------------------------------------------------------------------ failures


def _kctl_auth(setup: Setup, props: dict[str, str]) -> None:
    BrokerConnection(
        *_hp(setup.sasl_ssl), security=SecuritySettings.from_config(_cfg(props)), timeout=10
    ).close()


@pytest.mark.parametrize(
    "props",
    [
        pytest.param(
            {"user": "carol", "password": "wrong", "mechanism": "SCRAM-SHA-512"}, id="wrong-password"
        ),
        pytest.param(
            {"user": "nobody", "password": "x", "mechanism": "SCRAM-SHA-512"}, id="unknown-user-scram"
        ),
        pytest.param({"user": "nobody", "password": "x", "mechanism": "PLAIN"}, id="unknown-user-plain"),
        pytest.param(
            {"user": "carol", "password": CAROL_PASSWORD, "mechanism": "SCRAM-SHA-256"}, id="wrong-mechanism"
        ),
    ],
)
def test_bad_credentials_are_refused(setup: Setup, props: dict[str, str]) -> None:
    with pytest.raises(KafkaAuthenticationError):
        _kctl_auth(setup, setup.sasl(props["user"], props["password"], props["mechanism"]))
    _healthy(setup)


def test_confluent_wrong_password_gets_an_authentication_error(setup: Setup) -> None:
    errors: list[Any] = []
    conf = {"bootstrap.servers": setup.sasl_ssl, **setup.sasl("carol", "bad"), "error_cb": errors.append}
    producer = confluent_kafka.Producer(conf)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors
    _healthy(setup)


def _raw(address: str, *, tls: bool = False) -> socket.socket:
    sock = socket.create_connection(_hp(address), timeout=10)
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        sock = context.wrap_socket(sock)
    return sock


def _frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    client = b"raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closed the connection (after any answer it sent)."""
    sock.settimeout(10)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def test_plaintext_client_on_a_tls_port_is_dropped(setup: Setup) -> None:
    with _raw(setup.sasl_ssl) as sock:
        sock.sendall(_frame(ApiKey.METADATA, 1, struct.pack(">i", -1)))
        assert _closed(sock)
    _healthy(setup)


def test_requests_before_authentication_are_not_served(setup: Setup) -> None:
    with _raw(setup.sasl_plaintext) as sock:
        sock.sendall(_frame(ApiKey.METADATA, 1, struct.pack(">i", -1)))
        sock.settimeout(10)
        first = b""
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            first = sock.recv(65536)
        assert first == b"", "a Metadata request was answered before authentication"
    _healthy(setup)


@pytest.mark.parametrize(
    "token", [b"", b"\xff\xfe garbage", b"n,,n=carol", b"n,,n=carol,r=abc" + b"x" * 5000]
)
def test_garbage_or_truncated_sasl_exchange_closes(setup: Setup, token: bytes) -> None:
    with _raw(setup.sasl_plaintext) as sock:
        handshake = SaslHandshakeRequest(mechanism="SCRAM-SHA-512")
        from kctl.protocol import RequestHeader, encode_request

        sock.sendall(encode_request(RequestHeader(ApiKey.SASL_HANDSHAKE, 1, 1, "raw"), handshake))
        sock.sendall(
            encode_request(
                RequestHeader(ApiKey.SASL_AUTHENTICATE, 1, 2, "raw"),
                SaslAuthenticateRequest(auth_bytes=token),
            )
        )
        if token.startswith(b"n,,n=carol,r="):  # a well-formed first message: the final one is garbage
            sock.sendall(
                encode_request(
                    RequestHeader(ApiKey.SASL_AUTHENTICATE, 1, 3, "raw"),
                    SaslAuthenticateRequest(auth_bytes=b"c=biws,r=bad,p=AAAA"),
                )
            )
        sock.sendall(_frame(ApiKey.METADATA, 1, struct.pack(">i", -1), 9))
        assert _closed(sock)
    _healthy(setup)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_sasl_handshake_v0_then_raw_tokens(setup: Setup) -> None:
    """The v0 framing older clients use: SaslHandshake v0, then the SASL token as a bare size-prefixed
    frame (no request header) answered the same way; then requests are served. A mechanism the
    listener does not enable is UNSUPPORTED_SASL_MECHANISM with the enabled ones listed, and the
    connection is closed."""
    from kctl.protocol import RequestHeader, decode_response, encode_request

    with _raw(setup.sasl_plaintext) as sock:
        header = RequestHeader(ApiKey.SASL_HANDSHAKE, 0, 1, "raw")
        sock.sendall(encode_request(header, SaslHandshakeRequest(mechanism="GSSAPI")))
        refused = decode_response(header, bytearray(_read_frame(sock)))[1]
        assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert set(refused.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert _closed(sock)  # as Kafka: an unsupported mechanism ends the connection
    with _raw(setup.sasl_plaintext) as sock:
        header = RequestHeader(ApiKey.SASL_HANDSHAKE, 0, 2, "raw")
        sock.sendall(encode_request(header, SaslHandshakeRequest(mechanism="PLAIN")))
        assert decode_response(header, bytearray(_read_frame(sock)))[1].error_code == 0
        token = b"\0alice\0" + ALICE_PASSWORD.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(sock) == b""  # PLAIN's (empty) answer, raw
        header = RequestHeader(ApiKey.METADATA, 1, 3, "raw")
        sock.sendall(encode_request(header, MetadataRequest(topics=[])))
        assert decode_response(header, bytearray(_read_frame(sock)))[1].brokers
    with _raw(setup.sasl_plaintext) as sock:  # a wrong password in a raw token: closed, nothing served
        header = RequestHeader(ApiKey.SASL_HANDSHAKE, 0, 1, "raw")
        sock.sendall(encode_request(header, SaslHandshakeRequest(mechanism="PLAIN")))
        assert decode_response(header, bytearray(_read_frame(sock)))[1].error_code == 0
        token = b"\0alice\0wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        sock.sendall(_frame(ApiKey.METADATA, 1, struct.pack(">i", -1), 9))
        assert _closed(sock)
    _healthy(setup)


def test_truncated_frame_then_disconnect_leaves_the_broker_alone(setup: Setup) -> None:
    with _raw(setup.sasl_ssl, tls=True) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00\x11\x00\x01")
    _healthy(setup)


# ------------------------------------------------------------------------------------------ ACLs


def _produce_error(setup: Setup, props: dict[str, str], topic: str, address: str | None = None) -> Any:
    reports: list[Any] = []
    conf = {"bootstrap.servers": address or setup.sasl_ssl, **props, "message.timeout.ms": 10000}
    producer = confluent_kafka.Producer(conf)
    producer.produce(topic, b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(20)
    return reports[0]


def test_read_on_a_prefix_without_write(setup: Setup) -> None:
    topic = unique("ro-topic")
    with setup.admin() as admin:
        from kctl.client.admin import NewTopic

        admin.create_topics([NewTopic(topic, 1, 1)])
    admin_props = setup.sasl("admin", ADMIN_PASSWORD, "PLAIN")
    assert _produce_error(setup, admin_props, topic) is None  # a super user writes
    dave = setup.sasl("dave", DAVE_PASSWORD)
    error = _produce_error(setup, dave, topic)
    assert error is not None and error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": setup.sasl_ssl,
            **dave,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline, got = time.monotonic() + 20, None
        while got is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got = message.value()
        assert got == b"x"
    finally:
        consumer.close()


def test_metadata_hides_topics_the_principal_may_not_describe(setup: Setup) -> None:
    hidden, visible = unique("secret"), unique("sec-visible")
    with setup.admin() as admin:
        from kctl.client.admin import NewTopic

        admin.create_topics([NewTopic(hidden, 1, 1), NewTopic(visible, 1, 1)])
    carol = SecuritySettings.from_config(_cfg(setup.sasl("carol", CAROL_PASSWORD)))
    with BrokerConnection(*_hp(setup.sasl_ssl), security=carol) as conn:
        listed = {t.name for t in conn.request(ApiKey.METADATA, MetadataRequest(topics=None)).topics}
        assert visible in listed and hidden not in listed
        named = conn.request(ApiKey.METADATA, MetadataRequest(topics=[MetadataRequestTopic(name=hidden)]))
        assert [t.error_code for t in named.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    out = kctl(
        "topic",
        "list",
        "-b",
        setup.sasl_ssl,
        *setup.x(setup.sasl("carol", CAROL_PASSWORD)),
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    names = {row["topic"] if "topic" in row else row.get("name") for row in json.loads(out.stdout)}
    assert visible in names and hidden not in names


def test_deny_overrides_allow_and_super_users_pass(setup: Setup) -> None:
    topic = unique("sec-denied")
    args = ["-b", setup.sasl_ssl, *setup.x(setup.sasl("admin", ADMIN_PASSWORD, "PLAIN"))]
    out = kctl(
        "acl", "add", "--deny-principal", "User:carol", "--operation", "Write", "--topic", topic, *args
    )
    assert out.returncode == 0, out.stderr
    carol = setup.sasl("carol", CAROL_PASSWORD)
    error = _produce_error(setup, carol, topic)  # carol has All on sec-* but Write on this one is denied
    assert error is not None and error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce_error(setup, setup.sasl("alice", ALICE_PASSWORD, "PLAIN"), topic) is None
    # the admin certificate's DN is a super user too
    assert _produce_error(setup, setup.cert("admin"), topic, setup.ssl) is None
    out = kctl("acl", "remove", "--topic", topic, "--principal", "User:carol", *args)
    assert out.returncode == 0, out.stderr
    assert _produce_error(setup, carol, topic) is None


def test_ssl_principal_without_acl_is_denied(setup: Setup) -> None:
    """mallory's certificate is valid but its DN has no ACL: the data is refused."""
    reports: list[Any] = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": setup.ssl, **setup.cert("mallory"), "message.timeout.ms": 10000}
    )
    producer.produce(unique("sec-m"), b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(20)
    assert reports and reports[0] is not None


# ------------------------------------------------------------------------------------------ CLI


def test_kctl_user_round_trip(setup: Setup) -> None:
    args = ["-b", setup.sasl_ssl, *setup.x(setup.sasl("admin", ADMIN_PASSWORD, "PLAIN"))]
    user = unique("erin")
    out = run(
        [*_kctl_argv(), "user", "create", user, "--mechanism", "SCRAM-SHA-256", "--password-stdin", *args],
        input=b"erin-password\n",
    )
    assert out.returncode == 0, out.stderr
    assert b"erin-password" not in out.stdout + out.stderr
    listed = json.loads(kctl("user", "list", "--format", "json", *args).stdout)
    assert {"user": user, "mechanism": "SCRAM-SHA-256", "iterations": 4096} in listed
    _kctl_auth(setup, setup.sasl(user, "erin-password", "SCRAM-SHA-256"))
    out = kctl("user", "delete", user, *args)
    assert out.returncode == 0, out.stderr
    with pytest.raises(KafkaAuthenticationError):
        _kctl_auth(setup, setup.sasl(user, "erin-password", "SCRAM-SHA-256"))
    assert kctl("user", "list", user, *args).returncode == 3
    # only the admin may manage users
    carol = ["-b", setup.sasl_ssl, *setup.x(setup.sasl("carol", CAROL_PASSWORD))]
    out = run([*_kctl_argv(), "user", "create", "x", "--password-stdin", *carol], input=b"pw\n")
    assert out.returncode == 1 and b"CLUSTER_AUTHORIZATION_FAILED" in out.stdout + out.stderr


def test_kctl_acl_round_trip(setup: Setup) -> None:
    args = ["-b", setup.sasl_ssl, *setup.x(setup.sasl("admin", ADMIN_PASSWORD, "PLAIN"))]
    topic = unique("acl-rt")
    add = [
        "acl",
        "add",
        "--allow-principal",
        "User:zed",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        topic,
    ]
    dry = kctl(*add, "--dry-run", "--format", "json", *args)
    assert dry.returncode == 0, dry.stderr
    assert [r["status"] for r in json.loads(dry.stdout)] == ["would add", "would add"]
    assert json.loads(kctl("acl", "list", "--topic", topic, "--format", "json", *args).stdout) == []
    assert kctl(*add, *args).returncode == 0
    listed = json.loads(kctl("acl", "list", "--topic", topic, "--format", "json", *args).stdout)
    assert sorted(r["operation"] for r in listed) == ["Describe", "Read"]
    assert {r["principal"] for r in listed} == {"User:zed"}
    dry = kctl("acl", "remove", "--topic", topic, "--dry-run", "--format", "json", *args)
    assert len(json.loads(dry.stdout)) == 2
    assert len(json.loads(kctl("acl", "list", "--topic", topic, "--format", "json", *args).stdout)) == 2
    removed = kctl("acl", "remove", "--topic", topic, "--format", "json", *args)
    assert removed.returncode == 0 and len(json.loads(removed.stdout)) == 2
    assert json.loads(kctl("acl", "list", "--topic", topic, "--format", "json", *args).stdout) == []
    assert kctl("acl", "remove", "--topic", topic, *args).returncode == 3


@pytest.mark.parametrize(
    ("user", "mechanism"),
    [("carol", "SCRAM-SHA-512"), ("alice", "PLAIN"), ("nobody", "SCRAM-SHA-256")],
)
def test_kctl_with_a_wrong_password_says_authentication_failed_and_exits_1(
    setup: Setup, user: str, mechanism: str
) -> None:
    """README's exit codes: a refused authentication is a failure (1), not an unreachable broker
    (3); the message names the mechanism and the principal, never the password."""
    password = "wrong-Password-123"
    args = ["-b", setup.sasl_ssl, *setup.x(setup.sasl(user, password, mechanism))]
    out = kctl("topic", "list", *args)
    stderr = out.stderr.decode()
    assert out.returncode == 1, (out.returncode, stderr)
    assert "authentication failed" in stderr and "cannot reach" not in stderr, stderr
    assert f"SASL/{mechanism}" in stderr and f"User:{user}" in stderr, stderr
    assert password not in stderr + out.stdout.decode()
    _healthy(setup)


def test_a_group_the_principal_may_not_use_is_named_once_in_the_error(setup: Setup) -> None:
    """carol may use groups prefixed sec- only: FindCoordinator answers GROUP_AUTHORIZATION_FAILED
    for `other`, and the error says "group 'other':" once (it used to say it twice)."""
    topic = unique("sec-named")
    _create(setup, topic)
    args = ["-b", setup.sasl_ssl, *setup.x(setup.sasl("carol", CAROL_PASSWORD))]
    out = kctl("consume", topic, "--group", "other", "-o", "beginning", "-n", "1", *args)
    stderr = out.stderr.decode()
    assert out.returncode == 1, (out.returncode, stderr)
    assert "GROUP_AUTHORIZATION_FAILED" in stderr and stderr.count("group 'other'") == 1, stderr


def _denials(setup: Setup, resource: str) -> list[str]:
    return [
        line
        for line in setup.broker.log_file.read_text(errors="replace").splitlines()
        if "kctl.broker.authorizer" in line and f"on resource = {resource} " in line
    ]


def test_a_denied_request_is_logged_once_with_principal_operation_resource_and_client(setup: Setup) -> None:
    """Kafka's authorizer logs denials at INFO; kctl's broker logs the first denial of a (principal,
    operation, resource) with the client's address, and counts the repeats instead of a line each."""
    group = unique("forbidden")
    from kctl.protocol.messages.describe_groups import DescribeGroupsRequest

    with _as(setup, "carol", CAROL_PASSWORD) as conn:
        client_port = conn._sock.getsockname()[1]  # type: ignore[union-attr]
        for _ in range(5):
            response = conn.request(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group]), 0)
            assert response.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # the broker writes its log as it handles the requests; the answers came after the lines
    lines = wait_for(lambda: _denials(setup, f"Group:LITERAL:{group}"), "the denial in the log", 10)
    [line] = lines
    assert " INFO kctl.broker.authorizer: Principal = User:carol is Denied Operation = Describe " in line
    assert "from host = 127.0.0.1 " in line and "for request = DescribeGroups" in line
    assert f"(client 127.0.0.1:{client_port})" in line
    with _as(setup, "carol", CAROL_PASSWORD) as conn:  # another connection: still the same key
        conn.request(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group]), 0)
        allowed = unique("sec-allowed")  # carol may describe sec- groups: nothing is logged for it
        conn.request(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[allowed]), 0)
    assert len(_denials(setup, f"Group:LITERAL:{group}")) == 1
    assert _denials(setup, f"Group:LITERAL:{allowed}") == []


def _kctl_argv() -> list[str]:
    import sys

    return [sys.executable, "-m", "kctl"]


# ------------------------------------------------------------------------------------------ session lifetime


def test_an_expired_session_is_closed(setup: Setup) -> None:
    """connections.max.reauth.ms=1500 on the SASL_PLAINTEXT listener: the lifetime is told to the
    client, and a request after it closes the connection."""
    props = {**setup.sasl("carol", CAROL_PASSWORD), "security.protocol": "SASL_PLAINTEXT"}
    conn = BrokerConnection(*_hp(setup.sasl_plaintext), security=SecuritySettings.from_config(_cfg(props)))
    assert conn.request(ApiKey.METADATA, MetadataRequest(topics=None)).brokers

    def refused() -> bool:
        try:
            conn.request(ApiKey.METADATA, MetadataRequest(topics=None))
        except KafkaConnectionError:
            return True
        return False

    wait_for(refused, "the expired session to be closed", timeout=10)
    assert conn.closed


def test_librdkafka_reauthenticates_before_the_session_ends(setup: Setup) -> None:
    props = {**setup.sasl("carol", CAROL_PASSWORD), "security.protocol": "SASL_PLAINTEXT"}
    del props["ssl.ca.location"]
    topic = unique("sec-reauth")
    errors: list[Any] = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": setup.sasl_plaintext, **props, "error_cb": errors.append}
    )
    delivered: list[Any] = []
    started = time.monotonic()
    while time.monotonic() - started < 4:  # over two session lifetimes
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
    assert delivered and all(e is None for e in delivered)
    assert not [e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION]


# ----------------------------------------------- cluster-mode and admin APIs under the authorizer


def _as(setup: Setup, user: str, password: str) -> BrokerConnection:
    props = setup.sasl(user, password, "PLAIN" if user in ("admin", "alice") else "SCRAM-SHA-512")
    return BrokerConnection(*_hp(setup.sasl_ssl), security=SecuritySettings.from_config(_cfg(props)))


def _create(setup: Setup, *topics: str) -> None:
    from kctl.client.admin import NewTopic

    with setup.admin() as admin:
        assert [r.error_code for r in admin.create_topics([NewTopic(t, 1, 1) for t in topics])] == [0] * len(
            topics
        )


def _cluster_api_errors(conn: BrokerConnection, topic: str) -> dict[str, int]:
    """The error each cluster-level API answers ``conn``'s principal with."""
    from kctl.protocol.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )
    from kctl.protocol.messages.configs import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
        IncrementalAlterableConfig,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResource,
    )
    from kctl.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
    from kctl.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
    from kctl.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest

    elect = conn.request(
        ApiKey.ELECT_LEADERS,
        ElectLeadersRequest(topic_partitions=[TopicPartitions(topic=topic, partitions=[0])], timeout_ms=1000),
        1,
    )
    listed = conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(), 0)
    altered = conn.request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        AlterPartitionReassignmentsRequest(
            topics=[ReassignableTopic(name=topic, partitions=[ReassignablePartition(partition_index=0)])]
        ),
        0,
    )
    dirs = conn.request(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None), 3)
    configs = conn.request(
        ApiKey.DESCRIBE_CONFIGS,
        DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)]
        ),
        1,
    )
    loggers = conn.request(  # the BROKER_LOGGER resource of broker 0: DescribeConfigs on the cluster
        ApiKey.DESCRIBE_CONFIGS,
        DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=8, resource_name="0", configuration_keys=None)]
        ),
        1,
    )
    logger_change = conn.request(  # AlterConfigs on the cluster (only validated)
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsResource(
                    resource_type=8,
                    resource_name="0",
                    configs=[
                        IncrementalAlterableConfig(name="kctl.request", config_operation=0, value="INFO")
                    ],
                )
            ],
            validate_only=True,
        ),
        0,
    )
    return {
        "ElectLeaders": elect.error_code,
        "ElectLeaders partition": elect.replica_election_results[0].partition_result[0].error_code,
        "ListPartitionReassignments": listed.error_code,
        "AlterPartitionReassignments": altered.error_code,
        "DescribeLogDirs": dirs.error_code if not dirs.results else 0,
        "DescribeConfigs broker": configs.results[0].error_code,
        "DescribeConfigs broker loggers": loggers.results[0].error_code,
        "IncrementalAlterConfigs broker loggers": logger_change.responses[0].error_code,
    }


def test_cluster_apis_need_cluster_permissions(setup: Setup) -> None:
    topic = unique("sec-clu")
    _create(setup, topic)
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # alice: ALL on sec-* topics and groups, nothing on the cluster
    with _as(setup, "alice", ALICE_PASSWORD) as conn:
        errors = _cluster_api_errors(conn, topic)
    assert errors == dict.fromkeys(errors, denied), errors
    with _as(setup, "admin", ADMIN_PASSWORD) as conn:  # a super user
        errors = _cluster_api_errors(conn, topic)
    assert denied not in errors.values(), errors
    assert errors["ListPartitionReassignments"] == 0 and errors["DescribeLogDirs"] == 0, errors


def test_replica_apis_need_cluster_action_or_describe(setup: Setup) -> None:
    """A follower's Fetch needs ClusterAction (Read on the topic is not enough); OffsetForLeaderEpoch
    is answered for topics the principal may describe (consumers' truncation check, KIP-320)."""
    from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
    from kctl.protocol.messages.offset_for_leader_epoch import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )

    mine, other = unique("sec-rep"), unique("hidden-rep")
    _create(setup, mine, other)

    def fetch(conn: BrokerConnection, replica_id: int) -> int:
        request = FetchRequest(
            replica_id=replica_id,
            max_wait_ms=0,
            min_bytes=1,
            topics=[
                FetchTopic(
                    topic=mine,
                    partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)],
                )
            ],
            forgotten_topics_data=[],
        )
        return conn.request(ApiKey.FETCH, request, 11).responses[0].partitions[0].error_code

    def epochs(conn: BrokerConnection) -> dict[str, int]:
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                OffsetForLeaderTopic(
                    topic=t, partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)]
                )
                for t in (mine, other)
            ],
        )
        response = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, request, 3)
        return {t.topic: t.partitions[0].error_code for t in response.topics}

    with _as(setup, "alice", ALICE_PASSWORD) as conn:
        assert fetch(conn, -1) == 0  # a consumer's fetch: Read on the topic
        assert fetch(conn, 1) == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # posing as follower 1
        assert epochs(conn) == {mine: 0, other: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    with _as(setup, "admin", ADMIN_PASSWORD) as conn:
        # allowed: answered by the replica logic (broker 1 is no replica here), not an authorization error
        assert fetch(conn, 1) != ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert epochs(conn) == {mine: 0, other: 0}


def test_topic_and_group_admin_apis_are_authorized(setup: Setup) -> None:
    """alice may do everything on sec-* topics and groups and nothing elsewhere: the admin APIs answer
    TOPIC_/GROUP_AUTHORIZATION_FAILED for the others, and ListGroups lists only her groups."""
    from kctl.protocol.messages.configs import (
        AlterableConfig,
        AlterConfigsRequest,
        AlterConfigsResource,
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kctl.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
    from kctl.protocol.messages.delete_groups import DeleteGroupsRequest
    from kctl.protocol.messages.delete_records import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )
    from kctl.protocol.messages.describe_groups import DescribeGroupsRequest
    from kctl.protocol.messages.list_groups import ListGroupsRequest

    mine, other = unique("sec-adm"), unique("hidden-adm")
    my_group, other_group = unique("sec-gadm"), unique("hidden-gadm")
    _create(setup, mine, other)
    for group, props in (
        (my_group, setup.sasl("alice", ALICE_PASSWORD, "PLAIN")),
        (other_group, setup.sasl("admin", ADMIN_PASSWORD, "PLAIN")),
    ):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": setup.sasl_ssl, "group.id": group, **props})
        consumer.assign([confluent_kafka.TopicPartition(mine, 0, 0)])
        consumer.commit(offsets=[confluent_kafka.TopicPartition(mine, 0, 0)], asynchronous=False)
        consumer.close()
    topic_denied, group_denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
    with _as(setup, "alice", ALICE_PASSWORD) as conn:
        described = conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(resource_type=2, resource_name=t, configuration_keys=None)
                    for t in (mine, other)
                ]
            ),
            1,
        )
        assert [r.error_code for r in described.results] == [0, topic_denied]
        altered = conn.request(
            ApiKey.ALTER_CONFIGS,
            AlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        resource_type=2,
                        resource_name=t,
                        configs=[AlterableConfig(name="retention.ms", value="60000")],
                    )
                    for t in (mine, other)
                ],
                validate_only=True,
            ),
            0,
        )
        assert [r.error_code for r in altered.responses] == [0, topic_denied]
        created = conn.request(
            ApiKey.CREATE_PARTITIONS,
            CreatePartitionsRequest(
                topics=[CreatePartitionsTopic(name=other, count=2, assignments=None)],
                timeout_ms=5000,
                validate_only=True,
            ),
            0,
        )
        assert [r.error_code for r in created.results] == [topic_denied]
        deleted = conn.request(
            ApiKey.DELETE_RECORDS,
            DeleteRecordsRequest(
                topics=[
                    DeleteRecordsTopic(
                        name=t, partitions=[DeleteRecordsPartition(partition_index=0, offset=0)]
                    )
                    for t in (mine, other)
                ],
                timeout_ms=5000,
            ),
            0,
        )
        assert [t.partitions[0].error_code for t in deleted.topics] == [0, topic_denied]
        groups = conn.request(
            ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[my_group, other_group]), 0
        )
        assert [g.error_code for g in groups.groups] == [0, group_denied]
        listed = {g.group_id for g in conn.request(ApiKey.LIST_GROUPS, ListGroupsRequest(), 0).groups}
        assert my_group in listed and other_group not in listed
        dropped = conn.request(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[other_group]), 0)
        assert [r.error_code for r in dropped.results] == [group_denied]
    with _as(setup, "admin", ADMIN_PASSWORD) as conn:
        listed = {g.group_id for g in conn.request(ApiKey.LIST_GROUPS, ListGroupsRequest(), 0).groups}
        assert {my_group, other_group} <= listed


def test_auto_creation_needs_create(setup: Setup) -> None:
    """dave may read ro-* (so describe them) but not create: a Metadata request for a missing ro-
    topic is TOPIC_AUTHORIZATION_FAILED and creates nothing; alice (All on sec-*) auto-creates hers."""
    missing, mine = unique("ro-auto"), unique("sec-auto")

    def ask(user: str, password: str, topic: str) -> int:
        with _as(setup, user, password) as conn:
            wanted = [MetadataRequestTopic(name=topic)]
            request = MetadataRequest(topics=wanted, allow_auto_topic_creation=True)
            return conn.request(ApiKey.METADATA, request).topics[0].error_code

    assert ask("dave", DAVE_PASSWORD, missing) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with setup.admin() as admin:
        assert admin.describe_topics([missing])[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask("alice", ALICE_PASSWORD, mine) in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    with setup.admin() as admin:
        assert admin.describe_topics([mine])[0].error_code == 0
