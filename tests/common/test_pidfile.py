"""kctl.common.pidfile: a pid file names its writer only while the writer runs — never a process that
reused the pid after the writer was killed (pid_max is 32768 here: a test suite cycles through it).
Real processes; "reused" is a live process started after the file was last written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import kctl

from kctl.common.pidfile import pid_file_owner, process_start_time
from kctl.localcluster.processes import broker_pid

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)", "kctl broker start"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(SLEEPER)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _written_before_start(path: Path, pid: int) -> None:
    """``path`` holds ``pid`` and was last written well before that process started (a stale file
    whose pid the process reused)."""
    path.write_text(f"{pid}\n")
    started = process_start_time(pid)
    assert started is not None
    os.utime(path, (started - 60, started - 60))


def test_the_writer_is_the_owner(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "kctl-broker.pid"
    path.write_text(f"{sleeper.pid}\n")  # written after the process started, as a broker writes it
    assert pid_file_owner(path) == sleeper.pid
    assert pid_file_owner(path, "kctl broker start") == sleeper.pid
    assert pid_file_owner(path, "zookeeper") is None  # another program


def test_a_reused_pid_is_not_the_owner(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "kctl-broker.pid"
    _written_before_start(path, sleeper.pid)
    assert pid_file_owner(path) is None
    assert pid_file_owner(path, "kctl broker start") is None


def test_a_dead_pid_or_a_bad_file_has_no_owner(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    path = tmp_path / "kctl-broker.pid"
    path.write_text(f"{process.pid}\n")
    assert pid_file_owner(path) is None
    path.write_text("not a pid\n")
    assert pid_file_owner(path) is None
    assert pid_file_owner(tmp_path / "missing.pid") is None


def test_cluster_status_does_not_take_a_reused_pid_for_the_broker(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A killed broker's pid file whose pid now runs another `kctl broker start` (the sleeper's
    command line carries the mark): the log dir's broker is not running."""
    _written_before_start(tmp_path / "kctl-broker.pid", sleeper.pid)
    assert broker_pid(tmp_path) is None
    (tmp_path / "kctl-broker.pid").write_text(f"{sleeper.pid}\n")  # now it is the writer
    assert broker_pid(tmp_path) == sleeper.pid


def test_broker_stop_never_signals_a_process_that_reused_the_pid(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = tmp_path / "kctl-broker.pid"
    _written_before_start(path, sleeper.pid)
    result = kctl("broker", "stop", "--pid-file", str(path), "--timeout", "5")
    assert result.returncode == 3, result.stderr
    assert f"no process {sleeper.pid} (stale pid file {path} removed)" in result.stderr
    assert not path.exists()
    with pytest.raises(subprocess.TimeoutExpired):  # a SIGTERM, had one been sent, ends it at once
        sleeper.wait(timeout=0.5)
