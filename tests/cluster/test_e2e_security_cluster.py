"""Security in cluster mode: replication between brokers through ``inter.broker.listener.name`` while
clients use a SASL_SSL listener and the ACL authorizer is on.

- Three brokers replicate over a PLAINTEXT inter-broker listener: their principal there is
  ``User:ANONYMOUS``, and a follower's Fetch needs ClusterAction on the cluster, as in Kafka. Without
  that permission the followers are refused (an acks=all produce with min.insync.replicas=3 cannot
  complete); once an ACL grants it, they catch up and the same produce succeeds.
- Two brokers replicate over a SASL_SSL inter-broker listener that also requires client certificates:
  each broker presents its key store and authenticates with SCRAM-SHA-512 as ``User:broker`` (a super
  user; its credential is put in ZooKeeper with `kctl user create --zookeeper` before the brokers
  start), with
  ``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS username/password; its sessions
  last 2 s (``connections.max.reauth.ms``), so replication goes on only if the fetchers renew them.

Clients (confluent-kafka, kctl's AdminClient) only ever talk to the SASL_SSL client listener."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_kafka import unique

from kctl.client import AdminClient
from kctl.client.admin import NewTopic
from kctl.client.admin.security import AclBinding
from kctl.localcluster.zookeeper import new_chroot
from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType
from kctl.testing import LocalCluster, ZooKeeperServer, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("cryptography")
from kctl.testing import certs as security_certs  # noqa: E402

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
BROKER_PASSWORD = "broker-Scram-512"


def _jaas(module: str, *, username: str, password: str, users: dict[str, str] | None = None) -> str:
    options = f'username="{username}" password="{password}"'
    options += "".join(f' user_{u}="{p}"' for u, p in (users or {}).items())
    return f"org.apache.kafka.common.security.{module} required {options};"


PLAIN_CLIENTS = _jaas(
    "plain.PlainLoginModule",
    username="admin",
    password=ADMIN_PASSWORD,
    users={"admin": ADMIN_PASSWORD, "alice": ALICE_PASSWORD},
)


def _common(ca: security_certs.TestCA, server: security_certs.Pem) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.keystore),
        "ssl.truststore.location": str(ca.pem),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_CLIENTS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "num.partitions": "1",
        "zookeeper.session.timeout.ms": "6000",
    }


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[security_certs.TestCA, security_certs.Pem]:
    ca = security_certs.TestCA(tmp_path_factory.mktemp("cluster-certs"))
    return ca, ca.issue("broker", "localhost", server=True)


def _client(cluster: LocalCluster, ca: Path, user: str, password: str) -> dict[str, str]:
    """librdkafka / kctl properties for the SASL_SSL listener (the second one of every broker)."""
    return {
        "bootstrap.servers": ",".join(b.addresses[1] for b in cluster.brokers.values()),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }


def _admin(cluster: LocalCluster, ca: Path) -> AdminClient:
    props = _client(cluster, ca, "admin", ADMIN_PASSWORD)
    return AdminClient(props.pop("bootstrap.servers"), props)


def _allow(principal: str, rtype: AclResourceType, name: str, operation: AclOperation) -> AclBinding:
    pattern = PatternType.LITERAL if rtype == AclResourceType.CLUSTER else PatternType.PREFIXED
    return AclBinding(rtype, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _produce(props: dict[str, str], topic: str, values: list[str], timeout_ms: int) -> list[str | None]:
    """acks=all produce of ``values``; the delivery error of each (None: acknowledged)."""
    outcomes: list[str | None] = []
    producer = confluent_kafka.Producer(
        {**props, "acks": "all", "message.timeout.ms": timeout_ms, "request.timeout.ms": timeout_ms}
    )
    for value in values:
        producer.produce(
            topic,
            value.encode(),
            on_delivery=lambda error, _msg: outcomes.append(None if error is None else error.name()),
        )
    producer.flush(timeout_ms / 1000 + 30)
    return outcomes


def _consume(props: dict[str, str], topic: str, wanted: list[str]) -> list[bytes]:
    """Read ``topic`` from the start (in a new group) until every value of ``wanted`` was seen, then
    commit (a group commit: __consumer_offsets is replicated too)."""
    consumer = confluent_kafka.Consumer(
        {**props, "group.id": unique("sec-cg"), "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    missing = {v.encode() for v in wanted}
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while missing and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
                missing.discard(message.value())
        committed = consumer.commit(asynchronous=False)
        assert committed and all(tp.error is None and tp.offset > 0 for tp in committed), committed
    finally:
        consumer.close()
    return got


def _isr(admin: AdminClient, topic: str) -> list[set[int]]:
    """The ISR of each partition of ``topic``."""
    return [set(p.isr) for p in admin.describe_topics([topic])[0].partitions]


# ------------------------------------------------------------------ PLAINTEXT inter-broker listener


@pytest.fixture(scope="module")
def plaintext_inter_broker(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer, tls: Any
) -> Iterator[LocalCluster]:
    ca, server = tls
    properties = {
        **_common(ca, server),
        "listeners": "INTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        # the brokers are User:ANONYMOUS on INTERNAL: no super user; ClusterAction comes from an ACL
        "super.users": "User:admin",
    }
    cluster = LocalCluster(
        tmp_path_factory.mktemp("sec-cluster-plain"), 3, properties=properties, zookeeper=zookeeper
    ).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_followers_on_a_plaintext_listener_need_cluster_action(
    plaintext_inter_broker: LocalCluster, tls: Any
) -> None:
    cluster, ca = plaintext_inter_broker, tls[0].pem
    topic = unique("sec-rep")
    alice = _client(cluster, ca, "alice", ALICE_PASSWORD)
    with _admin(cluster, ca) as admin:
        assert all(
            r.error_code == 0
            for r in admin.create_acls(
                [
                    _allow("User:alice", AclResourceType.TOPIC, "sec-", AclOperation.ALL),
                    _allow("User:alice", AclResourceType.GROUP, "sec-", AclOperation.ALL),
                ]
            )
        )
        created = admin.create_topics([NewTopic(topic, 1, 3, {"min.insync.replicas": "3"})])
        assert [r.error_code for r in created] == [0]
        # the followers are refused (TOPIC_AUTHORIZATION_FAILED on their fetches): nothing is replicated
        assert _produce(alice, topic, ["early"], timeout_ms=3000) != [None]

        granted = admin.create_acls(
            [_allow("User:ANONYMOUS", AclResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)]
        )
        assert [r.error_code for r in granted] == [0]
        wait_for(lambda: _isr(admin, topic) == [{1, 2, 3}], "a full ISR", timeout=30)
        values = [f"v{i}" for i in range(20)]
        assert _produce(alice, topic, values, timeout_ms=30000) == [None] * len(values)
    # the refused record may be in the log (appended by the leader, never acknowledged), maybe twice
    got = _consume(alice, topic, values)
    assert [v for v in got if v != b"early"] == [v.encode() for v in values]
    for broker in cluster.brokers.values():
        assert broker.running, broker.log_tail()


# ------------------------------------------------------------------- SASL_SSL inter-broker listener


@pytest.fixture(scope="module")
def sasl_ssl_inter_broker(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer, tls: Any
) -> Iterator[LocalCluster]:
    ca, server = tls
    chroot = new_chroot("kctl-sec-cluster")
    # the brokers' own credential goes into ZooKeeper before they start (kafka-configs.sh --zookeeper)
    argv = [sys.executable, "-m", "kctl", "user", "create", "broker", "--mechanism", "SCRAM-SHA-512"]
    created = subprocess.run(
        [*argv, "--password-stdin", "--zookeeper", zookeeper.connect_string(chroot)],
        input=BROKER_PASSWORD.encode() + b"\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    properties = {
        **_common(ca, server),
        "listeners": "REPLICATION://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "REPLICATION:SASL_SSL,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "REPLICATION",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.replication.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.replication.ssl.client.auth": "required",
        # short SASL sessions between brokers: the fetchers must renew theirs in time
        "listener.name.replication.connections.max.reauth.ms": "2000",
        "listener.name.replication.scram-sha-512.sasl.jaas.config": _jaas(
            "scram.ScramLoginModule", username="broker", password=BROKER_PASSWORD
        ),
        "super.users": "User:admin;User:broker",
    }
    cluster = LocalCluster(
        tmp_path_factory.mktemp("sec-cluster-sasl"),
        2,
        properties=properties,
        zookeeper=zookeeper,
        chroot=chroot,
    ).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_brokers_replicate_over_sasl_ssl_with_scram(sasl_ssl_inter_broker: LocalCluster, tls: Any) -> None:
    cluster, ca = sasl_ssl_inter_broker, tls[0].pem
    topic = unique("sec-scram-rep")
    admin_props = _client(cluster, ca, "admin", ADMIN_PASSWORD)
    with _admin(cluster, ca) as admin:
        created = admin.create_topics([NewTopic(topic, 2, 2, {"min.insync.replicas": "2"})])
        assert [r.error_code for r in created] == [0]
        values = [f"s{i}" for i in range(20)]
        assert _produce(admin_props, topic, values, timeout_ms=30000) == [None] * len(values)
        wait_for(lambda: _isr(admin, topic) == [{1, 2}, {1, 2}], "a full ISR", timeout=30)
        # across several inter-broker session lifetimes, replication goes on (acks=all, 2 in sync)
        until, rounds = time.monotonic() + 5, 0
        while time.monotonic() < until:
            more = [f"r{rounds}-{i}" for i in range(5)]
            assert _produce(admin_props, topic, more, timeout_ms=10000) == [None] * len(more)
            values += more
            rounds += 1
        assert _isr(admin, topic) == [{1, 2}, {1, 2}]
    got = _consume(admin_props, topic, values)
    assert sorted(got) == sorted(v.encode() for v in values)
    for broker in cluster.brokers.values():
        assert broker.running, broker.log_tail()
        log = broker.log_tail(400)
        assert "authentication to broker" not in log
        assert "SASL session expired" not in log  # renewed before the end, never cut off
