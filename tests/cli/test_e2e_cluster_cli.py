"""The operator's cluster commands for real: `kctl cluster up/status/down` (a real ZooKeeper and three
brokers as detached processes), `kctl broker list`, `kctl topic describe`'s partition filters, the
admin APIs answered by the controller (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments: the znodes they write, read back with kazoo), `kctl partition reassign`
and `kctl partition elect-leaders`, and their exit statuses.

One cluster serves the module; the tests run in file order and the last ones kill a broker and stop
the cluster."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import kctl as run_kctl
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.localcluster.launcher import load_state, process_alive
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kctl.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from kctl.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kctl.testing import wait_for

kctl = partial(run_kctl, timeout=180)  # cluster commands wait for brokers

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.zk]

SESSION_TIMEOUT_MS = 4000


class Cluster:
    def __init__(self, directory: Path, bootstrap: str) -> None:
        self.directory = directory
        self.bootstrap = bootstrap
        self.state = load_state(directory)
        self._zk: KazooClient | None = None

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.state.zookeeper_connect)
            self._zk.start(timeout=10)
        return self._zk

    def json(self, path: str) -> dict[str, Any] | None:
        """The znode's JSON, None if it is not there (a controller may delete it at any moment: no
        exists-then-get)."""
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data)

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("cluster") / "kctl-cluster"
    result = kctl(
        "cluster", "up", "--brokers", "3", "--dir", str(directory),
        "-X", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    )
    assert result.returncode == 0, result.stderr
    handle = Cluster(directory, result.stdout.strip())
    try:
        yield handle
    finally:
        handle.close()
        kctl("cluster", "down", "--dir", str(directory))


def test_up_starts_zookeeper_and_three_registered_brokers(cluster: Cluster) -> None:
    addresses = cluster.bootstrap.split(",")
    assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert sorted(cluster.zk.get_children("/brokers/ids"), key=int) == ["1", "2", "3"]
    assert cluster.state.zookeeper_connect.endswith("/kctl")
    for b in cluster.state.brokers:
        assert (cluster.directory / f"broker-{b.broker_id}" / "data").is_dir()
    # a second `up` on a running cluster is refused
    again = kctl("cluster", "up", "--dir", str(cluster.directory))
    assert again.returncode == 1 and "is running" in again.stderr


def test_status_shows_every_process_and_the_controller(cluster: Cluster) -> None:
    result = kctl("cluster", "status", "--dir", str(cluster.directory), "-f", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["role"], r["broker_id"], r["alive"]) for r in rows] == [
        ("zookeeper", None, True),
        ("broker", 1, True),
        ("broker", 2, True),
        ("broker", 3, True),
    ]
    controller = cluster.json("/controller")
    assert controller is not None
    assert [r["broker_id"] for r in rows if r["controller"]] == [controller["brokerid"]]
    assert rows[1]["address"] == cluster.bootstrap.split(",")[0]


def test_status_of_a_directory_without_a_cluster_exits_3(tmp_path: Path) -> None:
    result = kctl("cluster", "status", "--dir", str(tmp_path))
    assert result.returncode == 3 and "no cluster" in result.stderr


def test_racks_are_checked_before_anything_starts(tmp_path: Path) -> None:
    directory = tmp_path / "racked"
    short = kctl("cluster", "up", "--brokers", "3", "--racks", "r0,r1", "--dir", str(directory))
    assert short.returncode == 2 and "one rack per broker" in short.stderr
    both = kctl("cluster", "up", "--racks", "r{id}", "-X", "broker.rack=r", "--dir", str(directory))
    assert both.returncode == 2 and "--racks and -X broker.rack" in both.stderr
    assert not directory.exists()


def test_broker_list(cluster: Cluster) -> None:
    assert kctl("topic", "create", "spread", "-p", "3", "-r", "2", "-b", cluster.bootstrap).returncode == 0
    with AdminClient(cluster.bootstrap) as admin:
        [topic] = admin.describe_topics(["spread"])
        controller = admin.describe_cluster().controller_id
    result = kctl("broker", "list", "-b", cluster.bootstrap, "-f", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["broker_id"] for r in rows] == [1, 2, 3]
    assert [r["endpoint"] for r in rows] == cluster.bootstrap.split(",")
    assert [r["broker_id"] for r in rows if r["controller"]] == [controller]
    for r in rows:
        assert r["leader_partitions"] == sum(1 for p in topic.partitions if p.leader == r["broker_id"])
        assert r["replica_partitions"] == sum(1 for p in topic.partitions if r["broker_id"] in p.replicas)
    table = kctl("broker", "list", "-b", cluster.bootstrap)
    assert table.returncode == 0 and "CONTROLLER" in table.stdout


def _controller_admin(cluster: Cluster) -> AdminClient:
    return AdminClient(cluster.bootstrap)


def test_alter_partition_reassignments_writes_kafkas_znode(cluster: Cluster) -> None:
    assert kctl("topic", "create", "moving", "-p", "2", "-r", "1", "-b", cluster.bootstrap).returncode == 0
    with _controller_admin(cluster) as admin:
        [topic] = admin.describe_topics(["moving"])
        p0 = topic.partitions[0]
        target = [b for b in (1, 2, 3) if b not in p0.replicas][:1] + list(p0.replicas)
        results = admin.alter_partition_reassignments(
            {
                TopicPartition("moving", 0): target,
                TopicPartition("moving", 1): [9],
                TopicPartition("nope", 0): [1],
            }
        )
        assert [(r.topic_partition.partition, r.error) for r in results] == [
            (0, None),
            (1, "INVALID_REPLICA_ASSIGNMENT"),
            (0, "UNKNOWN_TOPIC_OR_PARTITION"),
        ]

        def seen() -> bool:
            # pending in Kafka's znode, or already taken up by a controller executing it
            pending = cluster.json("/admin/reassign_partitions")
            entries = pending["partitions"] if pending else []
            topic_znode = cluster.json("/brokers/topics/moving") or {}
            return (
                {"topic": "moving", "partition": 0, "replicas": target} in entries
                or bool((topic_znode.get("adding_replicas") or {}).get("0"))
                or topic_znode["partitions"]["0"] == target
            )

        wait_for(seen, "the reassignment in ZooKeeper")
        listed = admin.list_partition_reassignments()
        if TopicPartition("moving", 0) in listed:
            assert set(listed[TopicPartition("moving", 0)].replicas) == set(target)
        # cancel: the pending request is withdrawn
        [cancelled] = admin.alter_partition_reassignments({TopicPartition("moving", 0): None})
        assert cancelled.error in (None, "NO_REASSIGNMENT_IN_PROGRESS")
        pending = cluster.json("/admin/reassign_partitions")
        if pending is not None:
            assert {"topic": "moving", "partition": 0, "replicas": target} not in pending["partitions"]


def test_elect_leaders_asks_the_controller_through_kafkas_znode(cluster: Cluster) -> None:
    with _controller_admin(cluster) as admin:
        [topic] = admin.describe_topics(["spread"])
        p = topic.partitions[0]
        assert p.leader == p.replicas[0]
        [not_needed] = admin.elect_leaders("preferred", [TopicPartition("spread", 0)])
        assert not_needed.error == "ELECTION_NOT_NEEDED"
        # move the leadership away from the preferred replica, as a failover would have
        path = f"/brokers/topics/spread/partitions/{p.partition}/state"
        data, stat = cluster.zk.get(path)
        state = json.loads(data)
        state.update(leader=p.replicas[1], leader_epoch=state["leader_epoch"] + 1)
        cluster.zk.set(path, json.dumps(state).encode(), version=stat.version)
        wait_for(
            lambda: admin.describe_topics(["spread"])[0].partitions[0].leader == p.replicas[1],
            "the moved leadership in Metadata",
        )
        [result] = admin.elect_leaders("preferred", [TopicPartition("spread", 0)], timeout=3)
        if result.ok:  # a controller executed it
            assert admin.describe_topics(["spread"])[0].partitions[0].leader == p.replicas[0]
        else:
            assert result.error == "REQUEST_TIMED_OUT"
            assert cluster.json("/admin/preferred_replica_election") == {
                "version": 1,
                "partitions": [{"topic": "spread", "partition": 0}],
            }
        [unclean] = admin.elect_leaders("unclean", [TopicPartition("spread", 1)])
        assert unclean.error == "ELECTION_NOT_NEEDED"  # it has a leader


def test_only_the_controller_answers_the_admin_apis(cluster: Cluster) -> None:
    with AdminClient(cluster.bootstrap) as admin:
        controller = admin.describe_cluster().controller_id
        other = next(b for b in (1, 2, 3) if b != controller)
        elect = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="spread", partitions=[0])])
        for version in (0, 1, 2):
            response = admin.cluster.request(other, ApiKey.ELECT_LEADERS, elect, version)
            [[result]] = [r.partition_result for r in response.replica_election_results]
            assert result.error_code == ErrorCode.NOT_CONTROLLER
            assert response.error_code == (ErrorCode.NOT_CONTROLLER if version >= 1 else 0)
        alter = admin.cluster.request(
            other, ApiKey.ALTER_PARTITION_REASSIGNMENTS, AlterPartitionReassignmentsRequest()
        )
        listed = admin.cluster.request(
            other, ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest()
        )
        assert alter.error_code == listed.error_code == ErrorCode.NOT_CONTROLLER
        assert (
            admin.cluster.request(
                controller, ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest()
            ).error_code
            == 0
        )


def test_an_embedded_broker_is_a_cluster_of_one(broker: BrokerProcess) -> None:
    with AdminClient(broker.bootstrap) as admin:
        [created] = admin.create_topics([NewTopic("solo", 2, 1)])
        assert created.ok, created.error
        tp0, tp1 = TopicPartition("solo", 0), TopicPartition("solo", 1)
        assert {r.error for r in admin.elect_leaders("preferred", [tp0, tp1])} == {"ELECTION_NOT_NEEDED"}
        assert [r.error for r in admin.alter_partition_reassignments({tp0: [0], tp1: [5]})] == [
            None,  # already its assignment: nothing to move
            "INVALID_REPLICA_ASSIGNMENT",
        ]
        assert admin.list_partition_reassignments() == {}
        assert [r.error for r in admin.alter_partition_reassignments({tp0: None})] == [
            "NO_REASSIGNMENT_IN_PROGRESS"
        ]


def test_reassign_generate_and_plan_output(cluster: Cluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    generated = kctl("partition", "reassign", "--generate", "--topic", "spread", "--broker-list", "1,2",
                     "--seed", "3", "-f", "json", "-b", b)  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    plan = json.loads(generated.stdout)
    assert plan["version"] == 1
    assert [(e["topic"], e["partition"]) for e in plan["partitions"]] == [("spread", p) for p in range(3)]
    assert all(set(e["replicas"]) == {1, 2} and e["log_dirs"] == ["any", "any"] for e in plan["partitions"])
    assert "current partition replica assignment" in generated.stderr
    current = json.loads(generated.stderr.split("roll back): ", 1)[1].splitlines()[0])
    with AdminClient(b) as admin:
        [topic] = admin.describe_topics(["spread"])
    assert {e["partition"]: e["replicas"] for e in current["partitions"]} == {
        p.partition: list(p.replicas) for p in topic.partitions
    }
    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"version":1,"topics":[{"topic":"spread"}]}')
    same = kctl("partition", "reassign", "--generate", "--topics-to-move-json-file", str(topics_file),
                "--brokers", "1,2", "--seed", "3", "-f", "json", "-b", b)  # fmt: skip
    assert same.returncode == 0 and json.loads(same.stdout) == plan

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(generated.stdout)
    shown = kctl("partition", "reassign", "--reassignment-json-file", str(plan_file), "-f", "json", "-b", b)
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    for row, p in zip(rows, topic.partitions, strict=True):
        assert row["current"] == list(p.replicas)
        assert row["adding"] == [r for r in row["target"] if r not in p.replicas]
        assert row["bytes_to_copy"] == row["size"] * len(row["adding"])
        assert row["status"] in ("planned", "unchanged")
    assert "nothing changed" in shown.stderr
    assert cluster.json("/admin/reassign_partitions") is None or all(
        e["topic"] != "spread" for e in cluster.json("/admin/reassign_partitions")["partitions"]
    )


def test_reassign_verify_of_a_plan_already_in_place_exits_0(cluster: Cluster, tmp_path: Path) -> None:
    with AdminClient(cluster.bootstrap) as admin:
        [topic] = admin.describe_topics(["spread"])
    plan_file = tmp_path / "plan.json"
    entries = [
        {"topic": "spread", "partition": p.partition, "replicas": list(p.replicas)} for p in topic.partitions
    ]
    plan_file.write_text(json.dumps({"version": 1, "partitions": entries}))
    result = kctl("partition", "reassign", "--reassignment-json-file", str(plan_file), "--verify",
                  "-f", "json", "-b", cluster.bootstrap)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert {r["state"] for r in json.loads(result.stdout)} == {"complete"}
    # a plan that is neither in place nor running: exit 1
    other = {"version": 1, "partitions": [{"topic": "spread", "partition": 0, "replicas": [3]}]}
    if list(topic.partitions[0].replicas) == [3]:
        other["partitions"][0]["replicas"] = [1]
    plan_file.write_text(json.dumps(other))
    result = kctl("partition", "reassign", "--reassignment-json-file", str(plan_file), "--verify", "-b",
                  cluster.bootstrap)  # fmt: skip
    assert result.returncode == 1 and "not applied" in result.stdout


def test_reassign_and_elect_exit_statuses(cluster: Cluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    assert kctl("partition", "reassign", "--reassignment-json-file", str(tmp_path / "none.json"),
                "-b", b).returncode == 3  # fmt: skip
    assert kctl("partition", "reassign", "--generate", "--topic", "nope", "--broker-list", "1",
                "-b", b).returncode == 3  # fmt: skip
    assert kctl("partition", "reassign", "--generate", "--topic", "spread", "-b", b).returncode == 2
    assert kctl("partition", "reassign", "--generate", "--verify", "-b", b).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[]}')
    assert kctl("partition", "reassign", "--reassignment-json-file", str(bad), "-b", b).returncode == 2
    missing = tmp_path / "missing-partition.json"
    missing.write_text('{"version":1,"partitions":[{"topic":"spread","partition":42,"replicas":[1]}]}')
    assert kctl("partition", "reassign", "--reassignment-json-file", str(missing), "-b", b).returncode == 3
    # a broker that is not in the cluster: refused in the plan and before anything is submitted (the
    # plan said "planned" and --execute reached the controller, which refused it: exit 0, then 1)
    with AdminClient(b) as admin:
        [spread] = admin.describe_topics(["spread"])
    before = {p.partition: p.replicas for p in spread.partitions}
    nowhere = tmp_path / "nowhere.json"
    nowhere.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "spread", "partition": 0, "replicas": [1, 99]},
        {"topic": "spread", "partition": 1, "replicas": list(before[1])},
    ]}))  # fmt: skip
    for extra in ([], ["--execute"]):
        refused = kctl("partition", "reassign", "--reassignment-json-file", str(nowhere), *extra, "-b", b)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert "not in the cluster: 99 (for spread-0)" in refused.stderr and refused.stdout == ""
    with AdminClient(b) as admin:
        assert admin.list_partition_reassignments() == {}
        [spread] = admin.describe_topics(["spread"])
    assert {p.partition: p.replicas for p in spread.partitions} == before

    # the reassignment before may have left a non-preferred leader (its preferred replica was not
    # yet in the ISR): a first election may move it; a second one has nothing to do
    for expected in ({"elected", "not needed"}, {"not needed"}):
        result = kctl("partition", "elect-leaders", "--election-type", "preferred", "--topic", "moving",
                      "-f", "json", "-b", b)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert {r["status"] for r in json.loads(result.stdout)} <= expected, result.stdout
    elections = tmp_path / "elections.json"
    elections.write_text('{"partitions":[{"topic":"nope","partition":0}]}')
    assert kctl("partition", "elect-leaders", "--election-type", "preferred", "--path-to-json-file",
                str(elections), "-b", b).returncode == 3  # fmt: skip
    assert kctl("partition", "elect-leaders", "--election-type", "sideways", "--all-topic-partitions",
                "-b", b).returncode == 2  # fmt: skip
    assert kctl("partition", "elect-leaders", "--election-type", "preferred", "-b", b).returncode == 2


def test_topic_describe_filters(cluster: Cluster) -> None:
    b = cluster.bootstrap
    assert kctl("topic", "create", "single", "-p", "3", "-r", "1", "-b", b).returncode == 0
    with AdminClient(b) as admin:
        [single] = admin.describe_topics(["single"])
    led_by_3 = sorted(p.partition for p in single.partitions if p.replicas == (3,))
    assert led_by_3, "placement put no partition of 'single' on broker 3"
    healthy = kctl("topic", "describe", "--all", "--unavailable", "-f", "json", "-b", b)
    assert healthy.returncode == 0 and json.loads(healthy.stdout) == []

    broker_3 = next(p for p in cluster.state.brokers if p.broker_id == 3)
    os.kill(broker_3.pid, 9)  # SIGKILL: its partitions go offline once its session expires
    wait_for(lambda: not process_alive(broker_3.pid), "broker 3 to die")
    wait_for(
        lambda: cluster.zk.exists("/brokers/ids/3") is None,
        "broker 3's registration to expire",
        timeout=SESSION_TIMEOUT_MS / 1000 + 30,
    )

    def unavailable() -> Any:
        result = kctl("topic", "describe", "--all", "--unavailable", "-f", "json", "-b", b)
        documents = json.loads(result.stdout)
        assert result.returncode == (1 if documents else 0), result.stderr  # fails if it finds any
        found = {d["topic"]: sorted(p["partition"] for p in d["partitions"]) for d in documents}
        return found if found.get("single") == led_by_3 else None

    found = wait_for(unavailable, "the offline partitions")
    assert all(p["leader"] == -1 for d in json.loads(
        kctl("topic", "describe", "single", "--unavailable", "-f", "json", "-b", b).stdout
    ) for p in d["partitions"])  # fmt: skip
    assert "single" in found
    under = kctl("topic", "describe", "spread", "--under-replicated", "-f", "json", "-b", b)
    assert under.returncode == (1 if json.loads(under.stdout) else 0), under.stderr
    for d in json.loads(under.stdout):
        assert all(len(p["isr"]) < len(p["replicas"]) for p in d["partitions"])
    table = kctl("topic", "describe", "single", "--unavailable", "-b", b)
    assert table.returncode == 1 and "none" in table.stdout  # leader -1 prints as "none"
    listed = kctl("topic", "describe", "single", "--unavailable", "--exit-zero", "-b", b)
    assert listed.returncode == 0 and listed.stdout == table.stdout

    status = kctl("cluster", "status", "--dir", str(cluster.directory), "-f", "json")
    assert status.returncode == 1 and "broker 3" in status.stderr
    assert [r["alive"] for r in json.loads(status.stdout)] == [True, True, True, False]


def test_down_stops_every_process(cluster: Cluster) -> None:
    cluster.close()
    state = cluster.state
    result = kctl("cluster", "down", "--dir", str(cluster.directory))
    assert result.returncode == 0, result.stderr
    for process in (*state.zookeepers, *state.brokers):
        assert not process_alive(process.pid), process
    assert "stopped broker 1" in result.stderr and "stopped ZooKeeper" in result.stderr
    status = kctl("cluster", "status", "--dir", str(cluster.directory), "-f", "json")
    assert status.returncode == 1
    assert not any(r["alive"] for r in json.loads(status.stdout))
