"""A Jepsen-style check of committed consumer offsets (issue 24's checkers): under the faults of a
`kctl.testing.jepsen.Campaign`, a consumer group's committed offsets must never go backwards — a
group coordinator that moved (its broker killed, paused, cut off) must load every commit it
acknowledged before, never an older one.

`CommittedOffsetsWatcher(bootstrap, topic, group, output)` runs, in a **process of its own**
(``python -m kctl.testing.jepsen_offsets``: a client library failing under the faults can then not
take the test's process down with it), a confluent-kafka consumer in ``group`` reading ``topic`` with
auto commit every 200 ms, and a watcher asking the cluster for the group's committed offsets
(OffsetFetch, kctl's admin client) every ``interval_s``. The process writes one JSON line per answer
to ``output``, ``{"offsets": {partition: offset}}`` (or ``{"error": ...}`` while the coordinator moves),
until SIGTERM. `stop()` ends it and reads the file back: ``regressions`` names every partition
whose committed offset was seen lower than one seen before, ``observations`` counts the answers,
``highest`` the highest offset seen per partition, ``errors`` the failed asks."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STOP_TIMEOUT_S = 60.0


class CommittedOffsetsWatcher:
    """The consuming group and the watcher of its committed offsets, in a subprocess."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, output: Path, *, interval_s: float = 0.2
    ) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.output = Path(output)
        self.interval_s = interval_s
        self.regressions: list[str] = []
        self.observations = 0
        self.highest: dict[int, int] = {}
        self.errors: list[str] = []
        self.returncode: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> CommittedOffsetsWatcher:
        command = [
            sys.executable, "-m", __name__,
            self.bootstrap, self.topic, self.group, str(self.output), str(self.interval_s),
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        return self

    def wait_for_commits(self, timeout: float = 60.0) -> None:
        """Poll (with a deadline) until the group has committed something: the faults then have
        committed offsets to lose. Raises TimeoutError, quoting the watcher's last lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"the offsets watcher exited with status {self._process.returncode}")
            try:
                lines = self.output.read_text().splitlines()
            except OSError:
                lines = []
            for line in lines:
                with contextlib.suppress(ValueError):
                    if any(v > 0 for v in json.loads(line).get("offsets", {}).values()):
                        return
            time.sleep(0.1)  # polling interval, bounded by the deadline
        raise TimeoutError(f"no committed offset within {timeout:g} s; last lines: {lines[-3:]}")

    def stop(self) -> None:
        """End the process (SIGTERM) and check what it saw."""
        process = self._process
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                self.returncode = process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                self.returncode = process.wait()
                self.errors.append(f"the watcher did not stop within {STOP_TIMEOUT_S:g} s")
        self._check()

    def _check(self) -> None:
        try:
            lines = self.output.read_text().splitlines()
        except OSError as error:
            self.errors.append(f"no observations: {error}")
            return
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by the stop
            if "error" in entry:
                self.errors.append(entry["error"])
                continue
            self.observations += 1
            for key, offset in entry["offsets"].items():
                partition = int(key)
                before = self.highest.get(partition, -1)
                if offset < before:
                    self.regressions.append(
                        f"{self.topic}/{partition}: committed offset went back: {before} -> {offset}"
                    )
                self.highest[partition] = max(before, offset)


def _consume(bootstrap: str, topic: str, group: str, stop: threading.Event, out: list[str]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "session.timeout.ms": 10000,
            "log_level": 0,
        }
    )
    try:
        consumer.subscribe([topic])
        while not stop.is_set():
            consumer.poll(0.1)
    except Exception as error:  # reported: the check then proves less, and says so
        out.append(f"consumer: {error!r}")
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    """``python -m kctl.testing.jepsen_offsets BOOTSTRAP TOPIC GROUP OUTPUT INTERVAL_S``."""
    from kctl.client import AdminClient, KafkaError
    from kctl.client.group.admin import GroupAdmin

    bootstrap, topic, group, output, interval = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer_errors: list[str] = []
    consumer = threading.Thread(target=_consume, args=(bootstrap, topic, group, stop, consumer_errors))
    consumer.start()
    with open(output, "a", buffering=1) as out, AdminClient(bootstrap) as admin:
        groups = GroupAdmin(admin)
        while not stop.wait(float(interval)):
            try:
                committed = groups.committed_offsets(group, timeout=10)
            except (KafkaError, OSError, TimeoutError) as error:
                out.write(json.dumps({"error": f"offset fetch: {error}"}) + "\n")
                continue
            offsets = {
                tp.partition: value.offset
                for tp, value in committed.items()
                if value is not None and tp.topic == topic
            }
            out.write(json.dumps({"time": time.time(), "offsets": offsets}) + "\n")
        consumer.join(timeout=STOP_TIMEOUT_S)
        for failure in consumer_errors:
            out.write(json.dumps({"error": failure}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
