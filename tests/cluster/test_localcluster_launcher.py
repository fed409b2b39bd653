"""kctl.localcluster.launcher without starting a cluster: the state file, how a pid is judged alive
(a zombie or a pid reused by another program is not), how a broker is found by what runs (the
process holding its log dir's lock, its pid file) rather than by the recorded pid, stopping, what
`stop` and `down` say and do when a broker cannot be stopped (ZooKeeper stays), and `kctl
cluster`'s answers when there is no cluster or no ZooKeeper to start. The "processes" are small
Python programs that look like a broker or ZooKeeper to the launcher."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.localcluster.launcher import (
    ClusterState,
    ClusterStateError,
    ProcessState,
    broker_racks,
    down,
    load_state,
    process_alive,
    recorded_cluster,
    state_path,
    status,
    stop_process,
)
from kctl.localcluster.zookeeper import MAIN_CLASS as ZOOKEEPER_MAIN
from kctl.localcluster.zookeeper import free_port


def _state(directory: Path, pid: int) -> ClusterState:
    return ClusterState(
        directory=str(directory),
        zookeeper_connect="127.0.0.1:1/kctl",
        zookeepers=[ProcessState("zookeeper", pid, "127.0.0.1", 1, "zk.out")],
        brokers=[ProcessState("broker", pid, "127.0.0.1", 2, "b.log", 1)],
        properties={"num.partitions": "3"},
        started_at_ms=5,
    )


def _exec_done(pid: int, marker: str) -> None:
    """Wait until the child has exec'd (before that its command line is its parent's)."""
    deadline = time.monotonic() + 10
    while marker not in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.01)


def test_state_file_round_trip(tmp_path: Path) -> None:
    state = _state(tmp_path, 123)
    state_path(tmp_path).write_text(state.to_json())
    assert load_state(tmp_path) == state
    assert state.bootstrap_servers == "127.0.0.1:2"


def test_racks_one_per_broker_or_a_pattern() -> None:
    assert broker_racks("r0, r1,r2", 3) == {1: "r0", 2: "r1", 3: "r2"}
    assert broker_racks("RACK{id}", 3) == {1: "RACK1", 2: "RACK2", 3: "RACK3"}
    for wrong in ("r0,r1", "r0,,r2", "r0,r1,r2,r3", "RACK{id},x"):
        with pytest.raises(ValueError, match="--racks"):
            broker_racks(wrong, 3)


def test_recorded_racks_are_each_brokers_broker_rack(tmp_path: Path) -> None:
    state = _state(tmp_path, 123)
    state.brokers = [
        ProcessState("broker", 123, "127.0.0.1", 2 + i, "b.log", i, rack=f"r{i}" if i < 3 else None)
        for i in (1, 2, 3)
    ]
    state_path(tmp_path).write_text(state.to_json())
    loaded = load_state(tmp_path)
    assert [b.rack for b in loaded.brokers] == ["r1", "r2", None]
    cluster = recorded_cluster(loaded)
    assert [b.properties.get("broker.rack") for b in cluster.brokers.values()] == ["r1", "r2", None]
    assert all(b.properties["num.partitions"] == "3" for b in cluster.brokers.values())


def test_no_or_bad_state_file(tmp_path: Path) -> None:
    with pytest.raises(ClusterStateError, match="no cluster"):
        load_state(tmp_path)
    state_path(tmp_path).write_text("{}")
    with pytest.raises(ClusterStateError, match="not a cluster state file"):
        load_state(tmp_path)


def test_alive_means_running_and_still_the_program_started() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "kctl-marker"])
    _exec_done(child.pid, "kctl-marker")
    try:
        assert process_alive(child.pid, "kctl-marker")
        assert not process_alive(child.pid, "ZooKeeperServerMain")  # a pid reused by another program
    finally:
        child.kill()
    time.sleep(0.2)  # now a zombie until reaped: not alive (process_alive reaps it)
    assert not process_alive(child.pid, "kctl-marker")
    assert not process_alive(-1)


def test_stop_process_and_status_and_down_from_the_state_file(tmp_path: Path) -> None:
    marker = "kctl broker start"  # what the launcher looks for in a broker's command line
    log_dir = tmp_path / "broker-1" / "data"  # a recorded pid counts when it names the log dir
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", marker, "-X", f"log.dirs={log_dir}"],
        start_new_session=True,
    )
    _exec_done(child.pid, marker)
    state = _state(tmp_path, child.pid)
    state.zookeepers[0].pid = 2**22 + 7  # no such process
    state_path(tmp_path).write_text(state.to_json())
    rows = status(tmp_path)
    assert [(r.role, r.alive, r.controller) for r in rows] == [
        ("zookeeper", False, False),
        ("broker", True, False),
    ]
    report = down(tmp_path, timeout=10)
    assert [(r.role, r.pid) for r in report.stopped] == [("broker", child.pid)]
    assert report.failed == [] and report.not_running == ["ZooKeeper"]
    child.wait(timeout=10)  # gone (down() reaped its own child already, so no status is left here)
    assert not process_alive(child.pid, marker)
    assert not stop_process(child.pid, marker)


def _kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_cluster_commands_without_a_cluster_exit_3(tmp_path: Path) -> None:
    for command in ("status", "down"):
        result = _kctl("cluster", command, "--dir", str(tmp_path))
        assert result.returncode == 3, result.stderr
        assert "no cluster" in result.stderr


def test_cluster_up_without_java_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no java on the PATH
    result = _kctl("cluster", "up", "--dir", str(tmp_path / "c"), env=env)
    assert result.returncode == 3
    assert "install the Debian packages 'zookeeper'" in result.stderr
    assert result.stdout == ""


def test_cluster_up_refuses_per_broker_properties(tmp_path: Path) -> None:
    result = _kctl("cluster", "up", "--dir", str(tmp_path), "-X", "broker.id=4")
    assert result.returncode == 2 and "set by `kctl cluster up`" in result.stderr


FAKE_BROKER = """
import fcntl, os, signal, sys, time
log_dir = os.environ["FAKE_LOG_DIR"]
os.makedirs(log_dir, exist_ok=True)
if os.environ.get("FAKE_HOW") == "pid-file":
    with open(os.path.join(log_dir, "kctl-broker.pid"), "w") as pid_file:
        pid_file.write(f"{os.getpid()}\\n")
else:  # what every running broker holds
    fd = os.open(os.path.join(log_dir, ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
if os.environ.get("FAKE_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""


class Fakes:
    """Processes looking like a cluster's ZooKeeper and brokers; all killed at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.processes: list[subprocess.Popen[str]] = []

    def broker(self, broker_id: int, how: str = "lock", ignore_term: bool = False) -> int:
        log_dir = self.directory / f"broker-{broker_id}" / "data"
        env = {**os.environ, "FAKE_LOG_DIR": str(log_dir), "FAKE_HOW": how}
        if ignore_term:
            env["FAKE_IGNORE_TERM"] = "1"
        # a broker started by hand with a config file: its command line names no log dir
        child = subprocess.Popen(
            [sys.executable, "-c", FAKE_BROKER, "kctl broker start", "-c", "server.properties"],
            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
        )  # fmt: skip
        self.processes.append(child)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        return child.pid

    def zookeeper(self) -> int:
        config = self.directory / "zookeeper" / "zoo.cfg"
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", ZOOKEEPER_MAIN, str(config)],
            start_new_session=True,
        )
        self.processes.append(child)  # type: ignore[arg-type]
        _exec_done(child.pid, ZOOKEEPER_MAIN)
        return child.pid

    def kill_all(self) -> None:
        for child in self.processes:
            child.kill()
            child.wait(timeout=10)


@pytest.fixture
def fakes(tmp_path: Path) -> Iterator[Fakes]:
    made = Fakes(tmp_path.resolve())
    try:
        yield made
    finally:
        made.kill_all()


def _recorded(
    tmp_path: Path, zookeeper_pid: int, broker_pids: list[int], ports: list[int] | None = None
) -> None:
    """A cluster.json whose pids are ``broker_pids`` (dead ones: restarted since)."""
    directory = tmp_path.resolve()
    ports = ports or [free_port() for _ in broker_pids]
    state = ClusterState(
        directory=str(directory),
        zookeeper_connect="127.0.0.1:1/kctl",
        zookeepers=[ProcessState("zookeeper", zookeeper_pid, "127.0.0.1", 1, "zk.out")],
        brokers=[
            ProcessState("broker", pid, "127.0.0.1", port, "b.log", i + 1)
            for i, (pid, port) in enumerate(zip(broker_pids, ports, strict=True))
        ],
    )
    state_path(directory).write_text(state.to_json())


DEAD = 2**22 + 7  # no such process


@pytest.mark.parametrize("how", ["lock", "pid-file"])
def test_a_broker_restarted_by_hand_is_found_shown_with_its_pid_and_stopped(
    tmp_path: Path, fakes: Fakes, how: str
) -> None:
    real = fakes.broker(1, how)
    _recorded(tmp_path, DEAD, [DEAD])
    rows = status(tmp_path)
    assert [(r.role, r.pid, r.alive) for r in rows] == [("zookeeper", DEAD, False), ("broker", real, True)]
    assert load_state(tmp_path).brokers[0].pid == real  # cluster.json is true again
    shown = _kctl("cluster", "status", "--dir", str(tmp_path), "-f", "json")
    assert shown.returncode == 1 and "not running: ZooKeeper" in shown.stderr
    assert [r["pid"] for r in json.loads(shown.stdout)] == [DEAD, real]
    result = _kctl("cluster", "down", "--dir", str(tmp_path), "--timeout", "10")
    assert result.returncode == 0, result.stderr
    assert f"stopped broker 1 (pid {real})" in result.stderr
    assert not process_alive(real)


def test_down_names_a_broker_it_cannot_stop_and_leaves_zookeeper_running(
    tmp_path: Path, fakes: Fakes
) -> None:
    zookeeper = fakes.zookeeper()
    stopped = fakes.broker(1)
    with _answering_like_kafka() as port:  # broker 2's address answers, but no process of it is found
        _recorded(tmp_path, zookeeper, [stopped, DEAD], [free_port(), port])
        result = _kctl("cluster", "down", "--dir", str(tmp_path), "--timeout", "10")
    assert result.returncode == 1
    assert f"stopped broker 1 (pid {stopped})" in result.stderr
    assert f"could not stop broker 2: a Kafka broker still answers on 127.0.0.1:{port}" in result.stderr
    assert f"could not stop ZooKeeper (pid {zookeeper}): left running" in result.stderr
    assert result.stderr.splitlines()[-1] == "kctl: error: not stopped: broker 2, ZooKeeper"
    assert not process_alive(stopped) and process_alive(zookeeper, ZOOKEEPER_MAIN)


@contextlib.contextmanager
def _answering_like_kafka() -> Iterator[int]:
    """A port where something answers requests as a Kafka broker does (a response frame carrying
    the request's correlation id), in a thread; yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                size = struct.unpack(">i", conn.recv(4))[0]
                request = b""
                while len(request) < size:
                    request += conn.recv(size - len(request))
                correlation_id = request[4:8]
                conn.sendall(struct.pack(">i", 6) + correlation_id + b"\0\0")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=5)
        server.close()


def test_a_port_another_program_took_is_not_a_broker(tmp_path: Path, fakes: Fakes) -> None:
    zookeeper = fakes.zookeeper()
    with socket.create_server(("127.0.0.1", 0)) as other:  # accepts connections, answers nothing
        _recorded(tmp_path, zookeeper, [DEAD], [other.getsockname()[1]])
        report = down(tmp_path, timeout=10)
    assert report.failed == [] and report.not_running == ["broker 1"]
    assert [p.name for p in report.stopped] == ["ZooKeeper"] and not process_alive(zookeeper)


def test_stop_reports_a_broker_that_does_not_exit_and_kills_nothing(tmp_path: Path, fakes: Fakes) -> None:
    zookeeper = fakes.zookeeper()
    stuck = fakes.broker(1, ignore_term=True)
    other = fakes.broker(2)
    _recorded(tmp_path, zookeeper, [DEAD, DEAD])
    result = _kctl("cluster", "stop", "--dir", str(tmp_path), "--timeout", "1")
    assert result.returncode == 1
    assert f"could not stop broker 1 (pid {stuck}): did not exit within 1 s of SIGTERM" in result.stderr
    assert f"stopped broker 2 (pid {other})" in result.stderr
    assert process_alive(stuck) and process_alive(zookeeper) and not process_alive(other)
    one = _kctl("cluster", "stop", "--broker", "2", "--dir", str(tmp_path))
    assert one.returncode == 0 and "nothing was running" in one.stderr
    unknown = _kctl("cluster", "stop", "--broker", "7", "--dir", str(tmp_path))
    assert unknown.returncode == 3 and "has no broker 7 (brokers: 1, 2)" in unknown.stderr
