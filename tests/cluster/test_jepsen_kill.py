"""kill -9 under acks=all load, checked the Jepsen way (kctl.testing.jepsen): a single broker SIGKILLed
and restarted several times, and a 3-broker cluster (RF=3, min.insync.replicas=2) whose leaders are
SIGKILLed and one SIGSTOPped past its session, each under two idempotent writers at once
(confluent-kafka and kctl's own producer). Then everything is read back: nothing acknowledged is
lost, nothing is read twice, no writer's records are reordered within a partition, and no
acknowledged offset holds another value. The checker itself is tested first, on histories with
each violation. bench/bench_jepsen.py runs the same with hundreds of kills."""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from kctl.testing import BrokerProcess, LocalCluster
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import (
    Ack,
    Campaign,
    ConfluentLoad,
    KctlLoad,
    Load,
    check,
    kill_and_restart,
    kill_leader,
    pause_leader,
    read_topic,
    wait_for_progress,
)
from kctl.testing.jepsen_offsets import CommittedOffsetsWatcher, check_answers
from kctl.testing.pytest_plugin import BrokerFactory, ClusterFactory

PARTITIONS = 3
KILLS = 3
CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


# ------------------------------------------------------------------------------ the checker itself


def _history() -> tuple[list[Ack], dict[int, list[tuple[int, str]]]]:
    acks = [Ack(0, 0, "a:000000000"), Ack(0, 1, "a:000000001"), Ack(1, 0, "b:000000000")]
    records = {0: [(0, "a:000000000"), (1, "a:000000001"), (2, "a:000000002")], 1: [(0, "b:000000000")]}
    return acks, records


def test_checker_accepts_a_clean_history_with_unacknowledged_extras() -> None:
    acks, records = _history()
    verdict = check(acks, records)
    assert verdict.ok, verdict.report()
    assert (verdict.acknowledged, verdict.read) == (3, 4)
    assert verdict.summary() == (
        "records acknowledged 3, read 4, lost 0, duplicates 0, reordered 0, offsets reused 0"
    )


def test_checker_finds_a_lost_record() -> None:
    acks, records = _history()
    records[1] = []
    verdict = check(acks, records)
    assert (verdict.lost, verdict.duplicates, verdict.reordered, verdict.offsets_reused) == (1, 0, 0, 0)
    assert "b:000000000" in verdict.report()


def test_checker_finds_a_duplicate() -> None:
    acks, records = _history()
    records[0] = [(0, "a:000000000"), (1, "a:000000001"), (2, "a:000000001"), (3, "a:000000002")]
    verdict = check(acks, records)
    assert (verdict.lost, verdict.duplicates, verdict.reordered) == (0, 1, 0), verdict.report()
    assert check(acks, records, idempotent=False).duplicates == 0


def test_checker_finds_reordered_records() -> None:
    acks, records = _history()
    records[0] = [(0, "a:000000000"), (1, "a:000000002"), (2, "a:000000001")]
    verdict = check(acks, records)
    assert verdict.reordered == 1, verdict.report()
    assert verdict.offsets_reused == 1  # a:1 was acknowledged at offset 1, which holds a:2


def test_checker_finds_an_offset_reused_for_another_value() -> None:
    acks, records = _history()
    acks.append(Ack(1, 0, "c:000000000"))  # two acknowledgements for 1/0; c is read at 1/1
    records[1].append((1, "c:000000000"))
    verdict = check(acks, records)
    assert verdict.offsets_reused == 2, verdict.report()
    assert verdict.lost == 0


def test_checker_takes_implicit_acknowledgements_without_an_offset() -> None:
    """librdkafka's implicit acknowledgements (offset None: seen twice in bench_jepsen's 300-fault
    campaign, once before) count as acknowledged records that must be read in their partition, and
    two of them are no offset acknowledged twice."""
    acks, records = _history()
    acks += [Ack(0, None, "a:000000002"), Ack(1, None, "b:000000001")]
    records[1].append((1, "b:000000001"))
    verdict = check(acks, records)
    assert verdict.ok, verdict.report()
    assert (verdict.acknowledged, verdict.acknowledged_without_offset) == (5, 2)
    assert "(2 without offset)" in verdict.summary()
    records[1].pop()  # never written: lost
    verdict = check(acks, records)
    assert (verdict.lost, verdict.offsets_reused) == (1, 0), verdict.report()
    records[0].append((3, "b:000000001"))  # read in another partition than acknowledged
    assert check(acks, records).offsets_reused == 1


def _acked(load: Load, writer: str, acks: dict[int, list[float]]) -> Load:
    """``load`` with only a history: acknowledgement times by partition."""
    load.writer = writer
    pairs = sorted((at, partition) for partition, times in acks.items() for at in times)
    load.acked = [Ack(partition, i, f"{writer}:{i}") for i, (_, partition) in enumerate(pairs)]
    load.acked_at = [at for at, _ in pairs]
    return load


def test_unavailability_is_the_longest_silence_after_each_fault() -> None:
    load = _acked(ConfluentLoad.__new__(ConfluentLoad), "ck", {0: [10.0, 10.5, 14.0, 14.1, 20.0, 20.2]})
    campaign = Campaign([load])
    campaign.faults_done = ["kill -9 broker 1", "kill -9 broker 2"]
    campaign.fault_windows = [(10.2, 11.0), (15.0, 16.0)]
    assert campaign.unavailability() == [
        ("kill -9 broker 1", pytest.approx(3.5)),  # 10.5 -> 14.0
        ("kill -9 broker 2", pytest.approx(5.0)),  # 15.0 (the fault) -> 20.0
    ]


def test_unavailability_is_the_partition_the_fault_hit_not_hidden_by_the_others() -> None:
    """Partition 1's leader is cut off for 6 s while partitions 0 and 2 keep acknowledging: the
    fault's unavailability is partition 1's silence."""
    steady = [10.0 + i * 0.1 for i in range(100)]
    load = _acked(KctlLoad.__new__(KctlLoad), "kctl", {0: steady, 1: [10.0, 10.4, 16.4, 16.5], 2: steady})
    campaign = Campaign([load])
    campaign.faults_done = ["isolated broker 2 (leader of jepsen/1)"]
    campaign.fault_windows = [(10.2, 16.0)]
    assert campaign.unavailability() == [("isolated broker 2 (leader of jepsen/1)", pytest.approx(6.0))]
    # a partition with no acknowledgement at all until the next fault was silent all that time
    campaign.faults_done = ["kill -9 broker 2", "kill -9 broker 3"]
    campaign.fault_windows = [(10.45, 11.0), (15.0, 16.0)]
    assert campaign.unavailability() == [
        ("kill -9 broker 2", pytest.approx(4.55)),  # partition 1: 10.45 -> 15.0, nothing in between
        ("kill -9 broker 3", pytest.approx(1.4)),  # partition 1: 15.0 -> 16.4; the last window is open
    ]


def test_unavailability_of_one_writer_counts_only_its_acknowledgements() -> None:
    slow = _acked(ConfluentLoad.__new__(ConfluentLoad), "ck", {0: [10.0, 30.0]})
    fast = _acked(KctlLoad.__new__(KctlLoad), "kctl", {0: [10.0, 12.0, 14.0, 30.0]})
    campaign = Campaign([slow, fast])
    campaign.faults_done = ["isolated broker 1"]
    campaign.fault_windows = [(10.5, 11.0)]
    assert campaign.unavailability() == [("isolated broker 1", pytest.approx(16.0))]  # 14.0 -> 30.0
    assert campaign.unavailability("ck") == [("isolated broker 1", pytest.approx(19.5))]  # 10.5 -> 30.0
    assert campaign.unavailability("kctl") == [("isolated broker 1", pytest.approx(16.0))]


def test_offsets_check_accepts_a_client_that_commits_older_offsets_after_newer_ones() -> None:
    # librdkafka sends deferred and retried commits after newer ones: the log holds them in that order
    history = {0: [5, 9, 7, 7, 12], 1: [3]}
    answers = [{0: 5}, {0: 9, 1: 3}, {0: 7, 1: 3}, {0: 7, 1: 3}, {0: 12, 1: 3}]
    assert check_answers("t", answers, history) == []


def test_offsets_check_finds_an_answer_older_than_one_seen_before() -> None:
    history = {0: [7, 8, 7, 9]}
    assert check_answers("t", [{0: 7}, {0: 8}, {0: 7}, {0: 9}], history) == []  # the log's own order
    problems = check_answers("t", [{0: 8}, {0: 7}, {0: 8}], history)
    assert problems == [
        "t/0: committed offset went back: answer 2 is 8, a commit older in the log than the 7 answered before"
    ]


def test_offsets_check_finds_an_answer_no_commit_in_the_log_holds() -> None:
    problems = check_answers("t", [{0: 5}, {0: 10}], {0: [5, 9]})
    assert problems == ["t/0: answer 1 is 10, which no commit in the log holds"]


def test_offsets_check_finds_a_committed_offset_missing_from_a_later_answer() -> None:
    problems = check_answers("t", [{0: 5, 1: 3}, {1: 3}], {0: [5, 9], 1: [3]})
    assert problems == ["t/0: answer 1 has no committed offset, after 5 was answered"]
    assert check_answers("t", [{0: 5, 1: 3}, {1: 3}], {0: [5, -1], 1: [3]}) == []  # deleted (a tombstone)


# --------------------------------------------------------------------------------- one broker


@pytest.mark.slow
def test_single_broker_killed_under_load_loses_nothing(module_broker_factory: BrokerFactory) -> None:
    broker: BrokerProcess = module_broker_factory({"log.segment.bytes": str(64 * 1024)})
    topic = "jepsen-single"
    create_topic(broker.bootstrap, topic, PARTITIONS, 1)
    campaign = Campaign(
        [ConfluentLoad(broker.bootstrap, topic, "ck"), KctlLoad(broker.bootstrap, topic, "kctl")],
        progress=150,
    ).start()
    try:
        for _ in range(KILLS):
            campaign.inject(partial(kill_and_restart, broker))
    except BaseException:
        campaign.stop()
        raise
    verdict = campaign.finish(broker.bootstrap, topic, PARTITIONS)
    print(f"single broker: kills survived {len(campaign.faults_done)}, {verdict.summary()}")
    assert len(campaign.faults_done) == KILLS
    # every kill was unclean: each start after one recovered the logs
    assert broker.log_file.read_text(errors="replace").count("was not shut down cleanly") == KILLS
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 150 * (KILLS + 1)
    assert campaign.failures() == []


def _kill_and_cut_logs(broker: BrokerProcess, topic: str) -> str:
    """A broker that loses acknowledged data: SIGKILL, cut each partition's last segment in half."""
    broker.kill()
    for partition in range(PARTITIONS):
        segment = max((broker.data_dir / f"{topic}_{partition}").glob("*.log"))
        with open(segment, "r+b") as handle:
            handle.truncate(segment.stat().st_size // 2)
    broker.start()
    return "kill -9, half of each partition's last segment cut"


@pytest.mark.slow
def test_the_check_finds_acknowledged_records_a_broker_lost(module_broker_factory: BrokerFactory) -> None:
    """The whole pipeline can fail: records cut from a killed broker's logs are reported lost."""
    broker: BrokerProcess = module_broker_factory()
    topic = "jepsen-lossy"
    create_topic(broker.bootstrap, topic, PARTITIONS, 1)
    load = ConfluentLoad(broker.bootstrap, topic, "ck").start()
    try:
        wait_for_progress([load], 300)
    finally:
        load.stop()
    assert load.failed == []
    _kill_and_cut_logs(broker, topic)  # after the writer stopped: its reaction to the loss is not the point
    verdict = check(load.acked, read_topic(broker.bootstrap, topic, PARTITIONS))
    assert verdict.lost > 0 and not verdict.ok, verdict.report()
    assert verdict.lost == verdict.acknowledged - verdict.read


# ------------------------------------------------------------------------------------ cluster


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, CLUSTER_PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


@pytest.mark.slow
def test_cluster_leaders_killed_and_paused_under_load_lose_nothing(
    cluster: LocalCluster, view: ClusterView, tmp_path: Path
) -> None:
    topic = "jepsen-cluster"
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(topic, PARTITIONS)
    campaign = Campaign(
        [ConfluentLoad(bootstrap, topic, "ck"), KctlLoad(bootstrap, topic, "kctl")], progress=100
    ).start()
    # a group consuming and committing throughout (its coordinator is killed too), in a process of its own
    offsets = CommittedOffsetsWatcher(bootstrap, topic, "jepsen-readers", tmp_path / "offsets.jsonl").start()
    try:
        offsets.wait_for_commits(timeout=90)  # the group has joined and committed before any fault
    except BaseException:
        campaign.stop()
        offsets.stop()
        raise
    rng = random.Random(17)
    try:
        for _ in range(2):
            partition = rng.randrange(PARTITIONS)
            campaign.inject(partial(kill_leader, cluster, view, topic, partition))
        campaign.inject(partial(pause_leader, cluster, view, topic, 0, campaign.loads))
    except BaseException:
        campaign.stop()
        offsets.stop()
        raise
    verdict = campaign.finish(cluster.bootstrap_servers, topic, PARTITIONS)
    offsets.stop()
    print(f"cluster: faults survived {len(campaign.faults_done)}, {verdict.summary()}")
    print(
        f"committed offsets: {offsets.observations} answers checked against {offsets.commits} commits "
        f"in the log, highest {offsets.highest}"
    )
    assert offsets.regressions == [], offsets.regressions
    assert offsets.observations > 10 and sum(offsets.highest.values()) > 0, offsets.errors[-5:]
    assert offsets.commits > 10
    assert [fault.split()[0] for fault in campaign.faults_done] == ["kill", "kill", "kill"]
    assert "-STOP" in campaign.faults_done[-1]
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged >= 2 * 100 * 4
    assert campaign.failures() == []
