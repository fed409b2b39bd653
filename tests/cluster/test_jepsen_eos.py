"""The exactly-once checker (kctl.testing.jepsen_eos, issue 27 §4): three transactional
read-process-write copiers (kctl's own client, each a process of its own) copy a numbered input
topic on a 3-broker cluster (RF 3, min ISR 2) while a seeded nemesis SIGKILLs brokers, the
transaction and group coordinators and the copiers; then every input record is in the
read_committed output exactly once, no aborted record is visible, each partition is in input order,
and read_uncommitted does show aborted records. The checker is tested first on histories with each
violation, and a copier that commits its offsets outside the transaction is caught.
bench/bench_jepsen.py --workload eos runs the same with hundreds of kills."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.testing import LocalCluster
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen_eos import EOS_CLUSTER_PROPERTIES, EosCampaign, check_eos
from kctl.testing.pytest_plugin import ClusterFactory

# ------------------------------------------------------------------------------ the checker itself

OUTCOMES = {"0.1.0": "committed", "0.1.1": "aborted", "1.1.0": "committed"}


def _clean() -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    committed = {0: ["000000000|0.1.0", "000000002|0.1.0"], 1: ["000000001|1.1.0", "000000003|1.1.0"]}
    uncommitted = {0: ["000000000|0.1.0", "000000002|0.1.1", "000000002|0.1.0"], 1: committed[1]}
    return committed, uncommitted


def test_checker_accepts_a_clean_history() -> None:
    committed, uncommitted = _clean()
    verdict = check_eos(4, 2, committed, uncommitted, OUTCOMES)
    assert verdict.ok, verdict.report()
    assert (verdict.read_committed, verdict.aborted_uncommitted) == (4, 1)
    assert (verdict.committed_txns, verdict.aborted_txns) == (2, 1)


def test_checker_finds_lost_duplicated_aborted_and_reordered_records() -> None:
    committed, uncommitted = _clean()
    committed[0] = ["000000002|0.1.0", "000000000|0.1.0", "000000002|0.1.1"]  # reordered, dup, aborted
    committed[1] = ["000000001|1.1.0", "000000002|1.1.0"]  # 3 lost, 2 in the wrong partition
    verdict = check_eos(4, 2, committed, uncommitted, OUTCOMES)
    assert (verdict.lost, verdict.duplicates, verdict.aborted_visible) == (1, 1, 1), verdict.report()
    assert verdict.order_violations == 2, verdict.report()
    assert not verdict.ok
    report = verdict.report()
    assert "000000003 read nowhere" in report and "000000002 read 3 times" in report


# ------------------------------------------------------------------------------------ cluster


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, EOS_CLUSTER_PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


@pytest.mark.slow
def test_copiers_killed_with_brokers_and_coordinators_copy_exactly_once(
    cluster: LocalCluster, view: ClusterView, tmp_path: Path
) -> None:
    campaign = EosCampaign(cluster, view, tmp_path, records=2400, faults=4, seed=17)
    verdict = campaign.run()
    print(verdict.report(), f"\ncopier restarts {campaign.copier_restarts}")
    assert len(campaign.faults_done) == 4
    assert sum(verdict.kills.values()) == 4
    assert verdict.ok, verdict.report()
    assert verdict.read_committed == 2400
    assert verdict.aborted_txns > 0 and verdict.aborted_uncommitted > 0, verdict.report()


@pytest.mark.slow
def test_the_check_catches_offsets_committed_outside_the_transaction(
    cluster: LocalCluster, view: ClusterView, tmp_path: Path
) -> None:
    """Sabotage: copiers that commit their input offsets with the consumer (outside the transaction)
    lose the records of every transaction they abort; the checker reports them lost."""
    campaign = EosCampaign(
        cluster, view, tmp_path, records=600, faults=0, sabotage=True,
        input_topic="eos-sabotage-in", output_topic="eos-sabotage-out", group="eos-sabotage",
    )  # fmt: skip
    verdict = campaign.run()
    print(verdict.report())
    assert verdict.aborted_txns > 0
    assert verdict.lost > 0 and not verdict.ok, verdict.report()
    assert verdict.lost == 600 - verdict.read_committed
