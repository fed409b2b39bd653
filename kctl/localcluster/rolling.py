"""A rolling restart of a local cluster (``kctl cluster restart --rolling``): one broker at a time,
the controller last, as operators restart a Kafka cluster.

For each broker: a controlled shutdown (SIGTERM, then wait until the process has exited), a start
with the recorded configuration, then wait until it is registered in ZooKeeper by a new session and
the cluster is healthy again: every partition's state in ZooKeeper has a leader and all its replicas
in its ISR (``zookeeper_health``), and so does what clients see — the caller's ``health`` check
(kctl.commands asks the brokers' metadata; this layer does not speak Kafka's protocol). The cluster
must be healthy before the first broker too.
Every wait has the same deadline, ``timeout`` seconds; a step that does not finish in time ends
the restart with a `RollingRestartError` naming the broker and what was waited for (the brokers
after it are left alone, the broker itself as it was then).
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path

from kctl.localcluster.broker import BrokerStartError
from kctl.localcluster.launcher import (
    ClusterStartError,
    controller_id,
    observe,
    recorded_cluster,
    registrations,
    wait_registered,
    wait_unregistered,
    zookeeper_client,
)
from kctl.localcluster.processes import signal_process, wait_exit
from kctl.localcluster.state import ClusterState, save_state

HealthCheck = Callable[[ClusterState], str | None]
"""``health(state)``: None when the cluster is healthy, else what is still wrong (one line)."""
StepListener = Callable[[int | None, str], None]
"""``on_step(broker_id, what)``: the broker a step is about (None: the cluster) and the step."""
POLL_S = 0.5  # how often the health check is asked, within the step's deadline


class RollingRestartError(RuntimeError):
    """A step of the rolling restart did not finish: the message names the broker and the step."""


@dataclasses.dataclass(frozen=True)
class RestartedBroker:
    """One broker restarted: its old and new pid, and how long the whole step took."""

    broker_id: int
    old_pid: int
    new_pid: int
    seconds: float


def zookeeper_health(state: ClusterState) -> str | None:
    """None when every partition's state in ZooKeeper (the controller's record: the truth the
    brokers' metadata follows) has a leader and all its replicas in its ISR; else which do not."""
    from kazoo.exceptions import NoNodeError

    from kctl.zk.znodes import TopicPartitionStateZNode, TopicsZNode, TopicZNode

    try:
        client = zookeeper_client(state, timeout=5.0)
    except Exception as error:  # kazoo's timeout is not a KazooException everywhere
        return f"ZooKeeper does not answer: {error}"
    lagging = []
    try:
        for topic in sorted(client.get_children(TopicsZNode.path)):
            try:
                data, _ = client.get(TopicZNode.path(topic))
            except NoNodeError:
                continue  # deleted meanwhile
            _, assignment = TopicZNode.decode(topic, data)
            for partition, replicas in sorted(assignment.items()):
                try:
                    data, stat = client.get(TopicPartitionStateZNode.path(topic, partition))
                except NoNodeError:
                    lagging.append(f"{topic}-{partition} (no state yet)")
                    continue
                p = TopicPartitionStateZNode.decode(topic, partition, data, stat.version)
                if p.leader < 0 or set(p.isr) != set(replicas):
                    where = f"leader {p.leader}, replicas {_ids(replicas)}, isr {_ids(p.isr)}"
                    lagging.append(f"{topic}-{partition} ({where})")
    except NoNodeError:
        return None  # no topic yet
    finally:
        client.stop()
        client.close()
    if lagging:
        more = f" and {len(lagging) - 3} more" if len(lagging) > 3 else ""
        listed = ", ".join(lagging[:3])
        return f"{len(lagging)} partitions under-replicated or offline in ZooKeeper: {listed}{more}"
    return None


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


def _wait_healthy(state: ClusterState, health: HealthCheck, timeout: float) -> str | None:
    """Poll until ZooKeeper's partition states and ``health`` are satisfied (None) or ``timeout``
    passes (the last complaint)."""
    deadline = time.monotonic() + timeout
    while True:
        problem = zookeeper_health(state) or health(state)
        if problem is None or time.monotonic() >= deadline:
            return problem
        time.sleep(POLL_S)


def rolling_restart(
    directory: Path,
    *,
    health: HealthCheck,
    timeout: float = 60.0,
    on_step: StepListener | None = None,
) -> list[RestartedBroker]:
    """Restart every broker of the cluster in ``directory`` one at a time (see the module
    docstring); returns the brokers restarted, in order. `RollingRestartError` when a broker does
    not run to begin with or a step does not finish within ``timeout``."""
    step = on_step or (lambda broker_id, what: None)
    observed = observe(directory)
    state = observed.state
    if observed.zookeeper is None:
        raise RollingRestartError(f"ZooKeeper of the cluster in {state.directory} is not running")
    stopped = [i for i, pid in observed.brokers.items() if pid is None]
    if stopped:
        ids = ", ".join(map(str, stopped))
        raise RollingRestartError(
            f"broker {ids} not running: start {'it' if len(stopped) == 1 else 'them'} first "
            f"(`kctl cluster start`)"
        )
    step(None, "waiting until no partition is under-replicated")
    problem = _wait_healthy(state, health, timeout)
    if problem is not None:
        raise RollingRestartError(f"not healthy after {timeout:g} s, nothing restarted: {problem}")
    remaining = list(observed.brokers)
    done: list[RestartedBroker] = []
    while remaining:
        controller = controller_id(state)
        broker_id = next((i for i in remaining if i != controller), remaining[0])
        remaining.remove(broker_id)
        done.append(_restart_one(state, broker_id, health, timeout, step, done, remaining))
    return done


def _restart_one(
    state: ClusterState,
    broker_id: int,
    health: HealthCheck,
    timeout: float,
    step: StepListener,
    done: list[RestartedBroker],
    remaining: list[int],
) -> RestartedBroker:
    began = time.monotonic()

    def failed(what: str) -> RollingRestartError:
        restarted = ", ".join(str(r.broker_id) for r in done) or "none"
        left = ", ".join(map(str, remaining)) or "none"
        return RollingRestartError(
            f"rolling restart stopped at broker {broker_id}: {what} (restarted before it: {restarted}; "
            f"not restarted: {left})"
        )

    old_pid = observe(Path(state.directory)).brokers[broker_id]
    if old_pid is None:
        raise failed("it is not running any more")
    try:
        session = registrations(state).get(broker_id)
    except Exception:  # ZooKeeper not answering (kazoo's timeout is not a KazooException everywhere)
        session = None
    step(broker_id, f"controlled shutdown (SIGTERM to pid {old_pid})")
    problem = signal_process(old_pid, signal.SIGTERM)
    if problem is not None:
        raise failed(problem)
    if not wait_exit(old_pid, timeout):
        raise failed(f"pid {old_pid} did not exit within {timeout:g} s of SIGTERM (controlled shutdown)")
    try:
        wait_unregistered(state, broker_id, timeout)  # a clean stop closed its session already
    except ClusterStartError as error:
        raise failed(str(error)) from None
    step(broker_id, "starting")
    process = recorded_cluster(state).broker(broker_id)
    try:
        process.start(timeout)
    except BrokerStartError as error:
        raise failed(f"it did not start again: {error}") from None
    assert process.pid is not None
    state.broker(broker_id).pid = process.pid
    save_state(Path(state.directory), state)
    step(broker_id, f"waiting for its registration in ZooKeeper (pid {process.pid})")
    try:
        wait_registered(state, timeout, [broker_id], not_sessions={broker_id: session} if session else None)
    except ClusterStartError:
        what = f"restarted (pid {process.pid}) but not registered in ZooKeeper within {timeout:g} s"
        raise failed(what) from None
    step(broker_id, "waiting until no partition is under-replicated")
    problem = _wait_healthy(state, health, timeout)
    if problem is not None:
        raise failed(f"restarted (pid {process.pid}), but after {timeout:g} s: {problem}")
    return RestartedBroker(broker_id, old_pid, process.pid, time.monotonic() - began)
