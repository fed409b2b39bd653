"""Consumer-group members for the group tests: confluent-kafka and kafka-python consumers running in
threads (or in a child process a test can SIGKILL), and a shared `Ledger` that their rebalance
callbacks and poll loops report to: who owns which partition right now, every record each member
consumed, every error a client reported, and a timeline for failure messages.

Members process a record, then commit it synchronously before their next poll (and a confluent-kafka
member commits what it still holds in its revoke callback), so with clean shutdowns every record is
consumed exactly once; a member killed with SIGKILL leaves its partitions at its last commit.

Nothing here sleeps to synchronise: waits block on the ledger's condition variable with a deadline.

Run as a script, this module is the child-process member:

    python group_clients.py ck|kp NAME BOOTSTRAP GROUP TOPIC CONFIG_JSON

printing one JSON line per event on stdout (``assign``, ``revoke``, ``lost``, ``record``, ``error``,
``closed``); SIGTERM makes it leave the group cleanly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import confluent_kafka as ck

TIMEOUT = 20.0
HERE = Path(__file__).resolve().parent

Key = tuple[int, int]  # (partition, offset)


class GroupTestFailure(AssertionError):
    """A wait timed out or a member misbehaved; the message carries the ledger's timeline."""


# ------------------------------------------------------------------------------------------- ledger


class Ledger:
    """Ownership and consumption of one topic's partitions by the members of one group.

    Members whose rebalance callbacks run before they rejoin (threads in this process) are *checked*:
    a partition assigned to one of them while another checked member still owns it is recorded as a
    violation. Members in child processes report through a pipe, so they are not checked."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = frozenset(range(partitions))
        self.cond = threading.Condition()
        self.owned: dict[str, set[int]] = {}
        self.unchecked: set[str] = set()
        self.records: dict[str, list[tuple[int, int, bytes | None]]] = {}
        self.consumers: dict[Key, list[str]] = {}
        self.client_logs: dict[str, deque[str]] = {}
        """member -> the last lines of its client's own debug log (librdkafka's cgrp and topic)."""
        """(partition, offset) -> "member@seconds" for each delivery (who read a duplicate, when)."""
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.timeline: list[str] = []
        self.revocations: Counter[str] = Counter()
        self.assignments: Counter[str] = Counter()
        self.t0 = time.monotonic()

    # -- reports from members ------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.t0:7.3f}s {text}")

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        new = set(partitions)
        with self.cond:
            self._note(f"{member} assigned {sorted(new)}")
            self.assignments[member] += 1
            if member not in self.unchecked:
                for other, theirs in self.owned.items():
                    clash = theirs & new
                    if other != member and other not in self.unchecked and clash:
                        self.violations.append(
                            f"{member} was assigned {sorted(clash)} while {other} still owned them"
                        )
            self.owned.setdefault(member, set()).update(new)
            self.cond.notify_all()

    def revoked(self, member: str, partitions: Iterable[int], how: str = "revoked") -> None:
        gone = set(partitions)
        with self.cond:
            self._note(f"{member} {how} {sorted(gone)}")
            self.revocations[member] += 1
            self.owned.setdefault(member, set()).difference_update(gone)
            self.cond.notify_all()

    def forget(self, member: str, why: str) -> None:
        """The member stopped consuming (closed or killed): it owns nothing any more."""
        with self.cond:
            self._note(f"{member} {why}; it owned {sorted(self.owned.get(member, ()))}")
            self.owned.pop(member, None)
            self.cond.notify_all()

    def record(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        with self.cond:
            self.records.setdefault(member, []).append((partition, offset, value))
            when = f"{member}@{time.monotonic() - self.t0:.3f}s"
            self.consumers.setdefault((partition, offset), []).append(when)
            self.cond.notify_all()

    def error(self, member: str, text: str) -> None:
        with self.cond:
            self._note(f"{member} ERROR {text}")
            self.errors.append(f"{member}: {text}")
            self.cond.notify_all()

    def note(self, text: str) -> None:
        with self.cond:
            self._note(text)

    # -- views ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, frozenset[int]]:
        with self.cond:
            return {m: frozenset(p) for m, p in self.owned.items()}

    def consumed(self) -> Counter[Key]:
        """How many times each (partition, offset) was consumed, over all members."""
        with self.cond:
            return Counter((p, o) for records in self.records.values() for p, o, _ in records)

    def consumed_by(self, member: str) -> list[tuple[int, int, bytes | None]]:
        with self.cond:
            return list(self.records.get(member, []))

    def deliveries(self, keys: Iterable[Key]) -> str:
        """Who consumed each of ``keys`` and when, and what those members' clients logged about
        those partitions (for a failure message)."""
        keys = list(keys)
        with self.cond:
            lines = [f"{key}: {', '.join(self.consumers.get(key, []))}" for key in keys]
            partitions = {f"[{p}]" for p, _ in keys}
            readers = {who.split("@")[0] for key in keys for who in self.consumers.get(key, [])}
            for member in sorted(readers):
                logged = [
                    line
                    for line in self.client_logs.get(member, ())
                    if any(p in line for p in partitions) and " DUMP" not in line
                ]
                lines += [f"{member}'s client log about {sorted(partitions)}:", *logged[-40:]]
        return "\n  ".join(lines)

    def client_log(self, member: str) -> logging.Logger:
        """A logger for ``member``'s client whose lines (timed like the timeline) the ledger keeps."""
        kept = self.client_logs.setdefault(member, deque(maxlen=2000))
        ledger = self

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                kept.append(f"{time.monotonic() - ledger.t0:7.3f}s {record.getMessage()}")

        logger = logging.getLogger(f"group-clients.{self.topic}.{member}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(Keep())
        return logger

    def values(self) -> dict[Key, bytes | None]:
        with self.cond:
            return {(p, o): v for records in self.records.values() for p, o, v in records}

    def report(self) -> str:
        with self.cond:
            lines = [*self.timeline[-60:]]
            owned = {m: sorted(p) for m, p in self.owned.items()}
        return f"ownership now: {owned}\ntimeline:\n  " + "\n  ".join(lines)

    # -- waits ---------------------------------------------------------------------------------
    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Block until ``predicate()`` (called under the lock) holds; returns the monotonic time it
        became true. Raises GroupTestFailure with the timeline after ``timeout`` seconds."""
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise GroupTestFailure(
                    f"timed out after {timeout:g}s waiting for {what}\nerrors: {self.errors}\n{self.report()}"
                )
            return time.monotonic()

    def settled(self, members: Iterable[str], *, balanced: bool = True) -> bool:
        """Exactly ``members`` own partitions, every partition has exactly one owner, and (balanced)
        each member owns len(partitions)/len(members) of them (rounded either way). Call under lock."""
        names = set(members)
        owners = {m: p for m, p in self.owned.items() if p}
        if set(owners) != names:
            return False
        everything: list[int] = [p for parts in owners.values() for p in parts]
        if len(everything) != len(set(everything)) or set(everything) != self.partitions:
            return False
        if balanced:
            low = len(self.partitions) // len(names)
            high = -(-len(self.partitions) // len(names))
            return all(low <= len(p) <= high for p in owners.values())
        return True

    def wait_settled(
        self, members: Iterable[str], timeout: float = TIMEOUT, *, balanced: bool = True
    ) -> float:
        names = sorted(members)
        return self.wait(
            lambda: self.settled(names, balanced=balanced), timeout, f"the group to settle on {names}"
        )

    def wait_consumed(self, keys: Iterable[Key], timeout: float = TIMEOUT) -> float:
        wanted = set(keys)

        def done() -> bool:
            seen = {(p, o) for records in self.records.values() for p, o, _ in records}
            return wanted <= seen

        return self.wait(done, timeout, f"{len(wanted)} produced records to be consumed")


# ------------------------------------------------------------------------------------------- members


class Member:
    """A consumer in a thread of this process; `stop()` closes it cleanly from its own thread."""

    client = "?"

    def __init__(
        self,
        name: str,
        ledger: Ledger,
        bootstrap: str,
        group: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.bootstrap = bootstrap
        self.group = group
        self.topic = ledger.topic
        self.config = dict(config or {})
        self.stopping = threading.Event()
        self.closed = threading.Event()
        self.member_id: str | None = None
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> Member:
        self.thread.start()
        return self

    def stop(self, timeout: float = TIMEOUT) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise GroupTestFailure(f"{self.name} did not close within {timeout:g}s\n{self.ledger.report()}")

    def _run(self) -> None:
        try:
            self.loop()
        except BaseException:
            self.ledger.error(self.name, traceback.format_exc())
        finally:
            self.closed.set()

    def loop(self) -> None:
        raise NotImplementedError


class ConfluentMember(Member):
    """confluent-kafka (librdkafka) consumer: eager rebalancing, manual synchronous commits."""

    client = "confluent-kafka"

    def make_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 2000,
            # librdkafka's group and offset decisions, kept in memory and quoted when a check fails
            "debug": "cgrp,topic",
            "logger": self.ledger.client_log(self.name),
            **self.config,
        }

    def loop(self) -> None:
        consumer = ck.Consumer(self.make_config())
        pending: dict[int, int] = {}  # partition -> next offset to commit
        ledger, name, topic = self.ledger, self.name, self.topic

        def commit(only: set[int] | None = None) -> None:
            offsets = [
                ck.TopicPartition(topic, p, o) for p, o in pending.items() if only is None or p in only
            ]
            if not offsets:
                return
            try:
                result = consumer.commit(offsets=offsets, asynchronous=False)
            except ck.KafkaException as error:
                ledger.error(name, f"commit {[(t.partition, t.offset) for t in offsets]} failed: {error}")
                return
            for tp in result or []:
                if tp.error is not None:
                    ledger.error(name, f"commit of partition {tp.partition} failed: {tp.error}")
                elif pending.get(tp.partition) == tp.offset:
                    del pending[tp.partition]

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            self.member_id = consumer.memberid()
            ledger.assigned(name, [tp.partition for tp in partitions])

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            gone = {tp.partition for tp in partitions}
            if held := {p: o for p, o in pending.items() if p in gone}:
                ledger.note(f"{name} commits {held} in its revoke callback")
            commit(gone)
            for p in gone:
                pending.pop(p, None)
            ledger.revoked(name, gone)

        def on_lost(_consumer: Any, partitions: list[Any]) -> None:
            gone = {tp.partition for tp in partitions}
            for p in gone:
                pending.pop(p, None)
            ledger.revoked(name, gone, "lost")

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        since_commit = 0
        try:
            while not self.stopping.is_set():
                message = consumer.poll(0.05)
                if message is None:
                    commit()
                    since_commit = 0
                    continue
                if message.error() is not None:
                    ledger.error(name, f"poll: {message.error()}")
                    continue
                ledger.record(name, message.partition(), message.offset(), message.value())
                pending[message.partition()] = message.offset() + 1
                since_commit += 1
                if since_commit >= 25:
                    commit()
                    since_commit = 0
            commit()
        finally:
            ledger.forget(name, "closing")
            consumer.close()


class KafkaPythonMember(Member):
    """kafka-python KafkaConsumer: records of one poll are committed synchronously before the next
    poll (rebalances, and so revocations, happen only inside poll)."""

    client = "kafka-python"

    def make_config(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group,
            "client_id": self.name,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            "metadata_max_age_ms": 2000,
            **self.config,
        }

    def loop(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        ledger, name = self.ledger, self.name
        member = self

        class Listener(ConsumerRebalanceListener):
            # runs on kafka-python's IO thread while the member's thread blocks in poll(): no blocking
            # consumer calls in here (there is nothing left to commit anyway)
            def on_partitions_revoked(self, revoked: Any) -> None:
                ledger.revoked(name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                with contextlib.suppress(Exception):
                    member.member_id = consumer._coordinator._generation.member_id
                ledger.assigned(name, [tp.partition for tp in assigned])

            def on_partitions_lost(self, lost: Any) -> None:
                ledger.revoked(name, [tp.partition for tp in lost], "lost")

        consumer = KafkaConsumer(**self.make_config())
        consumer.subscribe([self.topic], listener=Listener())
        # Work around a kafka-python 3.0.12 bug. Its leader rejoins when the partition metadata it
        # assigned from differs from the current one (e.g. the first assignment was made before the
        # subscription's metadata arrived); that rejoin is not flagged in rejoin_needed, so if poll()
        # times out while the JoinGroup waits for the other members, the finished join is never
        # applied: no assignment, heartbeats stay disabled, the broker expires the member after its
        # session timeout (seen in kafka-python's debug log, with the broker answering JoinGroup and
        # SyncGroup in milliseconds). A blocking metadata fetch after subscribe() gives the coordinator
        # the subscription's partitions before its first join, so the first assignment is right.
        if self.topic not in consumer.topics():
            ledger.error(name, f"kafka-python does not see topic {self.topic}")
        try:
            while not self.stopping.is_set():
                try:
                    batches = consumer.poll(timeout_ms=100, max_records=50)
                except KafkaError as error:
                    ledger.error(name, f"poll: {error!r}")
                    continue
                offsets = {}
                for tp, records in batches.items():
                    for r in records:
                        ledger.record(name, r.partition, r.offset, r.value)
                        offsets[tp] = OffsetAndMetadata(r.offset + 1, "", -1)
                if offsets:
                    try:
                        consumer.commit(offsets)
                    except KafkaError as error:
                        committed = {tp.partition: o.offset for tp, o in offsets.items()}
                        ledger.error(name, f"commit {committed} failed: {error!r}")
        finally:
            ledger.forget(name, "closing")
            consumer.close(autocommit=False)


MEMBER_CLASSES: dict[str, type[Member]] = {"ck": ConfluentMember, "kp": KafkaPythonMember}


class RemoteMember:
    """A member in a child process (``python group_clients.py ...``): `kill()` is a crash (SIGKILL),
    `stop()` a clean close (SIGTERM). Its events reach the ledger through its stdout."""

    def __init__(
        self,
        kind: str,
        name: str,
        ledger: Ledger,
        bootstrap: str,
        group: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.ledger = ledger
        ledger.unchecked.add(name)
        argv = [sys.executable, str(Path(__file__).resolve()), kind, name, bootstrap, group, ledger.topic]
        argv.append(json.dumps(dict(config or {})))
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=HERE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.stderr = b""
        self.reader = threading.Thread(target=self._read, name=f"remote-{name}", daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.err_reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                self.ledger.error(self.name, f"unparsable line {raw!r}")
                continue
            kind = event["event"]
            if kind == "assign":
                self.ledger.assigned(self.name, event["partitions"])
            elif kind in ("revoke", "lost"):
                self.ledger.revoked(self.name, event["partitions"], kind)
            elif kind == "record":
                value = None if event["value"] is None else event["value"].encode("latin-1")
                self.ledger.record(self.name, event["partition"], event["offset"], value)
            elif kind == "error":
                self.ledger.error(self.name, event["text"])
            else:
                self.ledger.note(f"{self.name} {kind}")

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def _finish(self, why: str, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout)
        self.reader.join(timeout)
        self.err_reader.join(timeout)
        self.ledger.forget(self.name, why)
        return code

    def kill(self) -> int:
        """SIGKILL: the member vanishes without leaving the group or committing."""
        self.process.send_signal(signal.SIGKILL)
        return self._finish("was killed (SIGKILL)", TIMEOUT)

    def stop(self, timeout: float = TIMEOUT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self._finish("stopped", timeout)
        if code != 0:
            raise GroupTestFailure(f"{self.name} exited with {code}: {self.stderr[-3000:]!r}")
        return code


class _StdoutLedger(Ledger):
    """The child's ledger: every report becomes a JSON line on stdout."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic, 0)
        self.out_lock = threading.Lock()

    def _emit(self, **event: Any) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        self._emit(event="assign", partitions=sorted(partitions))

    def revoked(self, member: str, partitions: Iterable[int], how: str = "revoked") -> None:
        self._emit(event="lost" if how == "lost" else "revoke", partitions=sorted(partitions))

    def record(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        text = None if value is None else value.decode("latin-1")
        self._emit(event="record", partition=partition, offset=offset, value=text)

    def error(self, member: str, text: str) -> None:
        self._emit(event="error", text=text)

    def forget(self, member: str, why: str) -> None:
        self._emit(event=why.replace(" ", "-"))


def _child_main(argv: list[str]) -> int:
    kind, name, bootstrap, group, topic, config = argv
    ledger = _StdoutLedger(topic)
    member = MEMBER_CLASSES[kind](name, ledger, bootstrap, group, json.loads(config))
    signal.signal(signal.SIGTERM, lambda *_: member.stopping.set())
    member.start()
    while not member.closed.wait(0.5):
        pass
    ledger._emit(event="closed")
    return 0


# ------------------------------------------------------------------------------------------- helpers


def produce(bootstrap: str, topic: str, partitions: int, count: int, tag: str) -> dict[Key, bytes]:
    """Produce ``count`` records round-robin over the partitions; returns (partition, offset) -> value
    from the delivery reports."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000})
    delivered: dict[Key, bytes] = {}
    failures: list[str] = []

    def report(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered[(message.partition(), message.offset())] = message.value()

    for i in range(count):
        producer.produce(topic, value=f"{tag}-{i}".encode(), partition=i % partitions, on_delivery=report)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT)
    if remaining or failures or len(delivered) != count:
        raise GroupTestFailure(f"produce: {remaining} undelivered, failures {failures[:5]}")
    return delivered


def produce_until(
    bootstrap: str, topic: str, partitions: int, tag: str, stop: threading.Event, limit: int = 3000
) -> dict[Key, bytes]:
    """Produce batches of 60 records until ``stop`` is set (or ``limit`` records); returns them."""
    produced: dict[Key, bytes] = {}
    batch = 0
    while not stop.is_set() and len(produced) < limit:
        produced |= produce(bootstrap, topic, partitions, 60, f"{tag}-{batch}")
        batch += 1
    return produced


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-probe"})
    try:
        return {
            p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=TIMEOUT)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def ck_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Committed offsets through confluent-kafka's committed() (OffsetFetch); -1001 when none."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([ck.TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT)
    finally:
        consumer.close()
    for tp in found:
        if tp.error is not None:
            raise GroupTestFailure(f"committed() of {group} partition {tp.partition}: {tp.error}")
    return {tp.partition: tp.offset for tp in found}


def kp_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """Committed offsets through kafka-python's committed() (OffsetFetch); None when none."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close(autocommit=False)


def verbose(ledger: Ledger, *notes: str) -> None:
    """With GROUP_TESTS_VERBOSE=1 in the environment, print the ledger's timeline (run pytest -s)."""
    if os.environ.get("GROUP_TESTS_VERBOSE"):
        print("\n".join(notes), ledger.report(), sep="\n")


def stop_all(members: Iterable[Member | RemoteMember]) -> None:
    """Stop every member (all of them, even when one fails), then raise the first failure."""
    first: BaseException | None = None
    for member in members:
        try:
            if isinstance(member, RemoteMember):
                if member.process.poll() is None:
                    member.stop()
            elif member.thread.is_alive():
                member.stop()
        except BaseException as error:
            first = first or error
    if first is not None:
        raise first


# ------------------------------------------------------------------------------------------- scenarios
# shared by test_groups_confluent.py and test_groups_kafka_python.py (kind "ck" or "kp")

PARTITIONS = 6
BROKER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    # the coordinator's commits and fetches with their offsets, quoted when a scenario fails
    "log.level.kctl.broker.group": "DEBUG",
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    from raw_kafka import create_topic

    topic = _unique("groups")
    code = create_topic(bootstrap, topic, partitions)
    if code != 0:
        raise GroupTestFailure(f"CreateTopics {topic}: error {code}")
    return topic


def describe_until_stable(
    bootstrap: str, group: str, ledger: Ledger, names: Iterable[str], timeout: float = TIMEOUT
) -> Any:
    """DescribeGroups through confluent-kafka's AdminClient until the group is Stable and its members'
    assignments (by client id) are what the members' own rebalance callbacks say; returns the
    description."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = sorted(names)
    deadline = time.monotonic() + timeout
    while True:
        description = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        described = {
            m.client_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
            for m in description.members
        }
        owned = {n: p for n, p in ledger.snapshot().items() if n in wanted}
        if description.state == ck.ConsumerGroupState.STABLE and described == owned:
            return description
        if time.monotonic() >= deadline:
            raise GroupTestFailure(
                f"DescribeGroups never matched the members' view: state {description.state}, "
                f"described {described}, members say {owned}\n{ledger.report()}"
            )
        time.sleep(0.05)  # polling interval, bounded by the deadline


@contextlib.contextmanager
def broker_log_on_failure(broker: Any, *keys: str) -> Iterator[None]:
    """Re-raise an AssertionError with the broker log lines that mention any of ``keys`` (a group
    id): what the coordinator did with the group is the first thing to read when a scenario fails."""
    try:
        yield
    except AssertionError as error:
        try:
            text = Path(broker.log_file).read_text(errors="replace")
        except OSError as read_error:
            text = f"(broker log unreadable: {read_error})"
        lines = [line for line in text.splitlines() if any(k in line for k in keys)][-150:]
        raise GroupTestFailure(f"{error}\nbroker log for {keys}:\n  " + "\n  ".join(lines)) from error


def clean_leave_scenario(broker: Any, kinds: Iterable[str]) -> None:
    """See _clean_leave; ``broker`` is a started BrokerProcess."""
    kinds = list(kinds)
    group = _unique(f"group-{'-'.join(sorted(set(kinds)))}")
    with broker_log_on_failure(broker, group):
        _clean_leave(broker.bootstrap, kinds, group)


def crash_scenario(broker: Any, kind: str) -> None:
    """See _crash; ``broker`` is a started BrokerProcess."""
    group = _unique(f"group-{kind}-crash")
    with broker_log_on_failure(broker, group):
        _crash(broker.bootstrap, kind, group)


def _clean_leave(bootstrap: str, kinds: list[str], group: str) -> None:
    """Three members (of the clients named by ``kinds``: "ck" confluent-kafka, "kp" kafka-python)
    settle: each partition owned once, 2/2/2, DescribeGroups agrees. The last leaves cleanly and its
    partitions move to the other two (3/3) well before any session timeout, while records keep
    coming; every record is consumed exactly once and the final commits equal the log end."""
    topic = _new_topic(bootstrap)
    ledger = Ledger(topic, PARTITIONS)
    session_s = 10.0
    config = {"ck": {"session.timeout.ms": 10000}, "kp": {"session_timeout_ms": 10000}}
    names = [f"{kind}-{i}" for i, kind in enumerate(kinds)]
    members = [
        MEMBER_CLASSES[kind](n, ledger, bootstrap, group, config[kind]).start()
        for n, kind in zip(names, kinds, strict=True)
    ]
    produced: dict[Key, bytes] = {}
    try:
        ledger.wait_settled(names)
        description = describe_until_stable(bootstrap, group, ledger, names)
        assert len(description.members) == 3, description.members
        assert len({m.member_id for m in description.members}) == 3
        assert description.partition_assignor == "range", description.partition_assignor
        ids = {m.client_id: m.member_id for m in description.members}
        for member in members:
            if member.member_id is not None:
                assert ids[member.name] == member.member_id, (ids, member.name, member.member_id)

        produced |= produce(bootstrap, topic, PARTITIONS, 60, "round-1")
        ledger.wait_consumed(produced)

        # records keep coming while the member leaves and the others are revoked and reassigned: they
        # commit what they processed in their revoke callbacks and the new owners resume right there
        leaver = members[2]
        left_behind = ledger.snapshot()[leaver.name]
        with ThreadPoolExecutor(1) as pool:
            stream_stop = threading.Event()
            streaming = pool.submit(produce_until, bootstrap, topic, PARTITIONS, "round-2", stream_stop)
            started = time.monotonic()
            try:
                leaver.stop()
                moved = ledger.wait_settled(names[:2])
            finally:
                stream_stop.set()
            produced |= streaming.result(timeout=TIMEOUT)
        assert moved - started < session_s / 2, (
            f"the leaver's partitions moved after {moved - started:.1f}s: LeaveGroup was not honoured, "
            f"the session expired\n{ledger.report()}"
        )
        now = ledger.snapshot()
        assert left_behind <= now[names[0]] | now[names[1]]
        describe_until_stable(bootstrap, group, ledger, names[:2])

        produced |= produce(bootstrap, topic, PARTITIONS, 60, "round-3")
        ledger.wait_consumed(produced)
    finally:
        stop_all(members)

    assert not ledger.errors, f"client errors: {ledger.errors}\n{ledger.report()}"
    assert not ledger.violations, f"{ledger.violations}\n{ledger.report()}"
    counts = ledger.consumed()
    duplicates = {k: c for k, c in counts.items() if c > 1}
    assert not duplicates, (
        f"consumed more than once: {sorted(duplicates)[:20]}\n"
        f"deliveries:\n  {ledger.deliveries(sorted(duplicates)[:12])}\n{ledger.report()}"
    )
    assert set(counts) == set(produced), sorted(set(counts) ^ set(produced))[:20]
    assert ledger.values() == produced
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    assert ck_committed(bootstrap, group, topic, PARTITIONS) == ends
    verbose(ledger)


def _crash(bootstrap: str, kind: str, group: str) -> None:
    """A member in a child process joins first (so it is the group's leader), two members in threads
    join it; the child is killed with SIGKILL and its partitions move to the others only once its
    session (3 s) has expired (a new leader assigns them); every record is consumed at least once,
    and only the killed member's partitions see any record twice."""
    session_ms, heartbeat_ms = 3000, 500
    topic = _new_topic(bootstrap)
    ledger = Ledger(topic, PARTITIONS)
    config = {
        "ck": {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms},
        "kp": {"session_timeout_ms": session_ms, "heartbeat_interval_ms": heartbeat_ms},
    }[kind]
    names = [f"{kind}-a", f"{kind}-b"]
    victim_name = f"{kind}-victim"
    victim = RemoteMember(kind, victim_name, ledger, bootstrap, group, config)
    members: list[Member | RemoteMember] = [victim]
    produced: dict[Key, bytes] = {}
    try:
        ledger.wait_settled([victim_name], timeout=30)  # the first member is the leader
        members += [MEMBER_CLASSES[kind](n, ledger, bootstrap, group, config).start() for n in names]
        ledger.wait_settled([*names, victim_name], timeout=30)
        produced |= produce(bootstrap, topic, PARTITIONS, 60, "before-crash")
        ledger.wait_consumed(produced)

        orphaned = ledger.snapshot()[victim_name]
        killed = time.monotonic()
        victim.kill()
        moved = ledger.wait_settled(names, timeout=session_ms / 1000 + 15)
        elapsed = moved - killed
        # the broker expires the member session_timeout after its last heartbeat, which was at most
        # one heartbeat interval before the kill
        assert elapsed >= (session_ms - heartbeat_ms) / 1000 - 0.25, (
            f"partitions moved {elapsed:.2f}s after the kill, before the session timeout\n{ledger.report()}"
        )
        now = ledger.snapshot()
        assert orphaned <= now[names[0]] | now[names[1]]

        produced |= produce(bootstrap, topic, PARTITIONS, 60, "after-crash")
        ledger.wait_consumed(produced)
    except AssertionError as error:
        if victim.process.poll() is not None and victim.process.returncode != -signal.SIGKILL:
            raise GroupTestFailure(
                f"{error}\nthe child member exited with {victim.process.returncode}: "
                f"{victim.stderr[-3000:]!r}"
            ) from error
        raise
    finally:
        stop_all(members)

    local_errors = [e for e in ledger.errors if not e.startswith(victim_name)]
    assert not local_errors, f"client errors: {local_errors}\n{ledger.report()}"
    assert not ledger.violations, f"{ledger.violations}\n{ledger.report()}"
    counts = ledger.consumed()
    assert set(counts) == set(produced), sorted(set(counts) ^ set(produced))[:20]
    assert ledger.values() == produced
    duplicated = {p for (p, _o), c in counts.items() if c > 1}
    assert duplicated <= orphaned, (
        f"records of partitions {sorted(duplicated - orphaned)} consumed twice, but only the killed "
        f"member's partitions {sorted(orphaned)} may be\n{ledger.report()}"
    )
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    assert ck_committed(bootstrap, group, topic, PARTITIONS) == ends
    verbose(ledger, f"partitions moved {elapsed:.2f}s after the kill")


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
