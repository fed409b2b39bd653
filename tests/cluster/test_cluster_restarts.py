"""Restarts of a real 3-broker cluster (ZooKeeper and broker processes, RF 3, min.insync.replicas 2).

A rolling restart under acks=all load, done by hand: SIGTERM one broker (the controller first, then
the broker that has just become controller, then the last one), wait for its process to exit, start
it again, wait until no partition is under-replicated, next. What must hold (issue 24 §0): every
broker exits within 30 s of SIGTERM (controlled shutdown, then the process ends: no replica fetcher,
task or thread keeps it alive); a broker in controlled shutdown is never taken back into an ISR, so
each restart costs each partition only a few leader-epoch bumps (the storm this guards against bumped
them several times a second); and the idempotent acks=all writer loses nothing: no failed delivery,
every acknowledged record read back at its offset, once.

A broker killed with SIGKILL and started again at once finds its previous run's registration still
in ZooKeeper (until that session expires): it waits for it, saying so once, and registers, instead of
exiting with "already registered"."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import create_topic
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import ConfluentLoad, check, read_topic, wait_for_progress
from kctl.testing.pytest_plugin import ClusterFactory

TOPIC = "rolling"
PARTITIONS = 6
EXIT_WITHIN_S = 30.0
EPOCH_BUMPS_PER_RESTART = 4
PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "500",
}


def _epochs(view: ClusterView) -> dict[int, int]:
    epochs = {}
    for partition in range(PARTITIONS):
        state = view.partition_state(TOPIC, partition)
        assert state is not None, f"{TOPIC}-{partition} has no state"
        epochs[partition] = state.leader_epoch
    return epochs


def _sigterm_and_wait(cluster: LocalCluster, broker_id: int) -> float:
    """SIGTERM the broker and poll (with a deadline) for its exit; seconds it took. A broker still
    alive at the deadline is SIGKILLed and the test fails, quoting its log."""
    broker = cluster.broker(broker_id)
    process = broker.process
    assert process is not None and broker.running
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    deadline = started + EXIT_WITHIN_S
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    took = time.monotonic() - started
    if process.poll() is None:
        broker.kill()
        raise AssertionError(
            f"broker {broker_id} still running {EXIT_WITHIN_S:.0f}s after SIGTERM\n{broker.log_tail(60)}"
        )
    assert process.returncode == 0, f"broker {broker_id} exited {process.returncode}\n{broker.log_tail()}"
    return took


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: ClusterFactory) -> LocalCluster:
    return module_cluster_factory(3, PROPERTIES)


@pytest.fixture(scope="module")
def view(cluster: LocalCluster) -> Iterator[ClusterView]:
    with ClusterView(cluster.zookeeper_connect) as zk_view:
        yield zk_view


def test_rolling_restart_under_acks_all_load(cluster: LocalCluster, view: ClusterView) -> None:
    create_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(TOPIC, PARTITIONS)
    load = ConfluentLoad(cluster.bootstrap_servers, TOPIC, "roll", rate_per_s=150).start()
    restarted: list[tuple[int, bool, float, dict[int, int]]] = []
    try:
        wait_for_progress([load], 200)
        for _ in range(3):
            done = {broker_id for broker_id, *_ in restarted}
            controller = view.wait_for_controller()
            # the controller, then the one that took over from it, then the last one
            target = controller if controller not in done else min(set(cluster.brokers) - done)
            before = _epochs(view)
            took = _sigterm_and_wait(cluster, target)
            cluster.broker(target).start()
            view.wait_for_full_isr(TOPIC, PARTITIONS, timeout=60)
            after = _epochs(view)
            bumps = {p: after[p] - before[p] for p in before}
            restarted.append((target, target == controller, took, bumps))
            too_many = {p: n for p, n in bumps.items() if n > EPOCH_BUMPS_PER_RESTART}
            assert not too_many, f"restarting broker {target}: leader epoch bumps {too_many} (partition: n)"
            wait_for_progress([load], 100, timeout=60)
    finally:
        load.stop()
    assert sorted(b for b, *_ in restarted) == [1, 2, 3]
    assert restarted[0][1] and restarted[1][1], f"the first two restarts were of controllers: {restarted}"
    assert load.failed == [], load.failed[:10]
    verdict = check(load.acked, read_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS))
    assert verdict.ok, verdict.report()
    assert verdict.acknowledged > 500


def test_a_broker_started_right_after_kill_9_waits_for_its_old_registration(
    cluster: LocalCluster, view: ClusterView
) -> None:
    topic = "after-kill"
    create_topic(cluster.bootstrap_servers, topic, 3, 3, {"min.insync.replicas": "2"})
    view.wait_for_full_isr(topic, 3)
    victim = next(b for b in sorted(cluster.brokers) if b != view.controller_id())
    broker = cluster.broker(victim)
    path = f"/brokers/ids/{victim}"
    old = view.client.exists(path)
    assert old is not None
    broker.kill()
    still = view.client.exists(path)  # ZooKeeper keeps it until the dead session expires
    assert still is not None and still.ephemeralOwner == old.ephemeralOwner
    log_size = broker.log_file.stat().st_size
    broker.start()  # at once
    new = view.client.exists(path)
    assert new is not None and new.ephemeralOwner not in (0, old.ephemeralOwner), "not registered anew"
    lines = broker.log_file.read_text(errors="replace")[log_size:].splitlines()
    waiting = [line for line in lines if "waiting up to" in line]
    assert len(waiting) == 1, lines
    assert f"0x{old.ephemeralOwner:x}" in waiting[0] and " INFO " in waiting[0], waiting
    assert any("stale registration of broker" in line and "went after" in line for line in lines), lines
    view.wait_for_full_isr(topic, 3, timeout=60)
