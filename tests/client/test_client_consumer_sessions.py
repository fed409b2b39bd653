"""kctl's consumer fetches over incremental fetch sessions (KIP-227), against real broker processes.

On one broker (its request log on): the consumer reads what confluent-kafka produced to many
partitions, and once it has read everything its fetches name no partition (the request log's
``request_bytes`` of its Fetches: a full one names every partition, an idle incremental one is its
fixed fields); a record on one partition makes the next fetch name that partition alone; a seek
re-reads; a paused partition is forgotten by the session (the broker no longer returns its new
records: small responses) and read on resume; a broker restart loses the session and the consumer
opens a new one with a full fetch; a session id the broker does not know (FETCH_SESSION_ID_NOT_FOUND)
is replaced by a new session without an error reaching the application; closing the consumer
closes its session on the broker (a raw Fetch on it is then FETCH_SESSION_ID_NOT_FOUND). On three
brokers: two group consumers read everything across a rebalance and a leader's restart."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import RawConnection, running_broker, unique

import kctl.protocol as kp
from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.client.consumer import Consumer, ConsumerRecord
from kctl.client.consumer.sessions import FetchSessions
from kctl.client.group.consumer import GroupConsumer
from kctl.protocol import ErrorCode
from kctl.protocol.messages.fetch import FetchRequest
from kctl.testing import BrokerProcess, LocalCluster, wait_for

pytestmark = pytest.mark.e2e

TIMEOUT = 30.0
PARTITIONS = 12
REQUEST_LOG = {"log.level.kctl.request": "DEBUG"}
# an incremental Fetch v12 naming no partition: the header with the client id and the fixed fields
IDLE_FETCH_MAX_BYTES = 120
# one partition in a Fetch v12: partition, leader epoch, fetch offset, last fetched epoch, log start
# offset, max bytes, tagged fields
PARTITION_BYTES = 33
SMALL_RESPONSE_MAX_BYTES = 200


def fetches(broker: BrokerProcess, client_id: str) -> list[tuple[int, int]]:
    """(request bytes, response bytes) of the Fetches from ``client_id`` the broker answered, in order."""
    pattern = re.compile(
        rf"api=Fetch version=\d+ correlation_id=\d+ client_id={re.escape(client_id)} "
        r".*?request_bytes=(\d+) response_bytes=(\d+)"
    )
    text = broker.log_file.read_text(errors="replace")
    return [(int(m.group(1)), int(m.group(2))) for m in pattern.finditer(text)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "1", **REQUEST_LOG}, "sessions") as process:
        yield process


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", {"num.partitions": "1", **REQUEST_LOG}).start()
    try:
        yield process
    finally:
        process.stop()


def create(bootstrap: str, name: str, partitions: int, replication: int = 1) -> str:
    with AdminClient(bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, replication, {})])
        assert result.ok, result
        admin.cluster.wait_for_topics([name], timeout=TIMEOUT)
    return name


def ck_produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """confluent-kafka, acks=all: (partition, value) pairs; fails unless all are delivered."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[Any] = []
    for partition, value in records:
        producer.produce(
            topic, value, partition=partition, on_delivery=lambda e, m: errors.append(e) if e else None
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "records still undelivered"
    assert not errors, errors


def consume(consumer: Consumer, expected: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    wait_for(
        lambda: records.extend(consumer.poll(0.2)) or len(records) >= expected, f"{expected} records", TIMEOUT
    )
    assert len(records) == expected, [(r.partition, r.offset) for r in records]
    return records


def idle_fetches(
    consumer: Consumer, broker: BrokerProcess, client_id: str, count: int
) -> list[tuple[int, int]]:
    """Poll (getting nothing) until the broker answered ``count`` more Fetches from the consumer."""
    start = len(fetches(broker, client_id))
    wait_for(
        lambda: consumer.poll(0.05) == [] and len(fetches(broker, client_id)) >= start + count,
        f"{count} more fetches",
        TIMEOUT,
    )
    return fetches(broker, client_id)[start:]


class RecordedSessions(FetchSessions):
    """The consumer's sessions, keeping (epoch, error code, session id) of each Fetch answered."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[int, int, int]] = []

    def response(self, node: int, wanted: Any, epoch: int, response: Any) -> bool:
        self.answers.append((epoch, response.error_code, response.session_id))
        return super().response(node, wanted, epoch, response)


def values(records: list[ConsumerRecord]) -> list[tuple[int, int, bytes | None]]:
    return [(r.partition, r.offset, r.value) for r in records]


def test_steady_state_fetches_name_only_changed_partitions_and_forget_paused_ones(
    broker: BrokerProcess,
) -> None:
    topic = create(broker.bootstrap, unique("sessions"), PARTITIONS)
    ck_produce(broker.bootstrap, topic, [(i % PARTITIONS, b"a%d" % i) for i in range(10 * PARTITIONS)])
    client_id = unique("sess-consumer")
    config = {"auto.offset.reset": "earliest", "client.id": client_id, "fetch.max.wait.ms": "50"}
    with Consumer(broker.bootstrap, config) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        records = consume(consumer, 10 * PARTITIONS)
        for p in range(PARTITIONS):
            mine = [r for r in records if r.partition == p]
            assert [(r.offset, r.value) for r in mine] == [
                (o, b"a%d" % (o * PARTITIONS + p)) for o in range(10)
            ]
        full = fetches(broker, client_id)[0][0]
        assert full > PARTITIONS * PARTITION_BYTES  # the first fetch names every partition

        idle_fetches(consumer, broker, client_id, 2)  # partitions that had responses buffered come back
        idle = idle_fetches(consumer, broker, client_id, 5)
        assert max(size for size, _ in idle) <= IDLE_FETCH_MAX_BYTES, idle

        # one partition gets a record: no fetch names more than that one partition
        start = len(fetches(broker, client_id))
        ck_produce(broker.bootstrap, topic, [(3, b"b0")])
        assert values(consume(consumer, 1)) == [(3, 10, b"b0")]
        idle_fetches(consumer, broker, client_id, 3)
        one = IDLE_FETCH_MAX_BYTES + len(topic) + 2 + PARTITION_BYTES
        assert max(size for size, _ in fetches(broker, client_id)[start:]) <= one

        # a seek re-reads from the new position
        consumer.seek(tps[5], 7)
        assert values(consume(consumer, 3)) == [(5, o, b"a%d" % (o * PARTITIONS + 5)) for o in range(7, 10)]

        # a paused partition leaves the session: its new records are not sent to the consumer
        consumer.pause([tps[0]])
        ck_produce(broker.bootstrap, topic, [(1, b"c0")])
        assert values(consume(consumer, 1)) == [(1, 10, b"c0")]
        ck_produce(broker.bootstrap, topic, [(0, b"p%d" % i + b"x" * 500) for i in range(5)])
        paused = idle_fetches(consumer, broker, client_id, 5)
        assert max(size for _, size in paused[1:]) <= SMALL_RESPONSE_MAX_BYTES, paused
        consumer.resume([tps[0]])
        assert values(consume(consumer, 5)) == [(0, 10 + i, b"p%d" % i + b"x" * 500) for i in range(5)]
        assert consumer.positions() == {tp: 11 if tp.partition in (0, 1, 3) else 10 for tp in tps} | {
            tps[0]: 15
        }


def test_a_session_the_broker_does_not_know_is_replaced_by_a_full_one(broker: BrokerProcess) -> None:
    topic = create(broker.bootstrap, unique("unknown-session"), 4)
    ck_produce(broker.bootstrap, topic, [(i % 4, b"a%d" % i) for i in range(20)])
    client_id = unique("sess-unknown")
    config = {"auto.offset.reset": "earliest", "client.id": client_id, "fetch.max.wait.ms": "50"}
    with Consumer(broker.bootstrap, config) as consumer:
        sessions = consumer._sessions = RecordedSessions()
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        assert len(consume(consumer, 20)) == 20
        idle_fetches(consumer, broker, client_id, 2)
        consumer._receive()  # the fetch in flight answered: the next one is sent on the tampered session
        assert not consumer._pending
        [handler] = sessions._handlers.values()
        opened = handler.session_id
        assert opened != 0
        handler.session_id = bogus = opened ^ 0x5A5A5A
        answered = len(sessions.answers)
        start = len(fetches(broker, client_id))
        ck_produce(broker.bootstrap, topic, [(i % 4, b"b%d" % i) for i in range(8)])
        assert sorted(values(consume(consumer, 8))) == sorted(
            (i % 4, 5 + i // 4, b"b%d" % i) for i in range(8)
        )
        # the broker said so, the consumer opened a new session with a full fetch
        assert sessions.answers[answered][1] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND, sessions.answers[
            answered:
        ]
        assert sessions.answers[answered + 1][:2] == (0, 0), sessions.answers[answered:]
        assert handler.session_id not in (0, bogus)
        assert max(size for size, _ in fetches(broker, client_id)[start:]) > 4 * PARTITION_BYTES  # a full one


def incremental_fetch(bootstrap: str, session_id: int, epoch: int) -> int:
    """The error code of an incremental Fetch naming no partition on a session (a raw connection)."""
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[],
        forgotten_topics_data=[],
    )
    with RawConnection(bootstrap) as conn:
        response = conn.request(kp.ApiKey.FETCH, 12, body)
    return int(response.error_code)


def test_close_ends_the_session_on_the_broker(broker: BrokerProcess) -> None:
    topic = create(broker.bootstrap, unique("close-session"), 2)
    ck_produce(broker.bootstrap, topic, [(i % 2, b"a%d" % i) for i in range(6)])
    consumer = Consumer(broker.bootstrap, {"auto.offset.reset": "earliest", "fetch.max.wait.ms": "50"})
    consumer.assign([TopicPartition(topic, p) for p in range(2)])
    assert len(consume(consumer, 6)) == 6
    [handler] = consumer._sessions._handlers.values()
    session_id, epoch = handler.session_id, handler.epoch
    assert session_id != 0 and epoch > 0
    # the session is open: a fetch at another epoch is told so (and the session stays)
    assert (
        incremental_fetch(broker.bootstrap, session_id, epoch + 1000) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    )
    consumer.close()
    assert (
        incremental_fetch(broker.bootstrap, session_id, epoch + 1000) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    )


def test_a_broker_restart_opens_a_new_session_with_a_full_fetch(own_broker: BrokerProcess) -> None:
    topic = create(own_broker.bootstrap, unique("restart"), 6)
    ck_produce(own_broker.bootstrap, topic, [(i % 6, b"a%d" % i) for i in range(30)])
    client_id = unique("sess-restart")
    config = {
        "auto.offset.reset": "earliest",
        "client.id": client_id,
        "fetch.max.wait.ms": "50",
        "retry.backoff.ms": "50",
    }
    with Consumer(own_broker.bootstrap, config) as consumer:
        sessions = consumer._sessions = RecordedSessions()
        consumer.assign([TopicPartition(topic, p) for p in range(6)])
        assert len(consume(consumer, 30)) == 30
        idle_fetches(consumer, own_broker, client_id, 2)
        answered = len(sessions.answers)
        old_session = sessions.answers[-1][2]
        assert sessions.answers[-1][0] > 0 and old_session != 0  # incremental fetches on a session
        own_broker.restart()
        ck_produce(own_broker.bootstrap, topic, [(i % 6, b"b%d" % i) for i in range(12)])
        got = consume(consumer, 12)
        assert sorted(values(got)) == sorted((i % 6, 5 + i // 6, b"b%d" % i) for i in range(12))
        # the first answer from the new broker is to a full fetch (epoch 0) opening a new session
        epoch, error_code, session_id = sessions.answers[answered]
        assert (epoch, error_code) == (0, 0) and session_id not in (0, old_session), sessions.answers[
            answered:
        ]
        idle_fetches(consumer, own_broker, client_id, 2)
        idle = idle_fetches(consumer, own_broker, client_id, 3)
        assert max(size for size, _ in idle) <= IDLE_FETCH_MAX_BYTES, idle


# ----------------------------------------------------------------------------------------- cluster


class Member:
    """A GroupConsumer polling in its own thread, keeping what it read."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        props = {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "200",
            "metadata.max.age.ms": "500",
            "fetch.max.wait.ms": "100",
            "retry.backoff.ms": "50",
        }
        self.consumer = GroupConsumer(bootstrap, props)
        self.topic = topic
        self.records: list[ConsumerRecord] = []
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.consumer.subscribe([self.topic])
            while not self._stop.is_set():
                got = self.consumer.poll(0.1)
                with self.lock:
                    self.records += got
        except BaseException as error:  # reported by the test
            self.error = error

    def read(self) -> list[ConsumerRecord]:
        with self.lock:
            return list(self.records)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT)
        self.consumer.close()


@pytest.fixture(scope="module")
def cluster(module_cluster_factory) -> LocalCluster:  # type: ignore[no-untyped-def]
    started: LocalCluster = module_cluster_factory(
        3, {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1"}
    )
    return started


def test_group_consumers_read_everything_across_a_rebalance_and_a_leader_restart(
    cluster: LocalCluster,
) -> None:
    bootstrap = cluster.bootstrap_servers
    topic = create(bootstrap, unique("group-sessions"), 6, 3)
    expected: set[tuple[int, int, bytes | None]] = set()
    sent = [0] * 6

    def produce(count: int, tag: bytes) -> None:
        batch = [(i % 6, tag + b"%d" % i) for i in range(count)]
        ck_produce(bootstrap, topic, batch)
        for partition, value in batch:
            expected.add((partition, sent[partition], value))
            sent[partition] += 1

    def read_all(members: list[Member]) -> None:
        def done() -> bool:
            for member in members:
                assert member.error is None, member.error
            return {v for m in members for v in values(m.read())} >= expected

        wait_for(done, f"{len(expected)} records", 60)

    produce(60, b"a")
    group = unique("group")
    first = Member(bootstrap, group, topic)
    members = [first]
    try:
        read_all(members)
        members.append(Member(bootstrap, group, topic))  # a rebalance
        produce(60, b"b")
        read_all(members)
        cluster.restart(2)  # its partitions move to other leaders, then it comes back
        produce(60, b"c")
        read_all(members)
        got = [v for m in members for v in values(m.read())]
        assert set(got) == expected  # nothing else, nothing altered
    finally:
        for member in members:
            member.stop()
