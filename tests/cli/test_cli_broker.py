"""`kctl broker start --daemon` / `kctl broker stop`, retention on the broker's schedule, configuration,
and a broker that cannot start saying why in one line (foreground and daemon alike)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.broker.config import BrokerConfig


def kctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=timeout
    )


def kcat(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", *args], capture_output=True, text=True, timeout=60, input=input)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.e2e  # starts `kctl broker start --daemon` and kcat
def test_daemon_start_serves_and_stop_ends_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = ["-X", "listeners=PLAINTEXT://127.0.0.1:0", "-X", f"log.dirs={data}"]
    started = kctl("broker", "start", "--daemon", *props)
    assert started.returncode == 0, started.stderr
    address = started.stdout.strip()
    pid = int((data / "kctl-broker.pid").read_text())
    assert _alive(pid)
    produced = kcat("-b", address, "-P", "-t", "daemon_t", input="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("-b", address, "-C", "-t", "daemon_t", "-o", "beginning", "-e", "-q")
    assert consumed.stdout.split() == ["one", "two"]
    stopped = kctl("broker", "stop", *props)
    assert stopped.returncode == 0, stopped.stderr
    assert not _alive(pid) and not (data / "kctl-broker.pid").exists()
    assert (data / ".kctl_cleanshutdown").exists()  # clean stop: logs flushed, checkpoints written
    again = kctl("broker", "stop", *props)
    assert again.returncode == 3


@pytest.mark.e2e  # starts `kctl broker start --daemon` and kcat
def test_second_broker_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = ["-X", "listeners=PLAINTEXT://127.0.0.1:0", "-X", f"log.dirs={data}"]
    assert kctl("broker", "start", "--daemon", *props).returncode == 0
    pid_file = data / "kctl-broker.pid"
    pid = pid_file.read_text()
    try:
        second = kctl("broker", "start", *props, "--pid-file", str(tmp_path / "other.pid"))
        assert second.returncode == 1
        assert "in use" in second.stderr or "locked" in second.stderr
        assert "unexpected" not in second.stderr
        for extra in ([], ["--daemon"]):  # the same pid file: refused before touching anything
            again = kctl("broker", "start", *props, *extra)
            assert again.returncode == 1, again.stderr
            assert again.stderr.strip() == (
                f"kctl: error: a broker is already running on {data} (pid {pid.strip()}, pid file {pid_file})"
            )
            assert pid_file.read_text() == pid
    finally:
        assert kctl("broker", "stop", *props).returncode == 0


@pytest.mark.e2e  # starts `kctl broker start --daemon` and kcat
def test_retention_runs_on_the_broker_schedule(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = [
        "-X",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "-X",
        f"log.dirs={data}",
        "-X",
        "log.retention.check.interval.ms=200",
        "-X",
        "log.segment.bytes=1024",
    ]
    started = kctl("broker", "start", "--daemon", *props)
    assert started.returncode == 0, started.stderr
    address = started.stdout.strip()
    try:
        lines = "".join(f"k{i}:{'x' * 300}\n" for i in range(20))
        produced = kcat(
            "-b", address, "-P", "-t", "ret", "-K", ":", "-X", "batch.num.messages=1", input=lines
        )
        assert produced.returncode == 0
        created = kcat("-b", address, "-L", "-t", "ret")
        assert "ret" in created.stdout
        segments = sorted((data / "ret_0").glob("*.log"))
        assert len(segments) > 3
        # retention.ms below the records' age: the broker deletes all but the active segment
        alter = subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "from confluent_kafka.admin import "
                    "AdminClient, ConfigResource, ConfigEntry, AlterConfigOpType;"
                    f"a=AdminClient({{'bootstrap.servers':'{address}'}});"
                    "r=ConfigResource('topic','ret',incremental_configs=[ConfigEntry('retention.ms','1000',"
                    "incremental_operation=AlterConfigOpType.SET)]);"
                    "[f.result(10) for f in a.incremental_alter_configs([r]).values()]"
                ),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert alter.returncode == 0, alter.stderr
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(list((data / "ret_0").glob("*.log"))) > 1:
            time.sleep(0.1)
        remaining = list((data / "ret_0").glob("*.log"))
        assert len(remaining) == 1, remaining
    finally:
        assert kctl("broker", "stop", *props).returncode == 0


def test_broker_config_maps_kafka_properties() -> None:
    config = BrokerConfig(
        {
            "log.retention.hours": "2",
            "log.segment.bytes": "1048576",
            "log.cleanup.policy": "compact",
            "listeners": "PLAINTEXT://0.0.0.0:19092",
            "advertised.listeners": "PLAINTEXT://kafka.example:19092",
            "some.unknown.key": "x",
            "log.dirs": "/a,/b",
        }
    )
    assert config.log_config.retention_ms == 2 * 3_600_000
    assert config.log_config.segment_bytes == 1_048_576 and config.log_config.compact
    assert [str(listener) for listener in config.advertised_listeners] == ["PLAINTEXT://kafka.example:19092"]
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert config.ignored == ["some.unknown.key"]
    assert BrokerConfig({"log.retention.ms": "5"}).log_config.retention_ms == 5


def test_bad_broker_configuration_is_a_usage_error(tmp_path: Path) -> None:
    result = kctl("broker", "start", "-X", "listeners=nonsense", "-X", f"log.dirs={tmp_path}")
    assert result.returncode == 2 and "listener" in result.stderr


def test_broker_configs_show_value_default_and_source(broker_factory) -> None:  # type: ignore[no-untyped-def]
    import json

    broker = broker_factory({"log.retention.hours": "72"})
    result = kctl("broker", "config", "describe", "--all", "-b", broker.bootstrap, "-f", "json")
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["log.retention.hours"]["value"] == "72"
    assert rows["log.retention.hours"]["default"] == "168"
    assert rows["log.retention.hours"]["source"] == "STATIC_BROKER_CONFIG"
    assert rows["num.partitions"]["source"] == "DEFAULT_CONFIG"
    assert rows["num.partitions"]["value"] == rows["num.partitions"]["default"]
    assert {r["broker_id"] for r in rows.values()} == {broker.broker_id}
    missing = kctl("broker", "config", "describe", "--broker", "42", "-b", broker.bootstrap)
    assert missing.returncode == 3 and "no broker 42" in missing.stderr


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


START_FAILURES = {
    # listener -> (exit status, the one line on stderr after "kctl: error: ")
    "in use": (1, "cannot start the broker: error while attempting to bind on address ('127.0.0.1', {port}): "
               "address already in use"),
    "typo": (2, "invalid broker configuration: listener PLAINTEX is not in listener.security.protocol.map"),
}  # fmt: skip


@pytest.mark.e2e  # runs `kctl broker start` (foreground and --daemon) to its failure
@pytest.mark.parametrize("daemon", [False, True], ids=["foreground", "daemon"])
@pytest.mark.parametrize("case", sorted(START_FAILURES))
def test_a_broker_that_cannot_start_says_why_in_one_line(
    tmp_path: Path, taken_port: int, daemon: bool, case: str
) -> None:
    listener = {"in use": f"PLAINTEXT://127.0.0.1:{taken_port}", "typo": "PLAINTEX://127.0.0.1:0"}[case]
    data = tmp_path / "data"
    log_file = data / "kctl-broker.log"
    mode = ["--daemon"] if daemon else ["--log-file", str(log_file)]
    result = kctl("broker", "start", *mode, "-X", f"listeners={listener}", "-X", f"log.dirs={data}")
    code, reason = START_FAILURES[case]
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines() == [f"kctl: error: {reason.format(port=taken_port)}"]
    assert result.stdout == ""
    log = log_file.read_text()
    assert "Traceback" not in log, log
    if daemon:  # the daemon's log says it too, in one line
        assert reason.format(port=taken_port) in log
    assert not (data / "kctl-broker.pid").exists()  # the failed broker's pid file is gone
