"""A TLS listener's key material as a dynamic broker config (issue #16 §1), on one real broker
(embedded metadata) with a PLAINTEXT and an SSL listener: altering
``listener.name.ssl.ssl.keystore.location`` (kctl's admin client, then ``kctl broker config alter``)
makes new TLS connections handshake with the new certificate while a connection made before keeps
working; bad material (a missing file, a certificate with another subject, the config without the
listener prefix, at the cluster-wide default) is refused with INVALID_REQUEST and changes nothing."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_kafka import kctl

from kctl.broker.security.listeners import listener_security
from kctl.client import AdminClient
from kctl.protocol import ApiKey, ErrorCode, RequestHeader, decode_response, encode_request
from kctl.protocol.configs import ConfigSource
from kctl.protocol.messages.metadata import MetadataRequest
from kctl.testing import BrokerProcess, wait_for

pytest.importorskip("cryptography")
from kctl.testing import certs as security_certs

PREFIXED = "listener.name.ssl.ssl.keystore.location"
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG


class Setup:
    def __init__(self, broker: BrokerProcess, ca: security_certs.TestCA, certs: dict[str, Any]) -> None:
        self.broker = broker
        self.plaintext, self.ssl = broker.addresses
        self.ca = ca
        self.certs = certs

    def connect(self) -> ssl.SSLSocket:
        host, _, port = self.ssl.rpartition(":")
        context = ssl.create_default_context(cafile=str(self.ca.pem))
        return context.wrap_socket(
            socket.create_connection((host, int(port)), timeout=10), server_hostname=host
        )

    def served_serial(self) -> str:
        with self.connect() as sock:
            return str(sock.getpeercert()["serialNumber"])

    def admin(self) -> AdminClient:
        return AdminClient(self.plaintext)


def _serial(pem: security_certs.Pem) -> str:
    return str(ssl._ssl._test_decode_cert(str(pem.certificate))["serialNumber"])  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    directory = tmp_path_factory.mktemp("dynamic-ssl")
    ca = security_certs.TestCA(directory / "certs")
    certs = {
        "first": ca.issue("first", "localhost", server=True),
        "renewed": ca.issue("renewed", "localhost", server=True),  # same subject, new key and serial
        "third": ca.issue("third", "localhost", server=True),
        "fourth": ca.issue("fourth", "localhost", server=True),
        "fifth": ca.issue("fifth", "localhost", server=True),
        "other": ca.issue("other", "other-host", server=True),  # another subject: Kafka refuses it
    }
    properties = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs["first"].keystore),
        "num.partitions": "1",
    }
    with BrokerProcess(directory / "data", properties).start() as broker:
        yield Setup(broker, ca, certs)


def _metadata(sock: ssl.SSLSocket, correlation_id: int) -> Any:
    header = RequestHeader(ApiKey.METADATA, 1, correlation_id, "old-connection")
    sock.sendall(encode_request(header, MetadataRequest(topics=[])))
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return decode_response(header, bytearray(_exactly(sock, size)))[1]


def _exactly(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def _refused(setup: Setup, configs: dict[str, str], broker_id: int | None = 0) -> str:
    with setup.admin() as admin:
        result = admin.alter_broker_configs(broker_id, configs)
    assert result.error_code == ErrorCode.INVALID_REQUEST, result
    return str(result.error_message)


def test_new_keystore_serves_new_connections_old_ones_stay(setup: Setup) -> None:
    first, renewed = _serial(setup.certs["first"]), _serial(setup.certs["renewed"])
    assert setup.served_serial() == first
    with setup.connect() as old:
        assert _metadata(old, 1).brokers
        with setup.admin() as admin:
            checked = admin.alter_broker_configs(
                0, {PREFIXED: str(setup.certs["renewed"].keystore)}, validate_only=True
            )
            assert checked.error_code == 0, checked
            assert setup.served_serial() == first  # validate_only: nothing applied
            result = admin.alter_broker_configs(0, {PREFIXED: str(setup.certs["renewed"].keystore)})
            assert result.error_code == 0, result
            described = {e.name: e for e in admin.describe_broker_configs(0)}
        assert setup.served_serial() == renewed
        assert old.getpeercert()["serialNumber"] == first
        assert _metadata(old, 2).brokers  # the connection made before the change still serves
    assert not described["ssl.keystore.location"].read_only  # dynamic (per listener), as Kafka marks it
    entry = described[PREFIXED]
    assert (entry.value, entry.source) == (str(setup.certs["renewed"].keystore), DYNAMIC_BROKER)


def _dynamic(setup: Setup) -> dict[str, str | None]:
    return _dynamic_of(setup, 0)


def test_bad_material_is_refused_and_changes_nothing(setup: Setup, tmp_path: Path) -> None:
    before, stored = setup.served_serial(), _dynamic(setup)
    message = _refused(setup, {PREFIXED: str(tmp_path / "missing.pem")})
    assert "missing.pem" in message or "No such file" in message
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    _refused(setup, {PREFIXED: str(garbage)})
    assert "DistinguishedName" in _refused(setup, {PREFIXED: str(setup.certs["other"].keystore)})
    assert "listener prefix" in _refused(setup, {"ssl.keystore.location": str(setup.certs["third"].keystore)})
    assert "broker id must be specified" in _refused(
        setup, {PREFIXED: str(setup.certs["third"].keystore)}, broker_id=None
    )
    assert setup.served_serial() == before
    assert _dynamic(setup) == stored


def test_kctl_broker_config_alter_reloads(setup: Setup) -> None:
    keystore = str(setup.certs["third"].keystore)
    args = ["--bootstrap-server", setup.plaintext, "--broker", "0", "--set", f"{PREFIXED}={keystore}"]
    done = kctl("broker", "config", "alter", *args, "--execute")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert setup.served_serial() == _serial(setup.certs["third"])
    setup.broker.stop()  # the stored dynamic keystore is the listener's at the next start too
    setup.broker.start()
    setup.plaintext, setup.ssl = setup.broker.addresses
    assert setup.served_serial() == _serial(setup.certs["third"])


def test_kafkas_kafka_configs_alters_and_describes_it(setup: Setup, kafka_tool: Any, tmp_path: Path) -> None:
    """Apache Kafka's own kafka-configs, unchanged: the alteration Kafka's docs give for a keystore
    update, then the dynamic config described; a keystore that cannot be loaded fails the command."""
    entity = ("--bootstrap-server", setup.plaintext, "--entity-type", "brokers", "--entity-name", "0")
    keystore = str(setup.certs["fourth"].keystore)
    bad = kafka_tool("kafka-configs", *entity, "--alter", "--add-config", f"{PREFIXED}={tmp_path / 'no.pem'}")
    assert bad.returncode != 0 and "InvalidRequestException" in bad.stdout + bad.stderr, bad.describe()
    kafka_tool("kafka-configs", *entity, "--alter", "--add-config", f"{PREFIXED}={keystore}").check()
    assert setup.served_serial() == _serial(setup.certs["fourth"])
    described = kafka_tool("kafka-configs", *entity, "--describe").check()
    assert any(line.split()[0] == f"{PREFIXED}={keystore}" for line in described.lines[1:]), described.lines


def test_keystore_rewritten_in_place_reloads_on_an_alteration(setup: Setup) -> None:
    """As Kafka (``reloadUpdatedFilesWithoutConfigChange``): the keystore file rewritten under the same
    name is reloaded when this broker's configs are altered, even to the same value; a rewritten file
    that cannot be loaded refuses the alteration and the listener keeps serving what it had."""
    path = setup.certs["fourth"].keystore  # the listener's keystore since the kafka-configs test
    with setup.admin() as admin:
        assert _dynamic(setup)[PREFIXED] == str(path)
        before = setup.served_serial()
        path.write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
        refused = admin.alter_broker_configs(0, {PREFIXED: str(path)})
        assert refused.error_code == ErrorCode.INVALID_REQUEST, refused
        assert setup.served_serial() == before
        path.write_bytes(setup.certs["fifth"].keystore.read_bytes())
        result = admin.alter_broker_configs(0, {PREFIXED: str(path)})
        assert result.error_code == 0, result
    assert setup.served_serial() == _serial(setup.certs["fifth"])


def test_truststore_reload_replaces_the_trusted_cas(tmp_path: Path) -> None:
    """In process: with ``ssl.client.auth=required``, a new trust store replaces the old one for new
    handshakes (a client of the old CA is refused afterwards, one of the new CA accepted)."""
    old_ca, new_ca = security_certs.TestCA(tmp_path / "old"), security_certs.TestCA(tmp_path / "new")
    server = old_ca.issue("server", "localhost", server=True)
    clients = {
        "old": old_ca.issue("bob", "bob", server=False),
        "new": new_ca.issue("alice", "alice", server=False),
    }
    values = {
        "listener.security.protocol.map": "SSL:SSL",
        "ssl.keystore.location": str(server.keystore),
        "ssl.client.auth": "required",
    }
    security = listener_security({}, {**values, "ssl.truststore.location": str(old_ca.pem)}, "SSL")
    assert security.ssl_context is not None
    loop = asyncio.new_event_loop()

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    listening = loop.run_until_complete(asyncio.start_server(greet, "127.0.0.1", 0, ssl=security.ssl_context))
    port = listening.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def accepted(who: str) -> bool:
        context = ssl.create_default_context(cafile=str(old_ca.pem))
        context.load_cert_chain(clients[who].certificate, clients[who].key)
        try:
            with context.wrap_socket(
                socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost"
            ) as sock:
                return sock.recv(2) == b"ok"
        except (ssl.SSLError, ConnectionError):
            return False

    try:
        assert accepted("old") and not accepted("new")
        security.reconfigure({}, {**values, "ssl.truststore.location": str(new_ca.pem)})
        assert accepted("new") and not accepted("old")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        listening.close()
        loop.close()


def test_zookeeper_notification_reloads(zookeeper: Any, broker_factory: Any, tmp_path: Path) -> None:
    """ZooKeeper mode: a keystore written to ``/config/brokers/<id>`` by another party (Kafka's tools
    write the same znode and change notification) is applied on the notification; one that cannot be
    loaded is logged and the listener keeps serving its material."""
    kazoo = pytest.importorskip("kazoo.client")
    ca = security_certs.TestCA(tmp_path / "certs")
    first, renewed = (ca.issue(stem, "localhost", server=True) for stem in ("first", "renewed"))
    chroot = f"/dyn-ssl-{uuid.uuid4().hex[:8]}"
    broker = broker_factory(
        {
            "zookeeper.connect": zookeeper.hosts + chroot,
            "zookeeper.session.timeout.ms": "6000",
            "broker.id": "3",
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(first.keystore),
        }
    )
    setup = Setup(broker, ca, {})
    assert setup.served_serial() == _serial(first)
    zk = kazoo.KazooClient(hosts=zookeeper.hosts + chroot, timeout=10)
    zk.start(timeout=15)

    def store(keystore: str) -> None:
        zk.ensure_path("/config/brokers/3")
        zk.set("/config/brokers/3", json.dumps({"version": 1, "config": {PREFIXED: keystore}}).encode())
        notification = json.dumps({"version": 2, "entity_path": "brokers/3"}).encode()
        zk.create("/config/changes/config_change_", notification, sequence=True, makepath=True)

    try:
        store(str(tmp_path / "missing.pem"))
        wait_for(lambda: _dynamic_of(setup, 3).get(PREFIXED) is not None, "the stored config", 10)
        assert setup.served_serial() == _serial(first)  # not loadable: the listener keeps its material
        store(str(renewed.keystore))
        wait_for(lambda: setup.served_serial() == _serial(renewed), "the reloaded keystore", 10)
    finally:
        zk.stop()
        zk.close()


def _dynamic_of(setup: Setup, broker_id: int) -> dict[str, str | None]:
    with setup.admin() as admin:
        return {
            e.name: e.value for e in admin.describe_broker_configs(broker_id) if e.source == DYNAMIC_BROKER
        }
