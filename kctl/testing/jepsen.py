"""A Jepsen-style checker for kill -9 (and SIGSTOP) under acks=all load: load generators that record
every acknowledged (partition, offset, value), a reader that reads a topic back, a checker, and the
faults (a nemesis) for one broker or a `LocalCluster`.

- `ConfluentLoad` (confluent-kafka / librdkafka) and `KctlLoad` (kctl's own producer): a background
  thread sending ``<writer>:<sequence>`` values (the value is the key too, so records spread over the
  partitions), acks=all and idempotence on, and recording each delivery report: `Ack` (partition,
  offset, value) or a failure. Values are never reused, so every value names one send.
- `read_topic`: every record (offset, value) of the partitions, from offset 0 to the high watermark.
- `check(acks, records)` → `Verdict`: the four properties, each with its count and first examples:
  *lost* (an acknowledged value read nowhere: acknowledged − read = ∅), *duplicates* (a value read
  more than once, which idempotence forbids), *reordered* (per partition, one writer's sequence
  numbers not increasing with the offset) and *offsets reused* (an acknowledged offset that holds
  another value, or two acknowledgements naming one offset).
- Faults: `kill_and_restart` (SIGKILL one broker, start it again on the same log directory),
  `kill_leader` (SIGKILL a partition's leader in a cluster, wait for a new one, restart the old one
  at once, wait for a full ISR) and `pause_leader` (SIGSTOP a leader
  past its session, wait for a new leader and for the writers to go on without it, SIGCONT).
- `Campaign`: runs faults one after another under the loads (each waits for every writer to make
  progress first, so faults land under load), then stops the writers, reads back, checks.

Used by tests/cluster/test_jepsen_kill.py (a short run in CI) and bench/bench_jepsen.py (hundreds of kills).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kctl.localcluster import BrokerProcess, LocalCluster
from kctl.testing.cluster_clients import read_partitions
from kctl.testing.cluster_view import ClusterView
from kctl.testing.verdict import CheckerVerdict


@dataclass(frozen=True)
class Ack:
    """An acknowledged record: where the producer's delivery report says it was written. ``offset``
    is None for an implicit acknowledgement: librdkafka reports a record whose own Produce answer it
    never got (the connection went, the request timed out) as delivered, offset unknown, once the
    broker acknowledged a later batch of the same idempotent producer (its sequence numbers prove
    the earlier one was written: ``rd_kafka_dr_implicit_ack``)."""

    partition: int
    offset: int | None
    value: str


def writer_and_sequence(value: str) -> tuple[str, int] | None:
    """``("w1", 42)`` for ``"w1:000000042"``; None for a value no load generator wrote."""
    writer, _, sequence = value.rpartition(":")
    if not writer or not sequence.isdigit():
        return None
    return writer, int(sequence)


# ---------------------------------------------------------------------------------------- loads


class Load(ABC):
    """One writer: sends ``<writer>:<n>`` for n = 0, 1, ... at ``rate_per_s`` from a thread, records
    every delivery report. Subclasses wrap one client library."""

    def __init__(self, bootstrap: str, topic: str, writer: str, *, rate_per_s: float = 300.0) -> None:
        if ":" in writer:
            raise ValueError(f"a writer name cannot contain ':': {writer!r}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.writer = writer
        self.rate_per_s = rate_per_s
        self.acked: list[Ack] = []
        self.acked_at: list[float] = []  # time.monotonic() of each acknowledgement, as ``acked``
        self.failed: list[str] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{writer}", daemon=True)

    @abstractmethod
    def _send(self, value: bytes) -> bool:
        """Queue one record; False when the client's buffer is full (try again after a poll)."""

    @abstractmethod
    def _poll(self, timeout: float) -> None:
        """Serve delivery reports (a no-op for clients that call back from their own thread)."""

    @abstractmethod
    def _flush(self, timeout: float) -> int:
        """Wait for every outstanding delivery report; how many are still outstanding."""

    @abstractmethod
    def _close(self) -> None: ...

    def _delivered(self, partition: int, offset: int | None, value: bytes) -> None:
        with self._lock:
            self.acked.append(Ack(partition, offset, value.decode()))
            self.acked_at.append(time.monotonic())

    def _failed(self, value: bytes, error: object) -> None:
        with self._lock:
            self.failed.append(f"{value.decode()}: {error}")

    def _run(self) -> None:
        try:
            self._send_paced()
        except Exception as error:  # a client that gave up: reported, and the writers stop progressing
            self._failed(b"-", f"the {self.writer} writer stopped: {error!r}")

    def _send_paced(self) -> None:
        interval = 1.0 / self.rate_per_s if self.rate_per_s > 0 else 0.0
        next_send = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.writer}:{self.sent:09d}".encode()
            if not self._send(value):
                self._poll(0.05)
                continue
            self.sent += 1
            self._poll(0)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)  # pacing the sends, not waiting for a state
            elif delay < -1.0:
                next_send = time.monotonic()  # after a stall: do not burst to catch up

    def start(self) -> Load:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self, flush_timeout: float = 120.0) -> None:
        """Stop sending, wait for the outstanding delivery reports, close the client."""
        self._stop.set()
        self._thread.join()
        remaining = self._flush(flush_timeout)
        if remaining:
            self._failed(b"-", f"{remaining} deliveries still outstanding after {flush_timeout:.0f}s")
        self._close()


PRODUCER_SETTINGS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "5",
}


class ConfluentLoad(Load):
    """The writer as confluent-kafka (librdkafka): idempotent, acks=all, a 5-minute message timeout."""

    def __init__(self, bootstrap: str, topic: str, writer: str, *, rate_per_s: float = 300.0,
                 config: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        super().__init__(bootstrap, topic, writer, rate_per_s=rate_per_s)
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                **PRODUCER_SETTINGS,
                "message.timeout.ms": 300000,
                "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.max.ms": 500,
                **(config or {}),
            }
        )

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None:
            self._failed(message.value(), error)
        else:
            self._delivered(message.partition(), message.offset(), message.value())

    def _send(self, value: bytes) -> bool:
        try:
            self.producer.produce(self.topic, value=value, key=value, on_delivery=self._on_delivery)
        except BufferError:
            return False
        return True

    def _poll(self, timeout: float) -> None:
        self.producer.poll(timeout)

    def _flush(self, timeout: float) -> int:
        return int(self.producer.flush(timeout))

    def _close(self) -> None:
        pass


class KctlLoad(Load):
    """The writer as kctl's own producer (kctl.client.producer): idempotent, acks=all."""

    def __init__(self, bootstrap: str, topic: str, writer: str, *, rate_per_s: float = 300.0,
                 config: Mapping[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(bootstrap, topic, writer, rate_per_s=rate_per_s)
        from kctl.client.producer import Producer

        self.producer = Producer(
            bootstrap,
            {**PRODUCER_SETTINGS, "delivery.timeout.ms": "300000", "max.block.ms": "1000", **(config or {})},
        )

    def _on_delivery(self, error: BaseException | None, metadata: Any, *, value: bytes) -> None:
        if error is not None:
            self._failed(value, error)
        else:
            self._delivered(metadata.partition, metadata.offset, value)

    def _send(self, value: bytes) -> bool:
        from kctl.client.errors import KafkaTimeoutError

        try:
            self.producer.send(
                self.topic, value, key=value, on_delivery=partial(self._on_delivery, value=value)
            )
        except KafkaTimeoutError:  # buffer.memory full for max.block.ms: back-pressure
            return False
        return True

    def _poll(self, timeout: float) -> None:
        pass

    def _flush(self, timeout: float) -> int:
        return int(self.producer.flush(timeout))

    def _close(self) -> None:
        self.producer.close(10)


def wait_for_progress(loads: Sequence[Load], records: int, *, timeout: float = 60.0) -> None:
    """Poll (with a deadline) until every writer has ``records`` more acknowledgements than now."""
    targets = [load.acked_count() + records for load in loads]
    deadline = time.monotonic() + timeout
    while any(load.acked_count() < target for load, target in zip(loads, targets, strict=True)):
        if time.monotonic() > deadline:
            state = ", ".join(
                f"{load.writer}: {load.acked_count()}/{target} acked, failures {load.failed[-3:]}"
                for load, target in zip(loads, targets, strict=True)
            )
            raise AssertionError(f"the writers made no progress in {timeout:.0f}s: {state}")
        time.sleep(0.05)


# --------------------------------------------------------------------------------------- reader


def read_topic(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 120.0
) -> dict[int, list[tuple[int, str]]]:
    """Every record (offset, value) of ``partitions`` partitions, from offset 0 to the high watermark."""
    return read_partitions(bootstrap, topic, list(range(partitions)), timeout=timeout)


# -------------------------------------------------------------------------------------- checker


@dataclass
class Verdict(CheckerVerdict):
    """What `check` found: counts and the first examples of each violation (kctl.testing.verdict)."""

    acknowledged: int = 0
    read: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    offsets_reused: int = 0
    acknowledged_without_offset: int = 0
    """Of ``acknowledged``, the implicit acknowledgements (`Ack`): each must be read, in its
    partition, once."""

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.offsets_reused)

    def summary(self) -> str:
        implicit = (
            f" ({self.acknowledged_without_offset} without offset)"
            if self.acknowledged_without_offset
            else ""
        )
        return (
            f"records acknowledged {self.acknowledged}{implicit}, read {self.read}, lost {self.lost}, "
            f"duplicates {self.duplicates}, reordered {self.reordered}, offsets reused {self.offsets_reused}"
        )

    def report(self) -> str:
        """The summary, then the examples of each violation (for an assertion message)."""
        return "\n".join([self.summary(), *self.example_lines()])


def check(
    acks: Iterable[Ack], records: Mapping[int, Sequence[tuple[int, str]]], *, idempotent: bool = True
) -> Verdict:
    """Check what the writers were told against what the topic holds.

    ``records``: per partition, (offset, value) in the order read. Records that were never
    acknowledged (sends that failed or were in doubt when a broker died) may or may not be there;
    they count for duplicates and order but are never "lost". Without ``idempotent`` a value read
    twice is allowed (a retried send may be written twice)."""
    verdict = Verdict()
    at: dict[tuple[int, int], str] = {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, rows in records.items():
        last_offset = -1
        last_sequence: dict[str, tuple[int, int]] = {}
        for offset, value in rows:
            verdict.read += 1
            if offset <= last_offset:
                verdict.note("reordered", f"partition {partition}: offset {offset} read after {last_offset}")
            last_offset = max(last_offset, offset)
            at[(partition, offset)] = value
            where[value].append((partition, offset))
            parsed = writer_and_sequence(value)
            if parsed is None:
                continue
            writer, sequence = parsed
            previous = last_sequence.get(writer)
            # the same sequence again is a duplicate (counted below), an earlier one a reordering
            if previous is not None and (
                sequence < previous[0] or (sequence == previous[0] and not idempotent)
            ):
                verdict.note(
                    "reordered",
                    f"partition {partition}: {value} at offset {offset} after "
                    f"{writer}:{previous[0]:09d} at offset {previous[1]}",
                )
            if previous is None or sequence > previous[0]:
                last_sequence[writer] = (sequence, offset)
    acked_at: dict[tuple[int, int], str] = {}
    for ack in acks:
        verdict.acknowledged += 1
        if ack.offset is None:  # an implicit acknowledgement: written, where unknown
            verdict.acknowledged_without_offset += 1
            if ack.value not in where:
                verdict.note(
                    "lost", f"{ack.value} acknowledged (offset unknown) in {ack.partition}, read nowhere"
                )
            elif all(partition != ack.partition for partition, _ in where[ack.value]):
                verdict.note(
                    "offsets_reused",
                    f"{ack.value} acknowledged in {ack.partition}, read at {where[ack.value][:3]}",
                )
            continue
        key = (ack.partition, ack.offset)
        other = acked_at.setdefault(key, ack.value)
        if other != ack.value:
            verdict.note(
                "offsets_reused", f"{ack.partition}/{ack.offset} acknowledged for {other} and {ack.value}"
            )
        if ack.value not in where:
            verdict.note("lost", f"{ack.value} acknowledged at {ack.partition}/{ack.offset}, read nowhere")
            continue
        found = at.get(key)
        if found != ack.value:
            verdict.note(
                "offsets_reused",
                f"{ack.value} acknowledged at {ack.partition}/{ack.offset}, which holds {found!r} "
                f"(the value was read at {where[ack.value][:3]})",
            )
    if idempotent:
        for value, count in Counter({v: len(places) for v, places in where.items()}).items():
            if count > 1:
                verdict.note("duplicates", f"{value} read {count} times, at {where[value][:5]}")
    return verdict


# --------------------------------------------------------------------------------------- faults


def kill_and_restart(broker: BrokerProcess) -> str:
    """SIGKILL ``broker`` and start it again (same port, same log directory)."""
    broker.kill()
    broker.start()
    return f"kill -9 broker {broker.broker_id}"


def kill_leader(cluster: LocalCluster, view: ClusterView, topic: str, partition: int, *,
                timeout: float = 60.0) -> str:  # fmt: skip
    """SIGKILL ``partition``'s leader, wait for another leader, restart the old one (it waits for
    its previous run's registration to expire itself), wait for a full ISR."""
    leader = view.wait_for_leader(topic, partition, timeout=timeout).leader
    cluster.kill(leader)
    view.wait_for_leader(topic, partition, not_in={leader}, timeout=timeout)
    cluster.restart(leader)
    view.wait_for_isr(topic, partition, set(view.assignment(topic)[partition]), timeout=timeout)
    return f"kill -9 broker {leader} (leader of {topic}/{partition})"


def pause_leader(cluster: LocalCluster, view: ClusterView, topic: str, partition: int,
                 loads: Sequence[Load], *, timeout: float = 60.0) -> str:  # fmt: skip
    """SIGSTOP ``partition``'s leader until another leader is elected (its ZooKeeper session expires)
    and every writer has made progress without it, then SIGCONT it and wait for a full ISR."""
    leader = view.wait_for_leader(topic, partition, timeout=timeout).leader
    broker = cluster.broker(leader)
    broker.pause()
    try:
        view.wait_for_leader(topic, partition, not_in={leader}, timeout=timeout)
        wait_for_progress(loads, 50, timeout=timeout)
    finally:
        broker.resume()
    for index in range(len(view.assignment(topic))):
        view.wait_for_isr(topic, index, set(view.assignment(topic)[index]), timeout=timeout)
    return f"kill -STOP broker {leader} (leader of {topic}/{partition}), then -CONT"


# ------------------------------------------------------------------------------------- campaign


Fault = Callable[[], str]


@dataclass
class Campaign:
    """Faults one after another under ``loads``; `finish` stops the writers, reads back and checks."""

    loads: Sequence[Load]
    progress: int = 100
    """Acknowledgements every writer must gain before each fault (and after the last one)."""
    progress_timeout: float = 120.0
    faults_done: list[str] = field(default_factory=list)
    fault_windows: list[tuple[float, float]] = field(default_factory=list)
    """(start, end) in time.monotonic() of each fault, as ``faults_done``."""

    def start(self) -> Campaign:
        for load in self.loads:
            load.start()
        return self

    def inject(self, fault: Fault, *, progress: int | None = None) -> str:
        """Wait until every writer has ``progress`` (default: `progress`) more acknowledgements, then
        run ``fault``; returns its description."""
        wait_for_progress(
            self.loads, self.progress if progress is None else progress, timeout=self.progress_timeout
        )
        started = time.monotonic()
        done = fault()
        self.faults_done.append(done)
        self.fault_windows.append((started, time.monotonic()))
        return done

    def unavailability(self, writer: str | None = None) -> list[tuple[str, float]]:
        """For each fault, the longest time one partition went without an acknowledgement (every
        writer's together, or only ``writer``'s) from the fault's start until the next fault or, for
        the last, until the writers stopped: how long the partitions it hit did not take writes (the
        others keep acknowledging, so counting every partition's acknowledgements together would
        hide them; a gap one writer has and the other has not is the client's)."""
        loads = self.loads if writer is None else [load for load in self.loads if load.writer == writer]
        by_partition: dict[int, list[float]] = {}
        for load in loads:
            for ack, at in zip(load.acked, load.acked_at, strict=True):
                by_partition.setdefault(ack.partition, []).append(at)
        for times in by_partition.values():
            times.sort()
        out: list[tuple[str, float]] = []
        for index, (done, (started, _)) in enumerate(zip(self.faults_done, self.fault_windows, strict=True)):
            until = self.fault_windows[index + 1][0] if index + 1 < len(self.fault_windows) else float("inf")
            worst = 0.0
            for times in by_partition.values():
                inside = times[bisect.bisect_left(times, started) : bisect.bisect_right(times, until)]
                if not inside:  # silent from the fault to the next one (or to the end: unknown)
                    worst = max(worst, until - started if until != float("inf") else 0.0)
                    continue
                edges = [started, *inside]
                worst = max(worst, max(later - earlier for earlier, later in itertools.pairwise(edges)))
            out.append((done, worst))
        return out

    def stop(self) -> None:
        for load in self.loads:
            load.stop()

    def finish(self, bootstrap: str, topic: str, partitions: int) -> Verdict:
        """Wait for progress after the last fault, stop the writers, read everything back, check."""
        try:
            wait_for_progress(self.loads, self.progress, timeout=self.progress_timeout)
        finally:
            self.stop()
        records = read_topic(bootstrap, topic, partitions)
        return check([ack for load in self.loads for ack in load.acked], records)

    def failures(self) -> list[str]:
        """Delivery failures the writers reported (not a violation, but a producer that gave up)."""
        return [failure for load in self.loads for failure in load.failed]
