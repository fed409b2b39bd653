"""`kctl broker start --processes N` (kctl.localcluster.supervisor) against a real ZooKeeper: the
children register with derived ids, ports, log dirs and the host as rack; replicas of an RF 2 topic
land on distinct brokers; a SIGKILLed child is restarted; SIGTERM stops every child and the
supervisor exits 0; two supervisors with different racks (two "hosts") spread every partition over
both and `kctl broker list` groups the brokers by host; a missing zookeeper.connect or a bad count is
a usage error."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import kctl

from kctl.client import AdminClient
from kctl.localcluster.processes import broker_pid, kafka_answers
from kctl.localcluster.supervisor import child_properties
from kctl.testing import create_topic, wait_for

pytestmark = pytest.mark.e2e

SESSION = {"zookeeper.session.timeout.ms": "6000"}  # a killed child's registration expires fast


class Supervised:
    """A `kctl broker start --processes N` subprocess; ``addresses`` once its children listen."""

    def __init__(self, directory: Path, count: int, properties: dict[str, str]) -> None:
        args = [sys.executable, "-m", "kctl", "broker", "start", "--processes", str(count)]
        for key, value in {"log.dirs": str(directory / "data"), **SESSION, **properties}.items():
            args += ["-X", f"{key}={value}"]
        self.data = directory / "data"
        self.stderr = directory / "supervisor.log"
        with open(self.stderr, "wb") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, cwd=directory)
        self.addresses = self._first_line(120).split(",")

    def _first_line(self, timeout: float) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        data = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in data:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"no address from the supervisor\n{self.stderr.read_text()}"
                if selector.select(remaining):
                    chunk = os.read(self.process.stdout.fileno(), 4096)
                    assert chunk, f"supervisor exited\n{self.stderr.read_text()}"
                    data += chunk
        return data.split(b"\n")[0].decode().strip()

    def child_pid(self, broker_id: int) -> int | None:
        return broker_pid(self.data / f"broker-{broker_id}")

    def stop(self, timeout: float = 90) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


def _props(zookeeper_connect: str, **extra: str) -> dict[str, str]:
    return {"zookeeper.connect": zookeeper_connect, "listeners": "PLAINTEXT://127.0.0.1:0", **extra}


def test_derived_properties() -> None:
    given = {
        "broker.id": "5",
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:19092",
        "metrics.listener": "http://127.0.0.1:0",
        "log.dirs": "/d1,/d2",
    }
    child = child_properties(given, 2, "host-x")
    assert child["broker.id"] == "7"
    assert child["listeners"] == "PLAINTEXT://127.0.0.1:9094,INTERNAL://127.0.0.1:19094"
    assert child["metrics.listener"] == "http://127.0.0.1:0"
    assert child["log.dirs"] == "/d1/broker-7,/d2/broker-7"
    assert child["broker.rack"] == "host-x"
    assert child_properties({**given, "broker.rack": "r1"}, 1, "host-x")["broker.rack"] == "r1"
    assert child_properties({}, 1, "h")["listeners"] == "PLAINTEXT://127.0.0.1:9093"  # the default's port + 1


def test_processes_register_spread_restart_and_stop(tmp_path: Path, zookeeper) -> None:
    supervisor = Supervised(tmp_path, 2, _props(zookeeper.connect_string(), **{"broker.id": "1"}))
    try:
        bootstrap = ",".join(supervisor.addresses)
        assert len(set(supervisor.addresses)) == 2
        with AdminClient(bootstrap) as admin:
            brokers = wait_for(
                lambda: len(admin.describe_cluster().brokers) == 2 and admin.describe_cluster().brokers,
                "both children registered",
            )
        assert {b.node_id for b in brokers} == {1, 2}
        assert {b.rack for b in brokers} == {socket.gethostname()}
        listed = kctl("broker", "list", "-b", bootstrap, "-f", "json")
        assert listed.returncode == 0, listed.stderr
        assert [(r["broker_id"], r["rack"]) for r in json.loads(listed.stdout)] == [
            (1, socket.gethostname()),
            (2, socket.gethostname()),
        ]
        create_topic(bootstrap, "machine", partitions=4, replication_factor=2)
        with AdminClient(bootstrap) as admin:
            [topic] = [t for t in admin.list_topics() if t.name == "machine"]
        assert all(sorted(p.replicas) == [1, 2] for p in topic.partitions)

        victim = supervisor.child_pid(1)
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        host, _, port = supervisor.addresses[0].rpartition(":")
        wait_for(lambda: "broker 1 restarted" in supervisor.stderr.read_text(), "the restart", 90)
        assert kafka_answers(host, int(port))  # on its port
        restarted = supervisor.child_pid(1)
        assert restarted not in (None, victim)
        children = [restarted, supervisor.child_pid(2)]
        assert "restarting it" in supervisor.stderr.read_text()
    finally:
        code = supervisor.stop()
    assert code == 0, supervisor.stderr.read_text()
    assert all(broker_pid(supervisor.data / f"broker-{b}") is None for b in (1, 2))
    assert all(not Path(f"/proc/{pid}").exists() for pid in children if pid is not None)


def test_two_hosts_spread_every_partition(tmp_path: Path, zookeeper) -> None:
    connect = zookeeper.connect_string()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    host_a = Supervised(tmp_path / "a", 2, _props(connect, **{"broker.id": "3", "broker.rack": "host-a"}))
    try:
        host_b = Supervised(tmp_path / "b", 2, _props(connect, **{"broker.id": "1", "broker.rack": "host-b"}))
        try:
            bootstrap = ",".join(host_a.addresses + host_b.addresses)
            with AdminClient(bootstrap) as admin:
                wait_for(lambda: len(admin.describe_cluster().brokers) == 4, "four brokers registered")
            create_topic(bootstrap, "hosts", partitions=8, replication_factor=2)
            with AdminClient(bootstrap) as admin:
                [topic] = [t for t in admin.list_topics() if t.name == "hosts"]
            rack = {3: "host-a", 4: "host-a", 1: "host-b", 2: "host-b"}
            assert all({rack[b] for b in p.replicas} == {"host-a", "host-b"} for p in topic.partitions)
            listed = kctl("broker", "list", "-b", bootstrap, "-f", "json")
            assert listed.returncode == 0, listed.stderr
            # grouped by host (rack), not by id
            assert [(r["rack"], r["broker_id"]) for r in json.loads(listed.stdout)] == [
                ("host-a", 3),
                ("host-a", 4),
                ("host-b", 1),
                ("host-b", 2),
            ]
        finally:
            assert host_b.stop() == 0, host_b.stderr.read_text()
    finally:
        assert host_a.stop() == 0, host_a.stderr.read_text()


def test_usage_errors(tmp_path: Path) -> None:
    data = f"log.dirs={tmp_path / 'data'}"
    missing = kctl("broker", "start", "--processes", "2", "-X", data)
    assert missing.returncode == 2 and "--processes needs zookeeper.connect" in missing.stderr
    bad = kctl("broker", "start", "--processes", "zero", "-X", data, "-X", "zookeeper.connect=127.0.0.1:1")
    assert bad.returncode == 2 and "positive number or 'auto'" in bad.stderr
    assert not (tmp_path / "data" / "broker-0").exists()
