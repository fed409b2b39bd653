"""kctl.localcluster.launcher without starting a cluster: the state file, how a pid is judged alive
(a zombie or a pid reused by another program is not), stopping a process by pid, and `kctl cluster`'s
answers when there is no cluster or no ZooKeeper to start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kctl.localcluster.launcher import (
    ClusterState,
    ClusterStateError,
    ProcessState,
    down,
    load_state,
    process_alive,
    state_path,
    status,
    stop_process,
)


def _state(directory: Path, pid: int) -> ClusterState:
    return ClusterState(
        directory=str(directory),
        zookeeper_connect="127.0.0.1:1/kctl",
        zookeeper=ProcessState("zookeeper", pid, "127.0.0.1", 1, "zk.out"),
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
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", marker], start_new_session=True
    )
    _exec_done(child.pid, marker)
    state = _state(tmp_path, child.pid)
    state.zookeeper.pid = 2**22 + 7  # no such process
    state_path(tmp_path).write_text(state.to_json())
    rows = status(tmp_path)
    assert [(r.role, r.alive, r.controller) for r in rows] == [
        ("zookeeper", False, False),
        ("broker", True, False),
    ]
    stopped = down(tmp_path, timeout=10)
    assert [(r.role, r.pid) for r in stopped] == [("broker", child.pid)]
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
