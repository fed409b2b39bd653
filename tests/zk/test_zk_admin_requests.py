"""The registry's admin requests against a real ZooKeeper (kctl.zk.admin_requests): the admin znodes
in Kafka's JSON formats, merged (never overwritten) by concurrent writers, withdrawn, and the ongoing
reassignments read from them and from the topic znodes; and their one definition (kctl.zk.znodes)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kctl.testing import ZooKeeperServer
from kctl.zk.model import OngoingReassignment
from kctl.zk.registry import AdminRequests
from kctl.zk.znodes import (
    ElectLeadersZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper import ZooKeeperRegistry

pytestmark = pytest.mark.zk


@pytest.fixture
def registry(zookeeper: ZooKeeperServer) -> Iterator[ZooKeeperRegistry]:
    with ZooKeeperRegistry(zookeeper.connect_string(zookeeper.chroot()), connection_timeout_ms=10_000) as reg:
        yield reg


@pytest.fixture
def requests(registry: ZooKeeperRegistry) -> AdminRequests:
    return registry.admin_requests


@pytest.fixture
def zk(registry: ZooKeeperRegistry) -> KazooClient:
    return registry.kazoo_client


def _json(client: KazooClient, path: str) -> dict:
    data, _ = client.get(path)
    return json.loads(data)


def test_reassignment_requests_merge_into_kafkas_znode(requests: AdminRequests, zk: KazooClient) -> None:
    assert requests.request_reassignments({("a", 0): [2, 3]}) == {}
    requests.request_reassignments({("a", 1): [3], ("a", 0): [1, 3]})  # replaces a-0, keeps nothing else
    assert zk.get("/admin/reassign_partitions")[0] == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,3]},'
        b'{"topic":"a","partition":1,"replicas":[3]}]}'
    )
    assert requests.reassignment_requests() == {("a", 0): (1, 3), ("a", 1): (3,)}
    assert requests.withdraw_reassignments([("a", 0), ("b", 5)]) == {("a", 0)}
    assert requests.reassignment_requests() == {("a", 1): (3,)}
    assert requests.withdraw_reassignments([("a", 1)]) == {("a", 1)}
    assert zk.exists("/admin/reassign_partitions") is None  # empty: deleted, as Kafka's controller does
    assert requests.withdraw_reassignments([("a", 1)]) == set()


def test_election_requests(requests: AdminRequests, zk: KazooClient) -> None:
    assert requests.request_elections("preferred", [("a", 0)]) == {}
    requests.request_elections("preferred", [("a", 1), ("a", 0)])
    assert zk.get("/admin/preferred_replica_election")[0] == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":1}]}'
    )
    assert requests.preferred_election_requests() == {("a", 0), ("a", 1)}
    requests.request_elections("unclean", [("b", 2)])
    assert _json(zk, "/kctl/elect_leaders") == {
        "version": 1,
        "election_type": "unclean",
        "partitions": [{"topic": "b", "partition": 2}],
    }
    requests.request_elections("unclean", [("b", 3)])
    assert requests.unclean_election_requests() == {("b", 2), ("b", 3)}
    requests.finish_unclean_election_requests({("b", 2)})
    assert requests.unclean_election_requests() == {("b", 3)}
    requests.finish_unclean_election_requests({("b", 3)})
    assert zk.exists("/kctl/elect_leaders") is None
    with pytest.raises(ValueError):
        requests.request_elections("random", [("a", 0)])


def test_an_unreadable_unclean_request_is_deleted(requests: AdminRequests, zk: KazooClient) -> None:
    zk.create("/kctl/elect_leaders", b"{not json", makepath=True)
    assert requests.unclean_election_requests() == set()
    assert zk.exists("/kctl/elect_leaders") is None


def test_ongoing_reassignments_from_both_places(requests: AdminRequests, zk: KazooClient) -> None:
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
    requests.request_reassignments({("b", 0): [2, 3]})  # requested, not started
    ongoing = requests.ongoing_reassignments({"a": {0: (1, 2, 3), 1: (2,)}, "b": {0: (1, 2)}})
    assert ongoing == {
        ("a", 0): OngoingReassignment("a", 0, (1, 2, 3), (3,), (1,)),
        ("b", 0): OngoingReassignment("b", 0, (2, 3, 1), (3,), (1,)),
    }


def test_the_admin_znodes_decode_as_kafka_writes_them() -> None:
    with pytest.raises(ZNodeDecodeError):
        ReassignPartitionsZNode.decode(b"{not json")
    with pytest.raises(ZNodeDecodeError):
        ReassignPartitionsZNode.decode(b'{"version":1,"partitions":[{"topic":"a","partition":0}]}')
    assert ReassignPartitionsZNode.decode(ReassignPartitionsZNode.encode({("x", 3): [5]})) == {("x", 3): (5,)}
    assert ReassignPartitionsZNode.decode(b"") == {}  # no data, no partitions: nothing asked
    assert PreferredReplicaElectionZNode.decode(b'{"version":1}') == set()  # Kafka's "every partition"
    assert ElectLeadersZNode.decode(ElectLeadersZNode.encode({("t", 1)})) == {("t", 1)}
    with pytest.raises(ZNodeDecodeError):
        ElectLeadersZNode.decode(b'{"version":1,"election_type":"random","partitions":[]}')
