"""Security in cluster mode: SCRAM credentials and ACLs in ZooKeeper in Kafka's layout. The first
user is created with `kctl user create --zookeeper` before the broker runs (as with
kafka-configs.sh --zookeeper), authenticates over SASL_PLAINTEXT, and manages users and ACLs
through the broker; an ACL written into ZooKeeper by another process reaches the broker through
/kafka-acl-changes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from raw_kafka import kctl, unique

from kctl.client.config import ClientConfig
from kctl.client.connection import BrokerConnection
from kctl.localcluster.zookeeper import new_chroot
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.testing import BrokerProcess, ZooKeeperServer, wait_for
from kctl.zk.security_store import ZooKeeperSecurityStore

ROOT_PASSWORD = "root-pw"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[dict[str, Any]]:
    connect = zookeeper.hosts + new_chroot("kctl-sec")
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "kctl",
            "user",
            "create",
            "root",
            "--mechanism",
            "SCRAM-SHA-256",
            "--password-stdin",
            "--zookeeper",
            connect,
        ],
        input=ROOT_PASSWORD.encode() + b"\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    broker = BrokerProcess(
        tmp_path_factory.mktemp("zk-security") / "data",
        {
            "zookeeper.connect": connect,
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:root;User:ANONYMOUS",
            "zookeeper.session.timeout.ms": "6000",
        },
    ).start()
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    try:
        yield {"broker": broker, "connect": connect, "zk": zk, "address": broker.addresses[0]}
    finally:
        zk.stop()
        zk.close()
        broker.stop()


def _props(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _x(props: dict[str, str]) -> list[str]:
    return [a for k, v in props.items() for a in ("-X", f"{k}={v}")]


def _connect(address: str, props: dict[str, str]) -> BrokerConnection:
    host, _, port = address.rpartition(":")
    return BrokerConnection(host, int(port), security=ClientConfig.from_properties(props).security)


def test_credentials_are_stored_like_kafka(cluster: dict[str, Any]) -> None:
    data, _ = cluster["zk"].get("/config/users/root")
    stored = json.loads(data)
    assert stored["version"] == 1
    credential = stored["config"]["SCRAM-SHA-256"]
    assert set(dict(p.split("=", 1) for p in credential.split(",")).keys()) == {
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    }
    assert ROOT_PASSWORD not in data.decode()
    with _connect(cluster["address"], _props("root", ROOT_PASSWORD)) as conn:
        assert conn.request(ApiKey.METADATA, MetadataRequest(topics=None)).brokers


def test_kctl_user_and_acl_round_trip_through_the_broker(cluster: dict[str, Any]) -> None:
    address, root = cluster["address"], _x(_props("root", ROOT_PASSWORD))
    user, topic = unique("frank"), unique("zk-acl")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kctl",
            "user",
            "create",
            user,
            "-m",
            "SCRAM-SHA-512",
            "--password-stdin",
            "-b",
            address,
            *root,
        ],
        input=b"frank-pw\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "SCRAM-SHA-512" in json.loads(cluster["zk"].get(f"/config/users/{user}")[0])["config"]
    listed = kctl("user", "list", "--zookeeper", cluster["connect"], "--format", "json")
    assert {"user": user, "mechanism": "SCRAM-SHA-512", "iterations": 4096} in json.loads(listed.stdout)

    frank = _props(user, "frank-pw", "SCRAM-SHA-512")
    with _connect(address, frank) as conn:  # no ACL yet: the topic is not for frank
        r = conn.request(ApiKey.METADATA, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
        assert r.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    out = kctl(
        "acl",
        "add",
        "--allow-principal",
        f"User:{user}",
        "--operation",
        "All",
        "--topic",
        "zk-acl",
        "--resource-pattern-type",
        "prefixed",
        "-b",
        address,
        *root,
    )
    assert out.returncode == 0, out.stderr
    acl = json.loads(cluster["zk"].get("/kafka-acl-extended/prefixed/Topic/zk-acl")[0])
    assert acl == {
        "version": 1,
        "acls": [{"principal": f"User:{user}", "permissionType": "Allow", "operation": "All", "host": "*"}],
    }
    assert cluster["zk"].get_children("/kafka-acl-extended-changes")
    with _connect(address, frank) as conn:
        r = conn.request(ApiKey.METADATA, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
        assert r.topics[0].error_code == ErrorCode.NONE  # auto-created: All includes Create
    out = kctl(
        "acl", "remove", "--topic", "zk-acl", "--resource-pattern-type", "prefixed", "-b", address, *root
    )
    assert out.returncode == 0, out.stderr
    assert not cluster["zk"].exists("/kafka-acl-extended/prefixed/Topic/zk-acl")


def test_an_acl_written_by_another_process_reaches_the_broker(cluster: dict[str, Any]) -> None:
    address, user = cluster["address"], unique("gina")
    store = ZooKeeperSecurityStore.connect(cluster["connect"])
    try:
        from kctl.common.scram import ScramCredential

        store.set_user_credential(
            user, "SCRAM-SHA-256", ScramCredential.from_password("SCRAM-SHA-256", "g").to_text()
        )
        topic = unique("lit")
        entry = {"principal": f"User:{user}", "permissionType": "Allow", "operation": "Describe", "host": "*"}
        with _connect(address, _props(user, "g")) as conn:
            r = conn.request(
                ApiKey.METADATA,
                MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
            )
            assert r.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            store.update_acls(("Topic", "LITERAL", topic), lambda acls: [*acls, entry])
            assert cluster["zk"].exists(f"/kafka-acl/Topic/{topic}")
            request = MetadataRequest(
                topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
            )
            # described now: it merely does not exist
            wait_for(
                lambda: (
                    conn.request(ApiKey.METADATA, request).topics[0].error_code
                    == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                ),
                "the ACL change to reach the broker",
                timeout=15,
            )
    finally:
        store.close()
