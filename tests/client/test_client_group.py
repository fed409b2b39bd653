"""kctl's group consumer (GroupConsumer / GroupMembership) against a real `kctl broker start`: groups
of three kctl consumers over a six-partition topic, members leaving and crashing, pattern
subscriptions, the cooperative protocol, static membership, commits, and a group shared with
confluent-kafka consumers.

Each member runs its own poll loop in a thread (a crashing member in a child process: this file is
also the child's script). Rebalance callbacks report to a `Ledger`: who owns which partition now
(a partition assigned while another member still owns it is a violation) and every record consumed.
Waits poll a condition until a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if __name__ != "__main__":
    from raw_kafka import running_broker, unique

    from kctl.testing import BrokerProcess

from kctl.client import AdminClient, TopicPartition
from kctl.client.group import CommitFailedError, GroupMembership
from kctl.client.group.consumer import GroupConsumer
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.testing import create_topic, wait_for

pytestmark = pytest.mark.timeout(180)

BROKER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
}
MEMBER_PROPERTIES = {
    "auto.offset.reset": "earliest",
    "session.timeout.ms": "3000",
    "heartbeat.interval.ms": "200",
    "metadata.max.age.ms": "500",
    "fetch.max.wait.ms": "100",
    "retry.backoff.ms": "50",
}
TIMEOUT = 30.0


# ------------------------------------------------------------------------------------------- ledger


class Ledger:
    """Who owns which partition, and every record consumed, as the members report them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owners: dict[TopicPartition, str] = {}
        self.records: list[tuple[str, TopicPartition, int]] = []
        self.violations: list[str] = []
        self.events: list[str] = []

    def assigned(self, member: str, partitions: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.events.append(f"{time.monotonic():.3f} {member} +{sorted(partitions)}")
            for tp in partitions:
                owner = self.owners.get(tp)
                if owner is not None and owner != member:
                    self.violations.append(f"{tp} assigned to {member} while {owner} owns it")
                self.owners[tp] = member

    def revoked(self, member: str, partitions: frozenset[TopicPartition], how: str = "-") -> None:
        with self.lock:
            self.events.append(f"{time.monotonic():.3f} {member} {how}{sorted(partitions)}")
            for tp in partitions:
                if self.owners.get(tp) == member:
                    del self.owners[tp]

    def consumed(self, member: str, records: list[Any]) -> None:
        with self.lock:
            self.records += [(member, TopicPartition(r.topic, r.partition), r.offset) for r in records]

    def owned_by(self) -> dict[str, set[TopicPartition]]:
        with self.lock:
            out: dict[str, set[TopicPartition]] = {}
            for tp, member in self.owners.items():
                out.setdefault(member, set()).add(tp)
            return out

    def counts(self) -> Counter[tuple[TopicPartition, int]]:
        with self.lock:
            return Counter((tp, offset) for _, tp, offset in self.records)

    def timeline(self) -> str:
        with self.lock:
            return "\n".join(self.events[-40:])


class Member:
    """One GroupConsumer polling in its own thread."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        name: str,
        ledger: Ledger,
        *,
        topics: list[str] | None = None,
        pattern: str | None = None,
        exclude: str | None = None,
        properties: dict[str, str] | None = None,
        manual_commit: bool = False,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.manual_commit = manual_commit
        props = {**MEMBER_PROPERTIES, "group.id": group, "client.id": name, **(properties or {})}
        if manual_commit:
            props["enable.auto.commit"] = "false"
        self.consumer = GroupConsumer(bootstrap, props)
        self.topics, self.pattern, self.exclude = topics or [], pattern, exclude
        self.assigns: list[frozenset[TopicPartition]] = []
        self.revokes: list[frozenset[TopicPartition]] = []
        self.losts: list[frozenset[TopicPartition]] = []
        self.error: BaseException | None = None
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def _on_assign(self, partitions: frozenset[TopicPartition]) -> None:
        self.assigns.append(partitions)
        self.ledger.assigned(self.name, partitions)

    def _on_revoke(self, partitions: frozenset[TopicPartition]) -> None:
        self.revokes.append(partitions)
        if self.manual_commit and partitions:
            self.consumer.commit({tp: o for tp, o in self.consumer.positions().items() if tp in partitions})
        self.ledger.revoked(self.name, partitions)

    def _on_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.losts.append(partitions)
        self.ledger.revoked(self.name, partitions, "lost")

    def _run(self) -> None:
        try:
            self.consumer.subscribe(
                self.topics,
                pattern=self.pattern,
                exclude=self.exclude,
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)  # a stuck application: no poll at all
                    continue
                records = self.consumer.poll(0.1)
                if records:
                    self.ledger.consumed(self.name, records)
                    if self.manual_commit:
                        with contextlib.suppress(CommitFailedError):
                            self.consumer.commit()
            self.consumer.close()
        except BaseException as error:  # reported by stop()
            self.error = error
            with contextlib.suppress(Exception):
                self.consumer.close()

    @property
    def generation(self) -> int:
        return self.consumer.generation_id

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=TIMEOUT)
        assert not self._thread.is_alive(), f"member {self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"member {self.name} failed") from self.error


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
    for i in range(start, start + count):
        producer.produce(topic, value=b"record-%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def all_partitions(topic: str, count: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(count)}


def split_evenly(ledger: Ledger, names: list[str], topic: str, partitions: int) -> bool:
    owned = ledger.owned_by()
    if set(owned) != set(names):
        return False
    every = [tp for name in names for tp in owned[name]]
    per = partitions // len(names)
    return sorted(every) == sorted(all_partitions(topic, partitions)) and all(
        len(owned[n]) == per for n in names
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "groups-kctl") as process:
        yield process


# ------------------------------------------------------------------------------------------- tests


def test_three_members_share_six_partitions_and_a_leaver_hands_over_exactly_once(
    broker: BrokerProcess,
) -> None:
    topic, group = unique("share"), unique("group")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 300, 6)
    ledger = Ledger()
    members = [Member(broker.bootstrap, group, f"m{i}", ledger, topics=[topic]).start() for i in range(3)]
    wait_for(
        lambda: split_evenly(ledger, ["m0", "m1", "m2"], topic, 6),
        "each member owning 2 partitions",
        describe=ledger.timeline,
    )
    wait_for(lambda: len(ledger.counts()) == 300, "the first 300 records")
    # the coordinator agrees with the members on who owns what
    with AdminClient(broker.bootstrap) as admin:
        from kctl.client.group.admin import GroupAdmin

        [described] = GroupAdmin(admin).describe_groups([group])
    assert described.state == "Stable" and described.protocol == "range"
    assert {m.client_id: set(m.assignment) for m in described.members} == ledger.owned_by()

    members[1].stop()  # a clean leave: commit, on_revoke, LeaveGroup
    wait_for(
        lambda: split_evenly(ledger, ["m0", "m2"], topic, 6),
        "m0 and m2 owning 3 partitions each",
        describe=ledger.timeline,
    )
    produce(broker.bootstrap, topic, 300, 6, start=300)
    wait_for(lambda: len(ledger.counts()) == 600, "all 600 records")
    for member in (members[0], members[2]):
        member.stop()
    counts = ledger.counts()
    assert len(counts) == 600 and set(counts.values()) == {1}, "every record exactly once"
    assert not ledger.violations, ledger.violations
    assert all(m.revokes for m in members), "on_revoke fired"
    # the positions were committed on the way out: the group resumes at the end
    membership = membership_for(broker.bootstrap, group)
    committed = membership.committed(all_partitions(topic, 6))
    membership.close()
    membership.cluster.close()
    assert {tp: c.offset for tp, c in committed.items() if c} == {tp: 100 for tp in all_partitions(topic, 6)}


def membership_for(bootstrap: str, group: str) -> GroupMembership:
    from kctl.client import ClusterClient

    return GroupMembership(ClusterClient(bootstrap), group)


def test_a_crashed_member_loses_its_partitions_after_the_session_timeout(broker: BrokerProcess) -> None:
    topic, group = unique("crash"), unique("group")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 120, 6)
    ledger = Ledger()
    members = [
        Member(broker.bootstrap, group, f"m{i}", ledger, topics=[topic], manual_commit=True).start()
        for i in range(2)
    ]
    child = ChildMember(broker.bootstrap, group, topic, "crasher", ledger)
    try:
        wait_for(
            lambda: split_evenly(ledger, ["m0", "m1", "crasher"], topic, 6),
            "three members with 2 each",
            describe=ledger.timeline,
        )
        wait_for(lambda: len(ledger.counts()) == 120, "the first 120 records", describe=ledger.timeline)
        taken = ledger.owned_by()["crasher"]
        started = time.monotonic()
        child.kill()  # no LeaveGroup: the coordinator notices after session.timeout.ms (3 s)
        wait_for(
            lambda: split_evenly(ledger, ["m0", "m1"], topic, 6),
            "the survivors taking over",
            describe=ledger.timeline,
        )
        assert time.monotonic() - started >= 2.0, "moved before the session timeout could have passed"
        for survivor in members:
            assert not survivor.losts
        assert taken <= set().union(*(set(a) for m in members for a in m.assigns))
        produce(broker.bootstrap, topic, 120, 6, start=120)
        wait_for(lambda: len(ledger.counts()) == 240, "all 240 records", describe=ledger.timeline)
    finally:
        child.kill()
        for member in members:
            member.stop()
    counts = ledger.counts()
    assert len(counts) == 240, "every record at least once"
    duplicated = {tp for (tp, _), n in counts.items() if n > 1}
    assert duplicated <= taken, "only the crashed member's uncommitted records come again"


class ChildMember:
    """A GroupConsumer in a child process (this file run as a script), reporting on its stdout."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, ledger: Ledger) -> None:
        self.name = name
        self.ledger = ledger
        props = json.dumps({**MEMBER_PROPERTIES, "enable.auto.commit": "false"})
        self.process = subprocess.Popen(
            [sys.executable, __file__, bootstrap, group, topic, name, props],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            parts = frozenset(TopicPartition(t, p) for t, p in event.get("partitions", []))
            if event["event"] == "assign":
                self.ledger.assigned(self.name, parts)
            elif event["event"] == "revoke":
                self.ledger.revoked(self.name, parts)
            elif event["event"] == "records":
                with self.ledger.lock:
                    self.ledger.records += [
                        (self.name, TopicPartition(t, p), o) for t, p, o in event["records"]
                    ]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)


def _child_main(bootstrap: str, group: str, topic: str, name: str, props: str) -> None:
    def emit(event: str, **fields: Any) -> None:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()

    consumer = GroupConsumer(bootstrap, {**json.loads(props), "group.id": group, "client.id": name})
    consumer.subscribe(
        [topic],
        on_assign=lambda parts: emit("assign", partitions=sorted(parts)),
        on_revoke=lambda parts: emit("revoke", partitions=sorted(parts)),
    )
    while True:
        records = consumer.poll(0.1)
        if records:
            emit("records", records=[(r.topic, r.partition, r.offset) for r in records])
            consumer.commit()


def test_pattern_subscription_picks_up_topics_created_later_and_skips_excluded(broker: BrokerProcess) -> None:
    prefix = unique("pat")
    group = unique("group")
    create_topic(broker.bootstrap, f"{prefix}-a", 2)
    create_topic(broker.bootstrap, f"{prefix}-skip", 2)
    ledger = Ledger()
    member = Member(
        broker.bootstrap, group, "m0", ledger, pattern=rf"{prefix}-.*", exclude=rf"{prefix}-skip"
    ).start()
    try:
        wait_for(lambda: ledger.owned_by().get("m0") == all_partitions(f"{prefix}-a", 2), "the first topic")
        create_topic(broker.bootstrap, f"{prefix}-b", 3)
        produce(broker.bootstrap, f"{prefix}-b", 30, 3)
        produce(broker.bootstrap, f"{prefix}-skip", 10, 2)
        wait_for(
            lambda: (
                ledger.owned_by().get("m0")
                == all_partitions(f"{prefix}-a", 2) | all_partitions(f"{prefix}-b", 3)
            ),
            "the topic created later",
            describe=ledger.timeline,
        )
        wait_for(lambda: len(ledger.counts()) == 30, "the later topic's records")
        assert member.consumer.subscription() == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        member.stop()
    assert all(tp.topic != f"{prefix}-skip" for tp, _ in ledger.counts())


def test_a_subscribed_topic_created_later_is_picked_up(broker: BrokerProcess) -> None:
    topic, group = unique("later"), unique("group")
    ledger = Ledger()
    member = Member(broker.bootstrap, group, "m0", ledger, topics=[topic]).start()
    try:
        wait_for(lambda: member.consumer.membership.generation_id > 0, "the first generation (no partitions)")
        assert member.consumer.assignment() == set()
        create_topic(broker.bootstrap, topic, 2)
        produce(broker.bootstrap, topic, 10, 2)
        wait_for(
            lambda: ledger.owned_by().get("m0") == all_partitions(topic, 2),
            "the new topic's partitions",
        )
        wait_for(lambda: len(ledger.counts()) == 10, "its records")
    finally:
        member.stop()


def test_cooperative_sticky_revokes_only_what_moves(broker: BrokerProcess) -> None:
    topic, group = unique("coop"), unique("group")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 60, 6)
    ledger = Ledger()
    props = {"partition.assignment.strategy": "cooperative-sticky"}
    first = [
        Member(broker.bootstrap, group, f"m{i}", ledger, topics=[topic], properties=props).start()
        for i in range(2)
    ]
    try:
        wait_for(lambda: split_evenly(ledger, ["m0", "m1"], topic, 6), "two members with 3 each")
        before = ledger.owned_by()
        revokes_before = [len(m.revokes) for m in first]
        third = Member(broker.bootstrap, group, "m2", ledger, topics=[topic], properties=props).start()
        first.append(third)
        wait_for(
            lambda: split_evenly(ledger, ["m0", "m1", "m2"], topic, 6),
            "three members with 2 each",
            describe=ledger.timeline,
        )
        after = ledger.owned_by()
        for name in ("m0", "m1"):
            assert after[name] <= before[name], "a member only gives up partitions"
            index = int(name[1])
            revoked = set().union(set(), *first[index].revokes[revokes_before[index] :])
            assert revoked == before[name] - after[name], "on_revoke got exactly what moved"
        wait_for(lambda: len(ledger.counts()) == 60, "all records")
    finally:
        for member in first:
            member.stop()
    assert not ledger.violations, ledger.violations
    assert set(ledger.counts().values()) == {1}


def test_static_member_restarts_without_a_rebalance(broker: BrokerProcess) -> None:
    topic, group = unique("static"), unique("group")
    create_topic(broker.bootstrap, topic, 4)
    ledger = Ledger()
    props = [{"group.instance.id": f"instance-{i}", "session.timeout.ms": "6000"} for i in range(2)]
    members = [
        Member(broker.bootstrap, group, f"m{i}", ledger, topics=[topic], properties=props[i]).start()
        for i in range(2)
    ]
    wait_for(lambda: split_evenly(ledger, ["m0", "m1"], topic, 4), "two static members with 2 each")
    generation = members[0].generation
    revokes = len(members[0].revokes)
    owned = ledger.owned_by()["m1"]
    members[1].stop()  # a static member does not leave the group on close
    ledger.assigned("m1", frozenset(owned))  # the ledger only: the partitions are still m1's
    restarted = Member(broker.bootstrap, group, "m1", ledger, topics=[topic], properties=props[1]).start()
    try:
        wait_for(lambda: restarted.assigns, "the restarted member's assignment")
        assert restarted.assigns[0] == owned
        assert members[0].generation == generation, "no new generation"
        assert len(members[0].revokes) == revokes, "no rebalance for m0"
    finally:
        members[0].stop()
        restarted.stop()


def test_a_member_that_stops_polling_loses_its_partitions_and_rejoins(broker: BrokerProcess) -> None:
    topic, group = unique("slow"), unique("group")
    create_topic(broker.bootstrap, topic, 4)
    ledger = Ledger()
    props = {"max.poll.interval.ms": "1500"}
    members = [
        Member(broker.bootstrap, group, f"m{i}", ledger, topics=[topic], properties=props).start()
        for i in range(2)
    ]
    try:
        wait_for(lambda: split_evenly(ledger, ["m0", "m1"], topic, 4), "two members with 2 each")
        held = ledger.owned_by()["m1"]
        members[1].paused.set()  # m1 stops polling: after 1.5 s it leaves the group
        wait_for(
            lambda: ledger.owned_by().get("m0") == all_partitions(topic, 4),
            "m0 taking everything",
            describe=ledger.timeline,
        )
        members[1].paused.clear()
        wait_for(lambda: members[1].losts, "on_lost in m1's next poll")
        assert members[1].losts[0] == held
        wait_for(
            lambda: split_evenly(ledger, ["m0", "m1"], topic, 4),
            "m1 back in the group",
            describe=ledger.timeline,
        )
    finally:
        for member in members:
            member.stop()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", BROKER_PROPERTIES).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("clean", [True, False], ids=["restart", "kill-9"])
def test_commits_sync_async_and_committed_offsets_survive_a_broker_restart(
    own_broker: BrokerProcess, clean: bool
) -> None:
    broker = own_broker
    topic, group = "restart-topic", "restart-group"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 20, 2)
    consumer = GroupConsumer(
        broker.bootstrap, {**MEMBER_PROPERTIES, "group.id": group, "enable.auto.commit": "false"}
    )
    consumer.subscribe([topic])
    records: list[Any] = []
    wait_for(lambda: records.extend(consumer.poll(0.2)) or len(records) >= 20, "20 records")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert consumer.commit({tp0: 7}) == {tp0: OffsetAndMetadata(7)}
    done: list[Any] = []
    consumer.commit(
        {tp1: 4}, asynchronous=True, callback=lambda offsets, error: done.append((offsets, error))
    )
    wait_for(lambda: consumer.poll(0.05) is not None and done, "the async commit callback")
    assert done[0][1] is None
    assert {tp: c.offset for tp, c in consumer.committed([tp0, tp1]).items()} == {tp0: 7, tp1: 4}
    consumer.close()

    broker.restart(clean=clean)
    consumer = GroupConsumer(broker.bootstrap, {**MEMBER_PROPERTIES, "group.id": group})
    try:
        committed = consumer.membership.committed([tp0, tp1], timeout=TIMEOUT)
        assert {tp: c.offset for tp, c in committed.items()} == {tp0: 7, tp1: 4}
        consumer.subscribe([topic])
        again: list[Any] = []
        wait_for(lambda: again.extend(consumer.poll(0.2)) or len(again) >= 9, "the records after the commits")
        assert sorted((r.partition, r.offset) for r in again) == [(0, o) for o in range(7, 10)] + [
            (1, o) for o in range(4, 10)
        ]
    finally:
        consumer.close()


def test_auto_commit_commits_what_poll_returned(broker: BrokerProcess) -> None:
    topic, group = unique("auto"), unique("group")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 20, 2)
    props = {**MEMBER_PROPERTIES, "group.id": group, "auto.commit.interval.ms": "100"}
    consumer = GroupConsumer(broker.bootstrap, props)
    observer = membership_for(broker.bootstrap, group)
    try:
        consumer.subscribe([topic])
        records: list[Any] = []
        wait_for(lambda: records.extend(consumer.poll(0.1)) or len(records) >= 20, "20 records")
        tps = all_partitions(topic, 2)

        def committed_now() -> dict[TopicPartition, int]:
            consumer.poll(0.05)  # auto commit runs in poll
            return {tp: c.offset for tp, c in observer.committed(tps).items() if c}

        wait_for(lambda: committed_now() == {tp: 10 for tp in tps}, "the positions auto-committed")
    finally:
        consumer.close()
        observer.close()
        observer.cluster.close()


def test_a_commit_after_losing_the_partitions_fails(broker: BrokerProcess) -> None:
    topic, group = unique("fence"), unique("group")
    create_topic(broker.bootstrap, topic, 2)
    props = {
        **MEMBER_PROPERTIES,
        "group.id": group,
        "enable.auto.commit": "false",
        "max.poll.interval.ms": "1000",
    }
    consumer = GroupConsumer(broker.bootstrap, props)
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(0.1) is not None and len(consumer.assignment()) == 2, "the assignment")
    wait_for(
        lambda: consumer.membership.generation_id < 0,
        "the member leaving after max.poll.interval.ms",
        timeout=10,
    )
    with pytest.raises(CommitFailedError):
        consumer.commit({TopicPartition(topic, 0): 1})
    consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_group_of_kctl_and_confluent_kafka_consumers(broker: BrokerProcess, strategy: str) -> None:
    import confluent_kafka as ck

    topic, group = unique("mixed"), unique("group")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 120, 6)
    ledger = Ledger()
    cooperative = strategy == "cooperative-sticky"
    kctl_members = [
        Member(
            broker.bootstrap,
            group,
            f"kctl{i}",
            ledger,
            topics=[topic],
            properties={"partition.assignment.strategy": strategy},
        ).start()
        for i in range(2)
    ]

    def assigned(consumer: Any, parts: list[Any]) -> None:
        ledger.assigned("confluent", frozenset(TopicPartition(p.topic, p.partition) for p in parts))
        if cooperative:
            consumer.incremental_assign(parts)

    def revoked(consumer: Any, parts: list[Any]) -> None:
        ledger.revoked("confluent", frozenset(TopicPartition(p.topic, p.partition) for p in parts))
        if cooperative:
            consumer.incremental_unassign(parts)

    stop = threading.Event()
    errors: list[str] = []

    def run_confluent() -> None:
        consumer = ck.Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "client.id": "confluent",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "partition.assignment.strategy": strategy,
            }
        )
        consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                errors.append(str(message.error()))
                continue
            with ledger.lock:
                ledger.records.append(
                    ("confluent", TopicPartition(message.topic(), message.partition()), message.offset())
                )
        consumer.close()

    thread = threading.Thread(target=run_confluent, daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: split_evenly(ledger, ["kctl0", "kctl1", "confluent"], topic, 6),
            "2 partitions each",
            describe=ledger.timeline,
        )
        wait_for(lambda: len(ledger.counts()) == 120, "all records", describe=ledger.timeline)
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT)
        for member in kctl_members:
            member.stop()
    assert not errors, errors
    assert not ledger.violations, ledger.violations


def coordinator_view(bootstrap: str, group: str) -> dict[str, set[TopicPartition]] | None:
    """Each member's assignment as the coordinator has it (DescribeGroups), once the group is Stable."""
    from kctl.client.group.admin import GroupAdmin

    with AdminClient(bootstrap) as admin:
        [described] = GroupAdmin(admin).describe_groups([group])
    if described.state != "Stable":
        return None
    return {m.client_id: set(m.assignment) for m in described.members}


@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky"])
def test_a_group_of_kctl_and_kafka_python_consumers(broker: BrokerProcess, strategy: str) -> None:
    import kafka
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignor = {
        "range": RangePartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[strategy]
    topic, group = unique("kp"), unique("group")
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 120, 6)
    ledger = Ledger()
    props = {"partition.assignment.strategy": strategy}
    kctl_members = [
        Member(broker.bootstrap, group, f"kctl{i}", ledger, topics=[topic], properties=props).start()
        for i in range(2)
    ]
    stop = threading.Event()
    failures: list[BaseException] = []

    def run_kafka_python() -> None:
        try:
            consumer = kafka.KafkaConsumer(
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                client_id="kafka-python",
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=200,
                partition_assignment_strategy=[assignor],
            )
            consumer.subscribe([topic])
            while not stop.is_set():
                for tp, records in consumer.poll(100).items():
                    with ledger.lock:
                        ledger.records += [
                            ("kafka-python", TopicPartition(tp.topic, tp.partition), r.offset)
                            for r in records
                        ]
            consumer.close()
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=run_kafka_python, daemon=True)
    thread.start()
    try:

        def shared_evenly() -> bool:
            view = coordinator_view(broker.bootstrap, group)
            if view is None or set(view) != {"kctl0", "kctl1", "kafka-python"}:
                return False
            every = [tp for parts in view.values() for tp in parts]
            return sorted(every) == sorted(all_partitions(topic, 6)) and all(
                len(p) == 2 for p in view.values()
            )

        wait_for(shared_evenly, "the coordinator showing 2 partitions per member", describe=ledger.timeline)
        wait_for(lambda: len(ledger.counts()) == 120, "all records", describe=ledger.timeline)
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT)
        for member in kctl_members:
            member.stop()
    assert not failures, failures
    assert not ledger.violations, ledger.violations


if __name__ == "__main__":
    _child_main(*sys.argv[1:])
