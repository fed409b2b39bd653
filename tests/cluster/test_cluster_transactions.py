"""Transactions on a 3-broker ZooKeeper cluster (issue 27 §1): ``__transaction_state`` and the data
topic with replication factor 3 and min.insync.replicas 2. A confluent-kafka transactional producer
runs a series of transactions over three partitions (every fifth one aborted on purpose) while the
coordinator of its transactional id — the leader of its ``__transaction_state`` partition — is killed
with SIGKILL; the new coordinator loads the state, finishes what was prepared, and the producer goes on.
Then a read_committed consumer sees every committed record exactly once and no aborted one, and a
read_uncommitted consumer sees the aborted ones too."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from raw_kafka import unique

from kctl.broker.transaction.records import TRANSACTION_STATE_TOPIC, partition_for_transactional_id
from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.helpers import wait_for
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3
PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
}
PARTITIONS = 3
TRANSACTIONS = 30
KILL_AFTER = 8
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


def _commit(producer: ck.Producer) -> bool:
    """Commit, retrying what librdkafka says is retriable; False when the transaction had to be
    aborted instead (the records must then never be read_committed)."""
    while True:
        try:
            producer.commit_transaction(TIMEOUT_S)
            return True
        except ck.KafkaException as raised:
            error = raised.args[0]
            if error.retriable():
                continue
            if error.txn_requires_abort():
                producer.abort_transaction(TIMEOUT_S)
                return False
            raise


def _read_all(cluster: LocalCluster, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique("g"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []

    def poll() -> bool:
        got.extend(m.value() for m in consumer.consume(500, timeout=0.5) if m.error() is None)
        return len(got) >= expected

    try:
        wait_for(poll, f"{isolation} to read {expected} records", timeout=60, describe=lambda: f"{len(got)}")
        got.extend(m.value() for m in consumer.consume(500, timeout=2.0) if m.error() is None)
    finally:
        consumer.close()
    return got


def test_coordinator_sigkill_during_committed_transactions(cluster: LocalCluster, view: ClusterView) -> None:
    topic = unique("txn-cluster")
    create_topic(cluster.bootstrap_servers, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(topic, PARTITIONS)
    tid = unique("tid-cluster")
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": tid,
            "linger.ms": 5,
            "acks": "all",
        }
    )
    producer.init_transactions(TIMEOUT_S)
    state_partition = partition_for_transactional_id(tid, STATE_PARTITIONS)
    view.wait_for_full_isr(TRANSACTION_STATE_TOPIC, STATE_PARTITIONS)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    written_aborted: list[bytes] = []
    killed: int | None = None
    for n in range(TRANSACTIONS):
        if n == KILL_AFTER:
            killed = view.wait_for_leader(TRANSACTION_STATE_TOPIC, state_partition).leader
            cluster.kill(killed)
        producer.begin_transaction()
        values = [f"t{n}-p{p}".encode() for p in range(PARTITIONS)]
        for p, value in enumerate(values):
            producer.produce(topic, value, partition=p)
        if n % 5 == 4:  # written, then aborted
            producer.flush(TIMEOUT_S)
            producer.abort_transaction(TIMEOUT_S)
            written_aborted += values
            aborted += values
        elif _commit(producer):
            committed += values
        else:
            aborted += values
    assert killed is not None
    new_coordinator = view.wait_for_leader(TRANSACTION_STATE_TOPIC, state_partition, not_in={killed}).leader
    assert new_coordinator != killed
    cluster.restart(killed)
    assert len(committed) >= (TRANSACTIONS - TRANSACTIONS // 5 - 2) * PARTITIONS  # at most 2 lost to the kill
    read = _read_all(cluster, topic, "read_committed", len(committed))
    duplicates = [v for v, count in Counter(read).items() if count > 1]
    assert duplicates == []
    assert set(read) == set(committed)  # every committed record, no aborted one
    assert not set(read) & set(aborted)
    everything = _read_all(cluster, topic, "read_uncommitted", len(committed) + len(written_aborted))
    assert set(written_aborted) <= set(everything)
