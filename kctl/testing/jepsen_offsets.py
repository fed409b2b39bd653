"""A Jepsen-style check of committed consumer offsets (issue 24's checkers): under the faults of a
`kctl.testing.jepsen.Campaign`, the group coordinator must answer OffsetFetch with the group's latest
commit as its ``__consumer_offsets`` log holds them — a coordinator that moved (its broker killed,
paused, cut off) must load every commit it acknowledged, never answer an older one, and never answer
a commit the log then does not hold.

The committed offsets themselves may go down: a client commits what it is told to, and librdkafka's
auto commit does send older offsets after newer ones around a coordinator change (the commits it
deferred while no coordinator was known and the in-flight ones it retries are sent when the new one
is found, each with the offsets of its own moment). Kafka stores them in the order they arrive, and so
does kctl. So the check is against the log, not against the numbers: each answer must be a commit at
or after the log position of the answer before.

`CommittedOffsetsWatcher(bootstrap, topic, group, output)` runs, in a **process of its own**
(``python -m kctl.testing.jepsen_offsets``: a client library failing under the faults can then not
take the test's process down with it), a confluent-kafka consumer in ``group`` reading ``topic`` with
auto commit every 200 ms, and a watcher asking the cluster for the group's committed offsets
(OffsetFetch, kctl's admin client) every ``interval_s``. The process writes one JSON line per answer
to ``output``, ``{"offsets": {partition: offset}}`` (or ``{"error": ...}`` while the coordinator moves),
until SIGTERM. `stop()` ends it, reads the group's commits back from ``__consumer_offsets`` (a plain
consumer of the cluster after the faults) and checks every answer against them (`check_answers`):
``regressions`` names every answer older in the log than one seen before, or held by no commit of
the log; ``observations`` counts the answers, ``highest`` the highest offset seen per partition,
``commits`` the commits read from the log, ``errors`` the failed asks."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

STOP_TIMEOUT_S = 60.0
OFFSETS_TOPIC = "__consumer_offsets"


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
        self.commits = 0
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

    def stop(self, history: Mapping[int, Sequence[int]] | None = None) -> None:
        """End the process (SIGTERM), read the group's commits back from the cluster's
        ``__consumer_offsets`` (or take ``history``, per partition the commits in log order) and
        check what the watcher saw against them."""
        process = self._process
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                self.returncode = process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                self.returncode = process.wait()
                self.errors.append(f"the watcher did not stop within {STOP_TIMEOUT_S:g} s")
        answers = self._answers()
        if history is None:
            history = read_commit_history(self.bootstrap, self.group, self.topic)
        self.commits = sum(len(values) for values in history.values())
        self.regressions = check_answers(self.topic, answers, history)
        self.observations = len(answers)
        for answer in answers:
            for partition, offset in answer.items():
                self.highest[partition] = max(self.highest.get(partition, -1), offset)

    def _answers(self) -> list[dict[int, int]]:
        try:
            lines = self.output.read_text().splitlines()
        except OSError as error:
            self.errors.append(f"no observations: {error}")
            return []
        answers = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by the stop
            if "error" in entry:
                self.errors.append(entry["error"])
                continue
            answers.append({int(key): offset for key, offset in entry["offsets"].items()})
        return answers


def read_commit_history(bootstrap: str, group: str, topic: str) -> dict[int, list[int]]:
    """Per partition of ``topic``, the offsets ``group`` committed, in the order of its
    ``__consumer_offsets`` partition (as stored: what the coordinator acknowledged and replicated);
    -1 for a tombstone."""
    from confluent_kafka.admin import AdminClient

    from kctl.broker.group.records import OffsetKey, decode_key, decode_offset_value, partition_for_group
    from kctl.testing.cluster_clients import read_records

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(OFFSETS_TOPIC, timeout=30)
    partition = partition_for_group(group, len(metadata.topics[OFFSETS_TOPIC].partitions))
    history: dict[int, list[int]] = {}
    for _offset, key, value in read_records(bootstrap, OFFSETS_TOPIC, [partition])[partition]:
        if key is None:
            continue
        parsed = decode_key(key)
        if isinstance(parsed, OffsetKey) and parsed.group == group and parsed.topic == topic:
            committed = -1 if value is None else decode_offset_value(value).offset
            history.setdefault(parsed.partition, []).append(committed)
    return history


def check_answers(
    topic: str, answers: Iterable[Mapping[int, int]], history: Mapping[int, Sequence[int]]
) -> list[str]:
    """The answers (OffsetFetch, in the order received) that the commit log ``history`` (per
    partition, the committed offsets in log order) does not explain: an answer must be a commit at or
    after the log position of the partition's answer before (the earliest such, so that a value
    committed several times is not matched too late), else it answered an older state than it had
    already shown (``went back``) or a commit the log does not hold (``lost``). A partition missing
    from an answer after it was answered is a lost commit too, unless the log deleted it since."""
    problems: list[str] = []
    position: dict[int, int] = {}
    for number, answer in enumerate(answers):
        for partition in sorted(set(position) - set(answer)):
            if -1 not in history.get(partition, ())[position[partition] :]:  # no tombstone since
                problems.append(
                    f"{topic}/{partition}: answer {number} has no committed offset, after "
                    f"{history[partition][position[partition]]} was answered"
                )
        for partition, offset in sorted(answer.items()):
            commits = history.get(partition, ())
            start = position.get(partition, 0)
            try:
                position[partition] = commits.index(offset, start)
            except ValueError:
                if offset in commits[:start]:
                    problems.append(
                        f"{topic}/{partition}: committed offset went back: answer {number} is {offset}, "
                        f"a commit older in the log than the {commits[start]} answered before"
                    )
                else:
                    problems.append(
                        f"{topic}/{partition}: answer {number} is {offset}, which no commit in the log holds"
                    )
    return problems


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
