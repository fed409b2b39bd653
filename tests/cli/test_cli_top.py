"""`kctl top` against a real broker serving metrics, under a produce load read back by a consumer:
`--once --format json` for scripts (rates from two scrapes, records out from kctl's own counter, exact
partition counts, a group's lag = produced − committed; a broker without a metrics endpoint says so),
and the live view as a person uses it, under tmux
(new-session, send-keys, capture-pane): the brokers and topics on screen, a key changing the sort, the
filter, `q` quitting with exit status 0."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from kctl.client import AdminClient, TopicPartition
from kctl.client.group import GroupAdmin
from kctl.testing import BrokerProcess, create_topic, produce, wait_for
from kctl.testing.pytest_plugin import BrokerFactory

REPO = Path(__file__).resolve().parents[2]
BUSY, QUIET, LEDGER = "zz-busy", "aa-quiet", "ledger"  # names whose order is not their business
PARTITIONS = {BUSY: 3, QUIET: 2, LEDGER: 2}
GROUP = "stopped-group"
PER_PARTITION = 25
COMMITTED = {0: 10, 1: 4}  # the group's committed offsets in LEDGER


class Load:
    """Records produced to BUSY, a few every 10 ms, from a thread, and read back by a consumer in
    another thread, until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "top-reader"})
        self.consumer.assign([ck.TopicPartition(BUSY, p, 0) for p in range(PARTITIONS[BUSY])])
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=run, daemon=True) for run in (self._run, self._read)]
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(0.01):  # the load's pace
            for n in range(10):
                self.producer.produce(BUSY, b"x" * 300, partition=n % PARTITIONS[BUSY])
            self.producer.poll(0)
        self.producer.flush(30)

    def _read(self) -> None:
        while not self.stopping.is_set():
            self.consumer.consume(100, 0.2)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)


@pytest.fixture(scope="module")
def loaded(module_broker_factory: BrokerFactory) -> Iterator[BrokerProcess]:
    broker = module_broker_factory({"metrics.listener": "http://127.0.0.1:0"})
    for topic, partitions in PARTITIONS.items():
        create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, LEDGER, [b"r"] * (PER_PARTITION * 2), partitions=2)
    with AdminClient(broker.bootstrap) as admin:
        offsets = {TopicPartition(LEDGER, p): offset for p, offset in COMMITTED.items()}
        assert set(GroupAdmin(admin).alter_offsets(GROUP, offsets).values()) == {0}
    load = Load(broker.bootstrap)
    yield broker
    load.stop()


def kctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def _snapshot(bootstrap: str) -> dict[str, Any]:
    result = kctl("top", "-b", bootstrap, "--once", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- --once --format json ----------------------------------------------------------------------------
def test_once_json_has_rates_partition_counts_and_lag(loaded: BrokerProcess) -> None:
    snapshot = _snapshot(loaded.bootstrap)
    [broker] = snapshot["brokers"]
    assert broker["broker_id"] == 0 and broker["alive"] and broker["controller"]
    assert snapshot["controller_id"] == 0
    assert broker["metrics_url"] == loaded.metrics_url and broker["metrics_error"] is None
    assert broker["request_rate"] > 0 and broker["bytes_in_per_s"] > 0 and broker["records_in_per_s"] > 0
    assert 0 <= broker["loop_busy"] <= 1
    assert 0.5 <= snapshot["interval_s"] < 30
    topics = {t["topic"]: t for t in snapshot["topics"]}
    assert {name: topics[name]["partitions"] for name in PARTITIONS} == PARTITIONS
    assert topics[BUSY]["records_in_per_s"] > 0 and topics[BUSY]["bytes_in_per_s"] > 300
    assert topics[QUIET]["records_in_per_s"] == 0 and topics[QUIET]["bytes_in_per_s"] == 0
    # read back by the load's consumer: records out (kctl's own counter) and bytes out
    assert topics[BUSY]["records_out_per_s"] > 0 and topics[BUSY]["bytes_out_per_s"] > 300
    assert topics[QUIET]["records_out_per_s"] == 0 and topics[QUIET]["bytes_out_per_s"] == 0
    # a single broker leads every partition (the group's __consumer_offsets included)
    assert broker["partitions_led"] == broker["replicas"] == sum(t["partitions"] for t in topics.values())
    assert snapshot["partitions"] == []  # nothing under-replicated or offline
    [group] = [g for g in snapshot["groups"] if g["group"] == GROUP]
    produced = PER_PARTITION * 2
    assert group["lag"] == produced - sum(COMMITTED.values())
    assert group["partitions"] == 2 and group["members"] == 0 and group["state"] == "Empty"
    assert group["lag_per_s"] == 0  # nothing produced to LEDGER between the two refreshes
    assert snapshot["notes"] == []


def test_a_broker_without_metrics_is_named(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    result = kctl("top", "-b", broker.bootstrap, "--once", "--format", "json", "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["brokers"]
    assert row["metrics_error"] == "no metrics endpoint (metrics.listener is empty)"
    assert row["request_rate"] is None and row["bytes_in_per_s"] is None and row["alive"]
    assert "broker 0: no metrics endpoint (metrics.listener is empty)" in result.stderr


# -- the live view, under tmux -------------------------------------------------------------------------
@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Any]:
    """A tmux server of the test's own (its socket in tmp_path), killed at the end."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (scripts/install-system-deps.sh installs it)")
    socket = tmp_path / "tmux.sock"

    def run(*args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", str(socket), *args], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    yield run
    subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=30)


def _rows(screen: str, *names: str) -> list[str]:
    """The names among ``names`` in the order their rows appear on the screen."""
    found = []
    for line in screen.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if cells and cells[0] in names:
            found.append(cells[0])
    return found


def test_the_live_view_under_tmux(loaded: BrokerProcess, tmux: Any, tmp_path: Path) -> None:
    exit_file = tmp_path / "exit-status"
    # the pane's own size (COLUMNS/LINES, if this process has them, would override it for rich)
    top = f"env -u COLUMNS -u LINES {sys.executable} -m kctl top -b {loaded.bootstrap}"
    command = f"{top}; echo $? > {exit_file}; sleep 60"
    tmux("new-session", "-d", "-s", "top", "-x", "200", "-y", "60", "-c", str(REPO), command)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "top")

    def busiest_first() -> str | None:
        text = screen()
        busy = next((line for line in text.splitlines() if BUSY in line), "")
        rated = re.search(r"[1-9][\d.]* (KiB|MiB|GiB)/s", busy)  # rates: the second refresh is in
        return (
            text if rated and "sort: bytes in" in text and _rows(text, BUSY, QUIET) == [BUSY, QUIET] else None
        )

    text = wait_for(busiest_first, "the view with rates, the busy topic first", describe=screen)
    assert "brokers" in text and loaded.metrics_url in text
    [broker_row] = [line for line in text.splitlines() if line.startswith("│ 0 ")]
    assert "yes" in broker_row and "*" in broker_row  # alive, the controller
    assert _rows(text, LEDGER, GROUP)  # the topics table and the group table
    lag = PER_PARTITION * 2 - sum(COMMITTED.values())
    assert f" {lag} " in next(line for line in text.splitlines() if GROUP in line)  # its lag

    assert "RECORDS OUT" in text
    tmux("send-keys", "-t", "top", "s", "s", "s", "s")  # bytes out, records in, records out, then name
    wait_for(
        lambda: "sort: name" in (t := screen()) and _rows(t, BUSY, QUIET) == [QUIET, BUSY],
        "the topics sorted by name",
        describe=screen,
    )
    tmux("send-keys", "-t", "top", "s", "s", "s", "s")  # back to records out: the one consumed first
    wait_for(
        lambda: "sort: records out" in (t := screen()) and _rows(t, BUSY, QUIET) == [BUSY, QUIET],
        "the topics sorted by records out",
        describe=screen,
    )
    tmux("send-keys", "-t", "top", "/", "q", "u", "i", "Enter")  # a filter: `q` typed there is text
    wait_for(
        lambda: "filter: qui" in (t := screen()) and _rows(t, BUSY, QUIET, LEDGER) == [QUIET],
        "only the filtered topic",
        describe=screen,
    )
    tmux("send-keys", "-t", "top", "q")
    wait_for(
        lambda: exit_file.exists() and exit_file.read_text().strip(), "kctl top to exit", describe=screen
    )
    assert exit_file.read_text().strip() == "0"
