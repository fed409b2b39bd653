"""Helpers and scenarios of the consumer-group tests: producing and reading back, committed offsets,
the broker properties the group tests run with, and the clean-leave and crash scenarios that the
confluent-kafka and kafka-python tests share. The members are in `group_members`, the ledger they
report to in `group_ledger` (both re-exported here).

Nothing here sleeps to synchronise: waits block on the ledger's condition variable with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from group_ledger import TIMEOUT, GroupTestFailure, Key, Ledger
from group_members import MEMBER_CLASSES, ConfluentMember, KafkaPythonMember, Member, RemoteMember

__all__ = [
    "MEMBER_CLASSES",
    "TIMEOUT",
    "ConfluentMember",
    "GroupTestFailure",
    "KafkaPythonMember",
    "Key",
    "Ledger",
    "Member",
    "RemoteMember",
]

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

