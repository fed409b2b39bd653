"""Issue 25 §3 on a real 3-broker cluster: `kctl topic describe --under-replicated | --unavailable |
--under-min-isr` fail if they find partitions (exit 1; 0 when none; --exit-zero lists only), and
`kctl topic describe` / `kctl broker log-dirs` answer from the live brokers within the request
timeout after a broker that leads partitions is SIGKILLed — naming it, marking its partitions, and
exiting 1 because the answer is incomplete — where they used to block 60-180 s and fail (exit 3).

The tests run in file order on one cluster: broker 3 is killed as a follower first (it leads
nothing of these topics), then broker 2 while it leads. The ZooKeeper session timeout is long (30 s)
so that the killed leader stays registered — and in every broker's metadata — while the commands run,
as it does for 18 s with Kafka's default; the last test waits for it to expire.
"""

from __future__ import annotations

import json
import subprocess
import time
from functools import partial
from typing import Any

import pytest
from cli_support import kctl as run_kctl

from kctl.client import AdminClient, NewTopic
from kctl.testing import LocalCluster
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

PROPERTIES = {
    "zookeeper.session.timeout.ms": "30000",
    "replica.lag.time.max.ms": "2000",
    "offsets.topic.replication.factor": "1",
}
FAST = ["-X", "request.timeout.ms=3000"]
BOUND_S = 15.0  # the answer's bound with request.timeout.ms=3000 (it used to take 60-180 s)

kctl = partial(run_kctl, timeout=60)


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Any:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


def create(bootstrap: str, name: str, assignment: dict[int, list[int]], **configs: str) -> None:
    with AdminClient(bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, configs=configs, assignment=assignment)])
        result.raise_for_error()
        admin.cluster.wait_for_topics([name], timeout=30)


def describe(bootstrap: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    result = kctl("topic", "describe", *args, "-f", "json", "-b", bootstrap)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def partitions(documents: Any) -> dict[tuple[str, int], dict[str, Any]]:
    return {(d["topic"], p["partition"]): p for d in documents for p in d["partitions"]}


def test_health_filters_exit_1_when_they_find_partitions(cluster: LocalCluster, view: ClusterView) -> None:
    b = cluster.bootstrap_servers
    # broker 1 leads both partitions, 3 follows: killing 3 leaves them under-replicated, not unavailable
    create(b, "health", {0: [1, 2, 3], 1: [1, 3, 2]}, **{"min.insync.replicas": "3"})
    create(b, "solo", {0: [3], 1: [1]})  # for the last test: partition 0 lives on broker 3 only
    view.wait_for_full_isr("health", 2)
    for flag in ("--under-replicated", "--unavailable", "--under-min-isr"):
        healthy, documents = describe(b, "--all", flag)
        assert (healthy.returncode, documents) == (0, []), (flag, healthy.stderr)

    cluster.kill(3)
    view.wait_for(lambda: all(view.isr_of("health", p) == {1, 2} for p in (0, 1)), "the ISR to shrink", 30)
    for flag in ("--under-replicated", "--under-min-isr"):
        found, documents = describe(b, "health", flag)
        assert found.returncode == 1, (flag, found.stderr)
        assert sorted(partitions(documents)) == [("health", 0), ("health", 1)], flag
        listed, again = describe(b, "health", flag, "--exit-zero")
        assert (listed.returncode, again) == (0, documents), (flag, listed.stderr)
    table = kctl("topic", "describe", "health", "--under-replicated", "-b", b)
    assert table.returncode == 1 and "health" in table.stdout
    # broker 3 is dead but leads nothing of "health": none of it is unavailable, the answer is complete
    none, documents = describe(b, "health", "--unavailable")
    assert (none.returncode, documents) == (0, []), none.stderr
    whole, documents = describe(b, "health")
    assert whole.returncode == 0, whole.stderr
    assert all(p["available"] and p["high_watermark"] == 0 for p in partitions(documents).values())


def test_describe_and_log_dirs_answer_within_the_request_timeout_after_a_leader_is_killed(
    cluster: LocalCluster, view: ClusterView
) -> None:
    b = ",".join(cluster.broker(i).bootstrap for i in (1, 2))  # the operator's list names the victim
    create(b, "led", {0: [2, 1], 1: [1, 2]})
    view.wait_for_full_isr("led", 2)
    address = cluster.broker(2).bootstrap
    cluster.kill(2)

    started = time.monotonic()
    result, documents = describe(b, "led", *FAST)
    elapsed = time.monotonic() - started
    assert elapsed < BOUND_S, f"topic describe took {elapsed:.1f}s"
    assert result.returncode == 1, result.stderr  # incomplete: a broker did not answer
    assert f"broker 2 did not answer (cannot connect to {address}" in result.stderr, result.stderr
    led = partitions(documents)
    assert (led[("led", 0)]["leader"], led[("led", 0)]["available"]) == (2, False)
    assert (led[("led", 0)]["high_watermark"], led[("led", 0)]["size"]) == (None, None)
    assert (led[("led", 1)]["leader"], led[("led", 1)]["available"]) == (1, True)
    assert led[("led", 1)]["high_watermark"] == 0 and led[("led", 1)]["size"] is not None

    table = kctl("topic", "describe", "led", *FAST, "-b", b)
    assert table.returncode == 1
    rows = {line.split()[1]: line.split() for line in table.stdout.splitlines() if line.startswith("led ")}
    assert rows["0"][2] == "2(unreachable)" and rows["1"][2] == "1"
    unavailable, documents = describe(b, "led", "--unavailable", *FAST)
    assert unavailable.returncode == 1 and sorted(partitions(documents)) == [("led", 0)]

    started = time.monotonic()
    dirs = kctl("broker", "log-dirs", *FAST, "-f", "json", "-b", b)
    elapsed = time.monotonic() - started
    assert elapsed < BOUND_S, f"broker log-dirs took {elapsed:.1f}s"
    assert dirs.returncode == 1, dirs.stderr
    assert f"broker 2 did not answer (cannot connect to {address}" in dirs.stderr, dirs.stderr
    by_broker = {d["broker"]: d for d in json.loads(dirs.stdout)}
    assert by_broker[2]["log_dir"] is None and by_broker[2]["error"] == "NETWORK_EXCEPTION"
    assert by_broker[1]["error"] is None and "led" in {r["topic"] for r in by_broker[1]["replicas"]}


def test_an_offline_partition_is_not_waited_for(cluster: LocalCluster, view: ClusterView) -> None:
    """Once broker 3's session expires, "solo" partition 0 (its only replica on broker 3) has no
    leader and nothing to elect: admin commands say so at once instead of retrying
    LEADER_NOT_AVAILABLE until default.api.timeout.ms (60 s)."""
    b = cluster.broker(1).bootstrap
    view.wait_for_deregistered(3, timeout=60)
    view.wait_for(lambda: view.leader_of("solo", 0) == -1, "solo-0 offline", 30)
    started = time.monotonic()
    offsets = kctl("topic", "offsets", "solo", "-b", b)
    assert time.monotonic() - started < BOUND_S
    assert offsets.returncode == 1 and "solo-0" in offsets.stderr, offsets.stderr
    assert "no leader" in offsets.stderr
    # describe does not ask a partition without a leader: the answer is complete, exit 0
    result, documents = describe(b, "solo")
    assert result.returncode == 0, result.stderr
    solo = partitions(documents)
    assert (solo[("solo", 0)]["leader"], solo[("solo", 0)]["available"]) == (-1, False)
    assert solo[("solo", 1)]["high_watermark"] == 0
    offline, documents = describe(b, "solo", "--unavailable")
    assert offline.returncode == 1 and sorted(partitions(documents)) == [("solo", 0)]
