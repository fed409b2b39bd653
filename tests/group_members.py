"""Consumer-group members for the group tests (split from group_clients): confluent-kafka and
kafka-python consumers running in threads, or in a child process a test can SIGKILL (`RemoteMember`),
reporting to a `group_ledger.Ledger`.

Members process a record, then commit it synchronously before their next poll (and a confluent-kafka
member commits what it still holds in its revoke callback), so with clean shutdowns every record is
consumed exactly once; a member killed with SIGKILL leaves its partitions at its last commit.

Run as a script, this module is the child-process member:

    python group_members.py ck|kp NAME BOOTSTRAP GROUP TOPIC CONFIG_JSON

printing one JSON line per event on stdout (``assign``, ``revoke``, ``lost``, ``record``, ``error``,
``closed``); SIGTERM makes it leave the group cleanly.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from group_ledger import TIMEOUT, GroupTestFailure, Ledger, _StdoutLedger

HERE = Path(__file__).resolve().parent

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




if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
