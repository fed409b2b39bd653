"""`kctl transactions find-hanging` and `kctl transactions abort` against real brokers (issue 27 §1),
on one node and on a 3-broker cluster (RF 3, min ISR 2).

A hanging transaction is left on a partition as they arise (``txn_support.leave_hanging_transaction``:
a transactional batch that reached the leader without its partition in the transaction; the brokers
run without KIP-890's verification, which would refuse it). It holds the last stable offset, so
read_committed consumers read nothing after it. find-hanging finds it (and not a transaction its
coordinator knows), abort prints the plan and changes nothing, and abort --execute writes the ABORT
marker: the LSO moves past it and read_committed consumers read on, without its records."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from raw_kafka import RawConnection, create_topic, running_broker, unique
from txn_support import UNVERIFIED, last_stable_offset, leave_hanging_transaction

from kctl.testing import BrokerProcess, LocalCluster
from kctl.testing.cluster_clients import create_topic as create_replicated_topic
from kctl.testing.helpers import wait_for
from kctl.testing.pytest_plugin import ClusterFactory

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "1", **UNVERIFIED}, "cli-hanging") as process:
        yield process


def kctl(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args, "-b", bootstrap],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def rows(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def plain(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


def read_committed(bootstrap: str, topic: str, partition: int) -> list[str]:
    """What `kctl consume --isolation read_committed` reads of the partition up to its end (the LSO)."""
    result = kctl(
        bootstrap, "consume", topic, "-p", str(partition), "--offset", "beginning", "--until", "end",
        "-f", "raw", "-q", "--isolation", "read_committed",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_hanging_transaction_is_found_planned_and_aborted(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = unique("hanging")
    assert create_topic(bootstrap, topic, 2) == 0
    producer_id, epoch = leave_hanging_transaction(bootstrap, topic, 0, [b"h0", b"h1", b"h2"])
    plain(bootstrap, topic, 0, ["after-0", "after-1"])  # offsets 3 and 4, behind the hanging one
    # a transaction its coordinator knows, open on partition 1: never reported
    healthy = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": unique("healthy"),
            "transaction.timeout.ms": 900000,
        }
    )
    healthy.init_transactions(TIMEOUT)
    healthy.begin_transaction()
    healthy.produce(topic, b"open", partition=1)
    assert healthy.flush(TIMEOUT) == 0

    with RawConnection(bootstrap) as conn:
        assert last_stable_offset(conn, topic) == 0
    assert read_committed(bootstrap, topic, 0) == []

    young = kctl(bootstrap, "transactions", "find-hanging", "--topic", topic, "-f", "jsonl")
    assert (young.returncode, young.stdout) == (0, ""), young.stderr  # younger than 15 minutes

    found = kctl(
        bootstrap, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
        "-f", "jsonl",
    )  # fmt: skip
    assert found.returncode == 1, found.stderr
    [row] = rows(found)
    assert (row["topic"], row["partition"], row["producer_id"], row["producer_epoch"]) == (
        topic,
        0,
        producer_id,
        epoch,
    )
    assert (row["start_offset"], row["coordinator_epoch"]) == (0, -1)
    by_broker = kctl(
        bootstrap, "transactions", "find-hanging", "--broker-id", str(broker.broker_id),
        "--max-transaction-timeout", "0", "-f", "jsonl",
    )  # fmt: skip
    assert by_broker.returncode == 1 and row in rows(by_broker), by_broker.stderr

    abort = ["transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"]
    plan = kctl(bootstrap, *abort, "-f", "jsonl")
    assert plan.returncode == 0, plan.stderr
    assert rows(plan) == [
        {
            "topic": topic,
            "partition": 0,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "coordinator_epoch": 0,
            "start_offset": 0,
            "status": "planned",
        }
    ]
    assert "--execute" in plan.stderr
    with RawConnection(bootstrap) as conn:
        assert last_stable_offset(conn, topic) == 0  # the plan changed nothing

        done = kctl(bootstrap, *abort, "--execute", "-f", "jsonl")
        assert done.returncode == 0, done.stderr
        assert rows(done)[0]["status"] == "aborted"
        assert last_stable_offset(conn, topic) == 6  # past the ABORT marker at offset 5
    assert read_committed(bootstrap, topic, 0) == ["after-0", "after-1"]

    again = kctl(
        bootstrap, "transactions", "find-hanging", "--topic", topic, "-p", "0",
        "--max-transaction-timeout", "0", "-f", "jsonl",
    )  # fmt: skip
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    gone = kctl(bootstrap, *abort)
    assert gone.returncode == 3 and "no open transaction starts at offset 0" in gone.stderr
    healthy.abort_transaction(TIMEOUT)


def test_abort_by_producer_id_and_epochs(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = unique("hanging-ids")
    assert create_topic(bootstrap, topic, 1) == 0
    producer_id, epoch = leave_hanging_transaction(bootstrap, topic, 0, [b"h"])
    plain(bootstrap, topic, 0, ["after"])
    ids = ["--producer-id", str(producer_id), "--producer-epoch", str(epoch), "--coordinator-epoch", "-1"]
    done = kctl(bootstrap, "transactions", "abort", "--topic", topic, "-p", "0", *ids, "--execute")
    assert done.returncode == 0, done.stderr
    with RawConnection(bootstrap) as conn:
        assert last_stable_offset(conn, topic) == 3
    assert read_committed(bootstrap, topic, 0) == ["after"]
    older = [
        "--producer-id",
        str(producer_id),
        "--producer-epoch",
        str(epoch - 1),
        "--coordinator-epoch",
        "0",
    ]
    refused = kctl(bootstrap, "transactions", "abort", "--topic", topic, "-p", "0", *older, "--execute")
    assert refused.returncode == 1 and "INVALID_PRODUCER_EPOCH" in refused.stderr, refused.stderr


def test_bad_input_is_refused_with_its_reason(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = unique("hanging-bad")
    assert create_topic(bootstrap, topic, 1) == 0
    usage = [
        ["transactions", "find-hanging"],
        ["transactions", "find-hanging", "--partition", "0", "--broker-id", "0"],
        ["transactions", "abort", "--topic", topic, "-p", "0"],
        ["transactions", "abort", "--topic", topic, "-p", "0", "--start-offset", "0", "--producer-id", "1"],
        ["transactions", "abort", "--topic", topic, "-p", "0", "--producer-id", "1"],
        ["transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "-1"],
    ]
    for args in usage:
        result = kctl(bootstrap, *args)
        assert result.returncode == 2, (args, result.stderr)
    not_found = [
        ["transactions", "find-hanging", "--topic", "no-such-topic"],
        ["transactions", "find-hanging", "--topic", topic, "-p", "7"],
        ["transactions", "abort", "--topic", topic, "-p", "7", "--start-offset", "0"],
        ["transactions", "abort", "--topic", "no-such-topic", "-p", "0", "--start-offset", "0"],
        ["transactions", "abort", "--topic", topic, "-p", "0", "--start-offset", "0"],  # nothing open
    ]
    for args in not_found:
        result = kctl(bootstrap, *args)
        assert result.returncode == 3, (args, result.stderr)
        assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    properties = {
        "zookeeper.session.timeout.ms": "6000",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        **UNVERIFIED,
    }
    return module_cluster_factory(3, properties)


@pytest.mark.slow
def test_on_a_cluster_the_leader_writes_the_abort_marker(cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topic = unique("hanging-cluster")
    create_replicated_topic(bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    producer_id, _ = leave_hanging_transaction(bootstrap, topic, 1, [b"h0", b"h1"])
    plain(bootstrap, topic, 1, ["after-0", "after-1", "after-2"])
    assert read_committed(bootstrap, topic, 1) == []

    def found_by(broker_id: int) -> list[dict[str, object]]:
        result = kctl(
            bootstrap, "transactions", "find-hanging", "--broker-id", str(broker_id),
            "--max-transaction-timeout", "0", "-f", "jsonl",
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        return [r for r in rows(result) if r["topic"] == topic]

    for broker_id in cluster.brokers:  # every broker holds a replica (RF 3)
        [row] = found_by(broker_id)
        assert (row["partition"], row["producer_id"], row["start_offset"]) == (1, producer_id, 0)

    abort = ["transactions", "abort", "--topic", topic, "-p", "1", "--start-offset", "0"]
    plan = kctl(bootstrap, *abort)
    assert plan.returncode == 0, plan.stderr
    assert read_committed(bootstrap, topic, 1) == []
    done = kctl(bootstrap, *abort, "--execute")
    assert done.returncode == 0, done.stderr
    wait_for(
        lambda: read_committed(bootstrap, topic, 1) == ["after-0", "after-1", "after-2"],
        "read_committed past the aborted transaction",
        TIMEOUT,
    )
    result = kctl(
        bootstrap, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
    )
    assert result.returncode == 0, result.stderr
