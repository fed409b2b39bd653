"""A local cluster's life for real (a ZooKeeper server and three `kctl broker start` processes, as
`kctl cluster up` starts them): `up` refusing a running cluster before announcing anything, the
current cluster every command defaults to, `stop`/`start` of one broker, `start` of a killed broker
(once its old registration has expired), a rolling restart under an acks=all load, a broker
restarted by hand (`kctl broker start --daemon` with the recorded configuration) shown with its real
pid and stopped by `down`, and `start` of a stopped cluster.

One cluster serves the module; the tests run in file order, each leaving it running with every
broker up (the last ones stop it). Every kctl command runs with a kctl state directory of the
module's (`KCTL_STATE_DIR`), where `cluster up` records the current cluster."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import kctl as run_kctl

from kctl.client import AdminClient
from kctl.localcluster.launcher import load_state, process_alive
from kctl.testing import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.zk, pytest.mark.slow]

STEP_TIMEOUT = "60"  # generous: a controlled shutdown on a loaded 2-core machine
SESSION_TIMEOUT_MS = 6000  # how long a killed broker stays registered


class Cluster:
    def __init__(self, directory: Path, state_dir: Path, bootstrap: str) -> None:
        self.directory = directory
        self.state_dir = state_dir
        self.bootstrap = bootstrap

    def kctl(self, *args: str, env: dict[str, str] | None = None) -> Any:
        """`kctl ARGS` with the module's state directory (and no KCTL_BOOTSTRAP_SERVER)."""
        return run_kctl(*args, env={"KCTL_STATE_DIR": str(self.state_dir), **(env or {})}, timeout=300)

    def cluster(self, *args: str) -> Any:
        return self.kctl("cluster", *args, "--dir", str(self.directory))

    def status(self) -> dict[Any, dict[str, Any]]:
        result = self.cluster("status", "-f", "json")
        return {row["broker_id"] or "zookeeper": row for row in json.loads(result.stdout)}

    def pids(self) -> dict[int, int]:
        return {b.broker_id: b.pid for b in load_state(self.directory).brokers if b.broker_id is not None}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("lifecycle")
    handle = Cluster(base / "kctl-cluster", base / "state", "")
    result = handle.kctl(
        "cluster", "up", "--brokers", "3", "--dir", str(handle.directory),
        "-X", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    handle.bootstrap = result.stdout.strip()
    try:
        yield handle
    finally:
        handle.cluster("down")


def test_up_on_a_running_cluster_refuses_before_announcing_a_start(cluster: Cluster) -> None:
    again = cluster.cluster("up", "--brokers", "3")
    assert again.returncode == 1
    assert "is running" in again.stderr and "ZooKeeper, broker 1, broker 2, broker 3" in again.stderr
    assert "starting" not in again.stderr, again.stderr
    assert again.stdout == ""


def test_commands_without_a_bootstrap_server_talk_to_the_current_cluster(cluster: Cluster) -> None:
    created = cluster.kctl("topic", "create", "current", "-p", "1", "-r", "3")  # no -b
    assert created.returncode == 0, created.stderr
    listed = cluster.kctl("topic", "list", "-f", "json")
    assert listed.returncode == 0, listed.stderr
    assert "current" in [t["topic"] for t in json.loads(listed.stdout)]

    shown = cluster.kctl("config", "show", "-f", "json")
    [entry] = json.loads(shown.stdout)
    assert entry == {"key": "bootstrap.servers", "value": cluster.bootstrap, "source": "local-cluster"}
    assert f"the current local cluster {cluster.directory} (set by `kctl cluster up`)" in shown.stderr

    # an explicit -b, KCTL_BOOTSTRAP_SERVER, -X bootstrap.servers and --config all win over it
    nowhere = "127.0.0.1:1"
    explicit = cluster.kctl("topic", "list", "-b", nowhere)
    assert explicit.returncode == 3 and nowhere in explicit.stderr
    for args, env, source in (
        (["-b", nowhere], {}, "option"),
        ([], {"KCTL_BOOTSTRAP_SERVER": nowhere}, "env"),
        (["-X", f"bootstrap.servers={nowhere}"], {}, "-X"),
    ):
        result = cluster.kctl("config", "show", "-f", "json", *args, env=env)
        assert json.loads(result.stdout) == [{"key": "bootstrap.servers", "value": nowhere, "source": source}]
        assert "current local cluster" not in result.stderr
    properties = cluster.directory.parent / "client.properties"
    properties.write_text(f"bootstrap.servers={nowhere}\n")
    from_file = cluster.kctl("config", "show", "-f", "json", "-c", str(properties))
    assert json.loads(from_file.stdout) == [{"key": "bootstrap.servers", "value": nowhere, "source": "file"}]
    # another user state (no current cluster): the built-in default
    elsewhere = {"KCTL_STATE_DIR": str(cluster.directory.parent / "x")}
    other = run_kctl("config", "show", "-f", "json", env=elsewhere)
    default = {"key": "bootstrap.servers", "value": "127.0.0.1:9092", "source": "default"}
    assert json.loads(other.stdout) == [default]


def test_stop_and_start_one_broker(cluster: Cluster) -> None:
    before = cluster.pids()
    stopped = cluster.cluster("stop", "--broker", "2", "--timeout", STEP_TIMEOUT)
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped broker 2 (pid {before[2]})" in stopped.stderr
    assert not process_alive(before[2])
    status = cluster.cluster("status", "-f", "json")
    assert status.returncode == 1 and "not running: broker 2" in status.stderr
    assert [(r["broker_id"], r["alive"]) for r in json.loads(status.stdout)] == [
        (None, True), (1, True), (2, False), (3, True),
    ]  # fmt: skip

    started = cluster.cluster("start", "--broker", "2", "--timeout", STEP_TIMEOUT)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == cluster.bootstrap
    after = cluster.pids()
    assert "started broker 2 (pid" in started.stderr and after[2] != before[2]
    assert {i: after[i] for i in (1, 3)} == {i: before[i] for i in (1, 3)}  # the others were left alone
    rows = cluster.status()
    assert all(row["alive"] for row in rows.values()), rows
    assert rows[2]["pid"] == after[2]
    nothing = cluster.cluster("start")
    assert nothing.returncode == 0
    assert "already running: ZooKeeper, broker 1, broker 2, broker 3" in nothing.stderr


def test_start_after_a_kill_waits_for_the_killed_brokers_registration_to_expire(cluster: Cluster) -> None:
    before = cluster.pids()
    os.kill(before[2], signal.SIGKILL)  # its ZooKeeper session outlives it, SESSION_TIMEOUT_MS
    # gone, reaped too (a zombie's pid would still be in its pid file as a running broker's)
    wait_for(lambda: not Path(f"/proc/{before[2]}").exists(), "broker 2 to die", 60)
    started = cluster.cluster("start", "--broker", "2", "--timeout", STEP_TIMEOUT)
    assert started.returncode == 0, started.stderr
    assert "broker 2 is still registered by the session" in started.stderr
    assert "waiting for that session to expire" in started.stderr
    assert cluster.pids()[2] != before[2]
    assert all(row["alive"] for row in cluster.status().values())


def test_rolling_restart_under_an_acks_all_load(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    created = cluster.kctl("topic", "create", "rolling", "-p", "3", "-r", "3")
    assert created.returncode == 0, created.stderr
    before = cluster.pids()
    with AdminClient(cluster.bootstrap) as admin:
        controller = admin.describe_cluster().controller_id
    errors: list[str] = []
    delivered: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 180000,
        }
    )

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            delivered.append(message.offset())

    stop = threading.Event()
    sent = 0

    def produce() -> None:
        nonlocal sent
        while not stop.is_set():
            producer.produce("rolling", value=b"%d" % sent, key=b"%d" % (sent % 7), on_delivery=on_delivery)
            sent += 1
            producer.poll(0.02)  # ~50 records a second

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_for(lambda: len(delivered) >= 20, "the load to be acknowledged", 60)
        result = cluster.cluster("restart", "--rolling", "--timeout", STEP_TIMEOUT, "-f", "json")
        acknowledged_during = len(delivered)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert producer.flush(120) == 0, "records still in flight"
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert sorted(r["broker_id"] for r in rows) == [1, 2, 3]
    assert rows[-1]["broker_id"] == controller  # the controller goes last
    assert {r["broker_id"]: r["old_pid"] for r in rows} == before
    after = cluster.pids()
    assert {r["broker_id"]: r["new_pid"] for r in rows} == after
    assert all(after[i] != before[i] and not process_alive(before[i]) for i in before)
    for broker_id in before:
        assert f"broker {broker_id}: controlled shutdown" in result.stderr
        assert f"broker {broker_id}: waiting until no partition is under-replicated" in result.stderr
    assert errors == [], errors[:5]
    assert sent == len(delivered) and acknowledged_during > 20
    with AdminClient(cluster.bootstrap) as admin:
        [topic] = admin.describe_topics(["rolling"])
    assert all(set(p.isr) == set(p.replicas) == {1, 2, 3} for p in topic.partitions)
    assert all(row["alive"] for row in cluster.status().values())


def test_a_broker_restarted_by_hand_is_shown_running_and_stopped_by_down(cluster: Cluster) -> None:
    state = load_state(cluster.directory)
    [broker] = [b for b in state.brokers if b.broker_id == 3]
    os.kill(broker.pid, 15)  # an operator stops it ...
    wait_for(lambda: not process_alive(broker.pid), "broker 3 to exit", 60)
    # ... and starts it again by hand, with the configuration the cluster recorded
    log_dir = cluster.directory / "broker-3" / "data"
    properties = {
        "listeners": f"PLAINTEXT://{broker.address}",
        "log.dirs": str(log_dir),
        "broker.id": "3",
        "zookeeper.connect": state.zookeeper_connect,
        "offsets.topic.replication.factor": "3",
        **state.properties,
    }
    overrides = [arg for key, value in properties.items() for arg in ("-X", f"{key}={value}")]
    started = cluster.kctl("broker", "start", "--daemon", *overrides)
    assert started.returncode == 0, started.stderr
    by_hand = int((log_dir / "kctl-broker.pid").read_text())
    assert by_hand != broker.pid

    rows = cluster.status()
    assert rows[3]["alive"] and rows[3]["pid"] == by_hand, rows[3]
    assert cluster.pids()[3] == by_hand  # cluster.json is true again
    assert cluster.cluster("status").returncode == 0

    everything = [p.pid for p in (*state.zookeepers, *state.brokers) if p.broker_id != 3] + [by_hand]
    down = cluster.cluster("down", "--timeout", STEP_TIMEOUT)
    assert down.returncode == 0, down.stderr
    assert f"stopped broker 3 (pid {by_hand})" in down.stderr and "stopped ZooKeeper" in down.stderr
    assert not any(process_alive(pid) for pid in everything)
    assert not (log_dir / "kctl-broker.pid").exists()  # a clean stop
    # `down` forgot the current cluster: the built-in default again
    shown = cluster.kctl("config", "show", "-f", "json")
    assert json.loads(shown.stdout)[0]["source"] == "default"


def test_start_brings_a_stopped_cluster_back_and_stop_stops_it(cluster: Cluster) -> None:
    status = cluster.cluster("status", "-f", "json")
    assert status.returncode == 1 and not any(r["alive"] for r in json.loads(status.stdout)), status.stdout
    started = cluster.cluster("start", "--timeout", STEP_TIMEOUT)
    assert started.returncode == 0, started.stderr
    assert "started ZooKeeper" in started.stderr and "started broker 3" in started.stderr
    assert started.stdout.strip() == cluster.bootstrap
    assert all(row["alive"] for row in cluster.status().values())
    with AdminClient(cluster.bootstrap) as admin:  # the same cluster: its topics are there
        assert "current" in {t.name for t in admin.list_topics()}
    current = cluster.kctl("config", "show", "-f", "json")
    assert json.loads(current.stdout)[0]["source"] == "local-cluster"

    stopped = cluster.cluster("stop", "--timeout", STEP_TIMEOUT)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped ZooKeeper" in stopped.stderr
    state = load_state(cluster.directory)
    assert not any(process_alive(p.pid) for p in (*state.zookeepers, *state.brokers))
