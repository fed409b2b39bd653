"""kctl.zk.admin_requests against a real ZooKeeper: the admin znodes in Kafka's JSON formats, merged
(never overwritten) by concurrent writers, withdrawn, and the ongoing reassignments read from them and
from the topic znodes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kctl.testing import ZooKeeperServer
from kctl.zk import admin_requests as ar

pytestmark = pytest.mark.zk


@pytest.fixture
def zk(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    chroot = zookeeper.chroot()
    root = KazooClient(hosts=zookeeper.hosts)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.connect_string(chroot))
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _json(client: KazooClient, path: str) -> dict:
    data, _ = client.get(path)
    return json.loads(data)


def test_reassignment_requests_merge_into_kafkas_znode(zk: KazooClient) -> None:
    ar.request_reassignment(zk, {("a", 0): [2, 3]})
    ar.request_reassignment(zk, {("a", 1): [3], ("a", 0): [1, 3]})  # replaces a-0, keeps nothing else
    assert _json(zk, "/admin/reassign_partitions") == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [1, 3]},
            {"topic": "a", "partition": 1, "replicas": [3]},
        ],
    }
    assert ar.pending_reassignments(zk) == {("a", 0): (1, 3), ("a", 1): (3,)}
    assert ar.withdraw_reassignment(zk, [("a", 0), ("b", 5)]) == {("a", 0)}
    assert ar.pending_reassignments(zk) == {("a", 1): (3,)}
    assert ar.withdraw_reassignment(zk, [("a", 1)]) == {("a", 1)}
    assert zk.exists("/admin/reassign_partitions") is None  # empty: deleted, as Kafka's controller does
    assert ar.withdraw_reassignment(zk, [("a", 1)]) == set()


def test_election_requests(zk: KazooClient) -> None:
    ar.request_election(zk, "preferred", [("a", 0)])
    ar.request_election(zk, "preferred", [("a", 1), ("a", 0)])
    assert _json(zk, "/admin/preferred_replica_election") == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 1}],
    }
    ar.request_election(zk, "unclean", [("b", 2)])
    assert _json(zk, "/kctl/elect_leaders") == {
        "version": 1,
        "election_type": "unclean",
        "partitions": [{"topic": "b", "partition": 2}],
    }
    data, _ = zk.get("/kctl/elect_leaders")
    assert ar.decode_election(data, ar.ELECT_LEADERS_PATH) == ("unclean", {("b", 2)})
    with pytest.raises(ValueError):
        ar.request_election(zk, "random", [("a", 0)])


def test_ongoing_reassignments_from_both_places(zk: KazooClient) -> None:
    # started by the controller: the topic znode carries adding/removing replicas (Kafka's TopicZNode v2+)
    zk.create(
        "/brokers/topics/a",
        json.dumps(
            {
                "version": 3,
                "partitions": {"0": [1, 2, 3], "1": [2]},
                "adding_replicas": {"0": [3]},
                "removing_replicas": {"0": [1]},
            }
        ).encode(),
        makepath=True,
    )
    ar.request_reassignment(zk, {("b", 0): [2, 3]})  # requested, not started
    ongoing = ar.ongoing_reassignments(zk, {"a": {0: (1, 2, 3), 1: (2,)}, "b": {0: (1, 2)}})
    assert ongoing == {
        ("a", 0): ar.OngoingReassignment("a", 0, (1, 2, 3), (3,), (1,)),
        ("b", 0): ar.OngoingReassignment("b", 0, (2, 3, 1), (3,), (1,)),
    }


def test_undecodable_znodes_are_reported() -> None:
    with pytest.raises(ar.AdminRequestDecodeError):
        ar.decode_reassignment(b"{not json")
    with pytest.raises(ar.AdminRequestDecodeError):
        ar.decode_reassignment(b'{"version":1,"partitions":[{"topic":"a","partition":0}]}')
    assert ar.decode_reassignment(ar.encode_reassignment({("x", 3): [5]})) == {("x", 3): (5,)}
