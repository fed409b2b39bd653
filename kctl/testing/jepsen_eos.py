"""The Jepsen-style exactly-once checker (issue 27 §4): transactional read-process-write copiers
under SIGKILL of brokers, coordinators and copiers, then a check of the committed output.

- The input topic holds numbered records ``000000042`` (record i in partition i % partitions),
  written by `EosCampaign` in chunks between faults with kctl's idempotent acks=all producer.
- `Copiers`: K copier processes (kctl.testing.jepsen_eos_copier), slot k copying the input partitions
  p with p % K == k to the same output partitions in transactions, offsets sent to each
  transaction for one shared group; a supervisor thread restarts a copier that died (SIGKILL or an
  error) with the same ``transactional.id``. Each copier logs its transactions' outcomes.
- The nemesis (`EosCampaign.run`, a seeded thread): SIGKILL and restart of a random broker, of the
  transaction coordinator of a random copier's id, of the group coordinator, or SIGKILL of a copier.
- `check_eos`: every input record exactly once in the read_committed output (*lost*,
  *duplicates*), no record of a transaction its copier saw aborted there (*aborted_visible*), per
  output partition the input numbers increasing (*order_violations*, also a record in another
  partition than its input's), and how many aborted records read_uncommitted shows (so the check is
  not vacuous). `EosVerdict.report()` prints it all, with the kills by kind.

Used by tests/cluster/test_jepsen_eos.py (a short run in CI) and ``bench/bench_jepsen.py --workload
eos`` (hundreds of kills).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kctl.broker.group.records import partition_for_group
from kctl.broker.transaction.records import partition_for_transactional_id
from kctl.client.consumer import Consumer
from kctl.client.group import GroupConsumer
from kctl.client.producer import Producer
from kctl.client.types import TopicPartition
from kctl.localcluster import LocalCluster
from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen_eos_copier import transactional_id
from kctl.testing.verdict import CheckerVerdict

INTERNAL_PARTITIONS = 10
EOS_CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
    "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
"""The 3-broker cluster's properties: RF 3 / min ISR 2 internal topics of a few partitions."""

KINDS = ("broker", "transaction coordinator", "group coordinator", "copier")


# -------------------------------------------------------------------------------------- checker


@dataclass
class EosVerdict(CheckerVerdict):
    """What `check_eos` found: counts and the first examples of each violation (kctl.testing.verdict)."""

    records: int = 0
    read_committed: int = 0
    lost: int = 0
    duplicates: int = 0
    aborted_visible: int = 0
    order_violations: int = 0
    aborted_uncommitted: int = 0
    """Records of aborted transactions read_uncommitted shows (> 0: the check is not vacuous)."""
    committed_txns: int = 0
    aborted_txns: int = 0
    kills: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.aborted_visible or self.order_violations)

    def summary(self) -> str:
        return (
            f"records {self.records}, read_committed {self.read_committed}, lost {self.lost}, "
            f"duplicates {self.duplicates}, aborted-visible {self.aborted_visible}, order violations "
            f"{self.order_violations}; transactions committed {self.committed_txns}, aborted "
            f"{self.aborted_txns} (aborted records read_uncommitted shows {self.aborted_uncommitted})"
        )

    def report(self) -> str:
        kills = ", ".join(f"{kind} {count}" for kind, count in sorted(self.kills.items())) or "none"
        return "\n".join([f"kills: {kills}", self.summary(), *self.example_lines()])


def input_value(number: int) -> str:
    return f"{number:09d}"


def read_outcomes(logs: Sequence[Path]) -> dict[str, str]:
    """Transaction name → "committed" | "aborted", from the copiers' logs."""
    outcomes: dict[str, str] = {}
    for path in logs:
        if path.exists():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                if "txn" in entry:
                    outcomes[entry["txn"]] = entry["outcome"]
    return outcomes


def check_eos(
    records: int,
    partitions: int,
    committed: Mapping[int, Sequence[str]],
    uncommitted: Mapping[int, Sequence[str]],
    outcomes: Mapping[str, str],
) -> EosVerdict:
    """Check the output topic against an input of ``records`` numbered records over ``partitions``.

    ``committed``/``uncommitted``: per output partition, the values read_committed and
    read_uncommitted consumers read (``<input value>|<transaction>``), in offset order;
    ``outcomes``: what each copier was told about its transactions. A transaction a copier never
    heard the end of (killed in between) may have gone either way: its records are judged only by
    exactly-once and order."""
    verdict = EosVerdict(records=records)
    verdict.committed_txns = sum(1 for o in outcomes.values() if o == "committed")
    verdict.aborted_txns = sum(1 for o in outcomes.values() if o == "aborted")
    seen: Counter[int] = Counter()
    for partition, values in committed.items():
        last = -1
        for value in values:
            verdict.read_committed += 1
            number_text, _, txn = value.partition("|")
            if not number_text.isdigit():
                verdict.note("order_violations", f"partition {partition}: {value!r} is no copied record")
                continue
            number = int(number_text)
            seen[number] += 1
            if outcomes.get(txn) == "aborted":
                verdict.note("aborted_visible", f"partition {partition}: {value} (its transaction aborted)")
            if number % partitions != partition:
                verdict.note("order_violations", f"{value} in partition {partition}, its input's is "
                              f"{number % partitions}")  # fmt: skip
            elif number < last:
                verdict.note("order_violations", f"partition {partition}: {value} after {last:09d}")
            last = max(last, number)
    for number in range(records):
        if seen[number] == 0:
            verdict.note("lost", f"{input_value(number)} read nowhere")
        elif seen[number] > 1:
            verdict.note("duplicates", f"{input_value(number)} read {seen[number]} times")
    for number in sorted(set(seen) - set(range(records))):
        verdict.note("duplicates", f"{input_value(number)} was never an input record")
    verdict.aborted_uncommitted = sum(
        1 for values in uncommitted.values() for v in values if outcomes.get(v.partition("|")[2]) == "aborted"
    )
    return verdict


def read_output(bootstrap: str, topic: str, partitions: int, isolation: str, *,
                timeout: float = 120.0) -> dict[int, list[str]]:  # fmt: skip
    """Every value of the topic's partitions up to their end offsets (the LSO for read_committed)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap, {"isolation.level": isolation, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: the end offsets {ends} not reached in {timeout:.0f}s")
            for record in consumer.poll(0.5):
                got[record.partition].append((record.offset, (record.value or b"").decode()))
    return {p: [value for _, value in sorted(rows)] for p, rows in got.items()}


# -------------------------------------------------------------------------------------- copiers


class Copiers:
    """K copier processes, restarted (same slot, same transactional.id) whenever one dies, until
    each has exited 0 (it reached the input's end after the stop file appeared)."""

    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, group: str, partitions: int,
                 count: int, directory: Path, *, seed: int = 17, abort_ratio: float = 0.2,
                 sabotage: bool = False) -> None:  # fmt: skip
        self.directory = directory
        self.stop_file = directory / "stop"
        self.logs = [directory / f"copier-{slot}.jsonl" for slot in range(count)]
        common = [sys.executable, "-m", "kctl.testing.jepsen_eos_copier", "--bootstrap", bootstrap,
                  "--input", input_topic, "--output", output_topic, "--group", group, "--seed", str(seed),
                  "--stop-file", str(self.stop_file), "--abort-ratio", str(abort_ratio),
                  *(["--sabotage"] if sabotage else [])]  # fmt: skip
        self.commands = [self._command(common, slot, partitions, count) for slot in range(count)]
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * count
        self.done = [False] * count
        self.restarts = 0
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="eos-copiers", daemon=True)

    def _command(self, common: list[str], slot: int, partitions: int, count: int) -> list[str]:
        owned = ",".join(str(p) for p in range(partitions) if p % count == slot)
        return [*common, "--slot", str(slot), "--log", str(self.logs[slot]), "--partitions", owned]

    def start(self) -> Copiers:
        with self._lock:
            for slot in range(len(self.commands)):
                self._spawn(slot)
        self._thread.start()
        return self

    def _spawn(self, slot: int) -> None:
        with open(self.directory / f"copier-{slot}.stderr", "ab") as stderr:
            command = self.commands[slot]
            self.processes[slot] = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=stderr)

    def _supervise(self) -> None:
        while not self._halt.wait(0.1):
            with self._lock:
                for slot, process in enumerate(self.processes):
                    if process is None or self.done[slot] or process.poll() is None:
                        continue
                    if process.returncode == 0:
                        self.done[slot] = True
                    else:
                        self.restarts += 1
                        self._spawn(slot)

    def kill(self, slot: int) -> str:
        """SIGKILL copier ``slot`` (the supervisor starts it again)."""
        with self._lock:
            process = self.processes[slot]
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        return f"kill -9 copier {slot}"

    def committed_records(self) -> int:
        """Records in the transactions the copiers were told were committed."""
        total = 0
        for path in self.logs:
            if path.exists():
                for line in path.read_text().splitlines():
                    entry = json.loads(line)
                    total += entry["records"] if entry.get("outcome") == "committed" else 0
        return total

    def finish(self, timeout: float) -> None:
        """Tell the copiers the input is complete, wait until every one exited 0."""
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        while not all(self.done):
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"copiers not done in {timeout:.0f}s: {self.errors()[-5:]}")
            time.sleep(0.1)
        self.stop()

    def errors(self) -> list[str]:
        out: list[str] = []
        for path in self.logs:
            if path.exists():
                out += [line for line in path.read_text().splitlines() if '"error"' in line]
        return out

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


# ------------------------------------------------------------------------------------- campaign


@dataclass
class EosCampaign:
    """The whole run on a 3-broker `LocalCluster`: input chunks between faults, the copiers, the
    seeded nemesis, then `check_eos`."""

    cluster: LocalCluster
    view: ClusterView
    directory: Path
    records: int = 3000
    partitions: int = 6
    copiers: int = 3
    faults: int = 4
    seed: int = 17
    sabotage: bool = False
    kinds: Sequence[str] = KINDS
    input_topic: str = "eos-input"
    output_topic: str = "eos-output"
    group: str = "eos-copiers"
    faults_done: list[str] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    copier_restarts: int = 0

    def _fill(self, producer: Producer, start: int, stop: int) -> None:
        for number in range(start, stop):
            producer.send(self.input_topic, input_value(number), partition=number % self.partitions)
        if producer.flush(180):
            raise AssertionError(f"input records {start}..{stop} not acknowledged in 180 s")

    def _wait_for_copies(self, target: int, copiers: Copiers, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while copiers.committed_records() < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"copiers committed {copiers.committed_records()}/{target} "
                                     f"records in {timeout:.0f}s: {copiers.errors()[-5:]}")  # fmt: skip
            time.sleep(0.1)

    def _kill_broker(self, broker_id: int, kind: str) -> str:
        self.cluster.kill(broker_id)
        self.cluster.restart(broker_id)
        for topic in (self.input_topic, self.output_topic):
            self.view.wait_for_full_isr(topic, self.partitions, timeout=90)
        self.kills[kind] += 1
        return f"kill -9 broker {broker_id} ({kind})"

    def _fault(self, rng: random.Random, copiers: Copiers) -> str:
        kind = rng.choice(self.kinds)
        if kind == "copier":
            self.kills[kind] += 1
            return copiers.kill(rng.randrange(self.copiers))
        if kind == "transaction coordinator":
            tid = transactional_id(rng.randrange(self.copiers))
            partition = partition_for_transactional_id(tid, INTERNAL_PARTITIONS)
            leader = self.view.wait_for_leader("__transaction_state", partition, timeout=60).leader
        elif kind == "group coordinator":
            partition = partition_for_group(self.group, INTERNAL_PARTITIONS)
            leader = self.view.wait_for_leader("__consumer_offsets", partition, timeout=60).leader
        else:
            leader = rng.choice(sorted(self.cluster.brokers))
        return self._kill_broker(leader, kind)

    def run(self, *, log: bool = False) -> EosVerdict:
        from kctl.testing.cluster_clients import create_topic

        bootstrap = self.cluster.bootstrap_servers
        for topic in (self.input_topic, self.output_topic):
            create_topic(bootstrap, topic, self.partitions, 3, {"min.insync.replicas": "2"})
            self.view.wait_for_full_isr(topic, self.partitions, timeout=60)
        rng = random.Random(self.seed)
        chunks = self.faults + 1
        bounds = [self.records * i // chunks for i in range(chunks + 1)]
        producer = Producer(bootstrap, {"acks": "all", "enable.idempotence": "true", "linger.ms": "5",
                                        "delivery.timeout.ms": "180000"})  # fmt: skip
        copiers = Copiers(bootstrap, self.input_topic, self.output_topic, self.group, self.partitions,
                          self.copiers, self.directory, seed=self.seed, sabotage=self.sabotage)  # fmt: skip
        nemesis_error: list[BaseException] = []

        def nemesis() -> None:  # chunk i, wait until part of it is copied, fault i
            try:
                for index in range(self.faults):
                    self._fill(producer, bounds[index], bounds[index + 1])
                    midway = (bounds[index] + bounds[index + 1]) // 2
                    self._wait_for_copies(midway if not self.sabotage else bounds[index] // 2, copiers)
                    done = self._fault(rng, copiers)
                    self.faults_done.append(done)
                    if log:
                        print(f"  {index + 1}/{self.faults} {done}", file=sys.stderr, flush=True)
                self._fill(producer, bounds[-2], bounds[-1])
            except BaseException as error:  # reported by run()
                nemesis_error.append(error)

        copiers.start()
        thread = threading.Thread(target=nemesis, name="eos-nemesis", daemon=True)
        try:
            thread.start()
            thread.join()
            if nemesis_error:
                raise nemesis_error[0]
            copiers.finish(timeout=300)
        finally:
            copiers.stop()
            producer.close(10)
        self._check_group_reached_end(bootstrap)
        outcomes = read_outcomes(copiers.logs)
        verdict = check_eos(
            self.records,
            self.partitions,
            read_output(bootstrap, self.output_topic, self.partitions, "read_committed"),
            read_output(bootstrap, self.output_topic, self.partitions, "read_uncommitted"),
            outcomes,
        )
        verdict.kills = self.kills
        self.copier_restarts = copiers.restarts
        return verdict

    def _check_group_reached_end(self, bootstrap: str) -> None:
        tps = [TopicPartition(self.input_topic, p) for p in range(self.partitions)]
        consumer = GroupConsumer(bootstrap, {"group.id": self.group})
        try:
            ends = consumer.end_offsets(tps)
            committed = consumer.committed(tps, timeout=60)
        finally:
            consumer.close()
        behind = {tp.partition: (c.offset if c else None, ends[tp]) for tp, c in committed.items()
                  if c is None or c.offset < ends[tp]}  # fmt: skip
        if behind:
            raise AssertionError(f"the group's committed offsets did not reach the input's end: {behind}")
