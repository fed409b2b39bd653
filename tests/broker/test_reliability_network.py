"""Reliability of the broker's network and metadata paths under resource exhaustion (issue 17), on
real sockets against real `kctl broker start` processes:

- a CreateTopics of thousands of partitions does not freeze the broker (other connections are
  answered meanwhile, SIGTERM stops it cleanly), one request may ask for at most 10,000 partitions
  (POLICY_VIOLATION, as Kafka), and the embedded registry writes its file once per request;
- long-polling fetches of clients that went away are cancelled (the broker's parked-fetch gauge, in
  its log, drops to 0) and ``fetch.max.wait.ms`` caps what a fetch may ask;
- a frame's announced size allocates nothing until its bytes arrive (the broker's RSS, from /proc),
  ``queued.max.request.bytes`` bounds what is buffered, idle connections are closed after
  ``connections.max.idle.ms``, ``max.connections`` / ``max.connections.per.ip`` are honoured;
- a full disk: FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and SIGTERM stops the broker
  cleanly (exit 0).

Nothing sleeps to synchronise: waits block on a socket with a timeout or poll until a deadline.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raw_kafka import (
    RawConnection,
    api_versions,
    assert_broker_healthy,
    create_topic,
    metadata,
    produce,
    record_batch,
    unique,
)

import kctl.protocol as kp
from kctl.broker.config import BrokerConfig
from kctl.broker.controller.controller import Controller
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.topics import TopicAdmin
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from kctl.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.testing import BrokerProcess, wait_for
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import BrokerRegistration

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
POLICY_VIOLATION = 44
#: a request on an otherwise idle broker is answered within this, whatever else the broker is doing
PROBE_DEADLINE = 5.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("reliability") / "data").start()
    try:
        yield broker
    finally:
        broker.stop()


def _create_topics_body(topics: dict[str, int]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=[], configs=[])
            for name, n in topics.items()
        ],
        timeout_ms=120_000,
        validate_only=False,
    )


def _partition_count(broker: BrokerProcess, topic: str) -> int:
    with RawConnection(broker.bootstrap) as conn:
        [entry] = metadata(conn, [topic]).topics
    return len(entry.partitions) if entry.error_code == NONE else -1


# ------------------------------------------------------------------------------ one large CreateTopics


def test_a_large_create_topics_leaves_the_broker_answering(shared: BrokerProcess) -> None:
    name = unique("wide")
    with (
        RawConnection(shared.bootstrap, timeout=120) as creator,
        RawConnection(shared.bootstrap, timeout=PROBE_DEADLINE) as prober,
    ):
        header = creator.header(kp.ApiKey.CREATE_TOPICS, 5)
        creator.send(kp.encode_request(header, _create_topics_body({name: 1000})))
        probes = 0
        while not select.select([creator.sock], [], [], 0)[0]:
            # each probe is answered within the deadline (recv_frame fails the test otherwise)
            metadata(prober, [name]) if probes % 2 else metadata(prober, [])
            probes += 1
            if probes > 100_000:
                pytest.fail("the CreateTopics response never came")
        [result] = kp.decode_response(header, creator.recv_frame(120))[1].topics
    assert result.error_code == NONE, result
    assert probes >= 1
    assert _partition_count(shared, name) == 1000
    assert_broker_healthy(shared)


def test_more_than_10000_partitions_in_one_request_is_policy_violation(shared: BrokerProcess) -> None:
    one, two, small = unique("huge"), unique("half"), unique("small")
    with RawConnection(shared.bootstrap, timeout=PROBE_DEADLINE) as conn:
        response = conn.request(kp.ApiKey.CREATE_TOPICS, 5, _create_topics_body({one: 26_626}))
        assert [(t.name, t.error_code) for t in response.topics] == [(one, POLICY_VIOLATION)]
        assert "Excessively large number of partitions" in response.topics[0].error_message
        # the limit is on the request: 5,000 + 5,001 (+ 1) fails for every topic in it
        response = conn.request(
            kp.ApiKey.CREATE_TOPICS, 5, _create_topics_body({two: 5000, small: 1, one: 5001})
        )
        assert {t.error_code for t in response.topics} == {POLICY_VIOLATION}
        created = conn.request(kp.ApiKey.CREATE_TOPICS, 5, _create_topics_body({small: 1}))
        assert created.topics[0].error_code == NONE
        grow = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=small, count=10_002, assignments=None)],
            timeout_ms=10_000,
            validate_only=False,
        )
        [result] = conn.request(kp.ApiKey.CREATE_PARTITIONS, 3, grow).results
        assert result.error_code == POLICY_VIOLATION, result
    for topic in (one, two):
        assert _partition_count(shared, topic) == -1
    assert _partition_count(shared, small) == 1
    assert_broker_healthy(shared)


def test_sigterm_during_a_large_create_topics_stops_the_broker_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with RawConnection(broker.bootstrap, timeout=60) as creator:
            header = creator.header(kp.ApiKey.CREATE_TOPICS, 5)
            creator.send(kp.encode_request(header, _create_topics_body({unique("doomed"): 10_000})))
            # the broker is creating logs: a probe on another connection shows it has started
            wait_for(lambda: any((broker.data_dir).glob("doomed-*_0")), "the first log created", 10)
            assert broker.process is not None
            broker.process.send_signal(signal.SIGTERM)
            assert broker.process.wait(timeout=60) == 0, broker.log_tail()
    finally:
        broker.stop()
    assert "Traceback" not in broker.log_file.read_text(errors="replace")


def embedded_admin(registry: EmbeddedRegistry, tmp_path: Path, passes: list[int] | None = None) -> TopicAdmin:
    """Broker 0's topic administration on ``registry``, with its controller making the first
    states; each controller pass appends to ``passes``."""
    registry.register_broker(BrokerRegistration(broker_id=0, host="127.0.0.1", port=9092))
    controller = Controller(0, registry)
    controller.process({"controller"})
    cache = MetadataCache(registry)
    cache.refresh()

    def initialize() -> None:
        if passes is not None:
            passes.append(1)
        controller.process({"topics"})

    return TopicAdmin(
        BrokerConfig({"log.dirs": str(tmp_path)}), registry, cache, 0, initialize_partitions=initialize
    )


def test_the_embedded_registry_writes_once_per_create(tmp_path: Path) -> None:
    """The controller writes first partition states 500 at a time; a create is still one write."""
    with EmbeddedRegistry(tmp_path) as registry:
        admin = embedded_admin(registry, tmp_path)
        writes = []
        before = registry.writes
        admin.create_topic("many", 1200, 1)
        writes.append(registry.writes - before)
        before = registry.writes
        admin.create_partitions("many", 2500)
        writes.append(registry.writes - before)
        assert writes == [1, 1]
        assert len(registry.partition_states("many")) == 2500
    with EmbeddedRegistry(tmp_path) as reopened:  # and what was written is complete
        assert len(reopened.partition_states("many")) == 2500
        assert len(reopened.topics()["many"].assignment) == 2500


def test_partitions_added_to_several_topics_run_the_controller_once(tmp_path: Path) -> None:
    """CreatePartitions of several topics writes them all, then runs the controller's pass over
    every partition state once and refreshes once: on a cluster of 240 topics that pass took 1.3 s,
    and one per topic held a 9-topic request past librdkafka's 6.5 s (its 0081). A topic that
    cannot grow gets its own error; the others grow."""
    with EmbeddedRegistry(tmp_path) as registry:
        passes: list[int] = []
        admin = embedded_admin(registry, tmp_path, passes)
        for name in ("a", "b", "c"):
            admin.create_topic(name, 1, 1)
        passes.clear()
        plans = [admin.plan_partitions(name, 3, None) for name in ("a", "b", "c")]
        registry.add_partitions("b", {1: (0,)})  # b grew meanwhile: its plan no longer fits
        outcomes = admin.commit_partitions_of(plans)
        codes = [o.code if o is not None else None for o in outcomes]
        assert codes == [None, ErrorCode.INVALID_PARTITIONS, None]
        assert passes == [1]
        assert {name: len(registry.partition_states(name)) for name in "abc"} == {"a": 3, "b": 2, "c": 3}


# ------------------------------------------------------------------------------ orphaned long polls


class _DebugBroker(BrokerProcess):
    """A broker logging at DEBUG (the parked-fetch gauge is a DEBUG line)."""

    def argv(self) -> list[str]:
        return [*super().argv(), "--log-level", "DEBUG"]


_PARKED = re.compile(rb"(\d+) fetch\(es\) parked")


def _parked(broker: BrokerProcess) -> int:
    """The broker's parked-fetch gauge: the count in its last park/unpark log line."""
    counts = _PARKED.findall(broker.log_file.read_bytes())
    return int(counts[-1]) if counts else 0


def _long_poll(topic: str, max_wait_ms: int = 0x7FFFFFFF) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=0x7FFFFFFF,
        max_bytes=0x7FFFFFFF,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=0x7FFFFFFF)],
            )
        ],
        forgotten_topics_data=[],
    )


@pytest.fixture(scope="module")
def debug_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("debug")
    broker = _DebugBroker(directory / "data").start()
    try:
        yield broker
    finally:
        broker.stop()


def test_orphaned_long_polls_are_cancelled(debug_broker: BrokerProcess) -> None:
    broker = debug_broker
    topic = unique("orphans")
    assert create_topic(broker.bootstrap, topic) == NONE
    clients = 150
    connections = [RawConnection(broker.bootstrap) for _ in range(clients)]
    try:
        for i, conn in enumerate(connections):
            # below the cap: parked until the cap, unless cancelled first
            body = _long_poll(topic, max_wait_ms=0x7FFFFFFF)
            conn.send(kp.encode_request(conn.header(kp.ApiKey.FETCH, 12), body))
            if i % 2:  # half of them reset the connection, half close it
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        wait_for(lambda: _parked(broker) == clients, "every fetch parked", 10)
    finally:
        for conn in connections:
            conn.close()
    wait_for(lambda: _parked(broker) == 0, "the orphaned fetches cancelled", 10)
    assert produce(broker.bootstrap, topic, 0, record_batch(3)).error_code == NONE
    assert_broker_healthy(broker)


def test_max_wait_is_capped_at_fetch_wait_max_ms(broker_factory: Any) -> None:
    capped = broker_factory({"fetch.wait.max.ms": "400"})
    topic = unique("capped")
    assert create_topic(capped.bootstrap, topic) == NONE
    with RawConnection(capped.bootstrap, timeout=PROBE_DEADLINE) as conn:
        # asks to wait 24 days for 2 GiB: answered empty once fetch.wait.max.ms (400 ms) passed
        response = conn.request(kp.ApiKey.FETCH, 12, _long_poll(topic))
    [part] = response.responses[0].partitions
    assert (part.error_code, bytes(part.records)) == (NONE, b"")


# ------------------------------------------------------------------------------ frames and connections


def _rss(broker: BrokerProcess) -> int:
    """The broker process's resident set size in bytes (VmRSS from /proc)."""
    for line in Path(f"/proc/{broker.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _fds(broker: BrokerProcess) -> int:
    return len(list(Path(f"/proc/{broker.pid}/fd").iterdir()))


def _padded_api_versions(conn: RawConnection, size: int) -> tuple[kp.RequestHeader, bytes]:
    """An ApiVersions v0 request frame of exactly ``4 + size`` bytes (the broker ignores trailing
    bytes of a request body)."""
    header = conn.header(kp.ApiKey.API_VERSIONS, 0)
    request = kp.encode_request(header, ApiVersionsRequest())
    body = request[4:]
    return header, struct.pack(">i", size) + body + bytes(size - len(body))


def _probe(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap, timeout=PROBE_DEADLINE) as conn:
        assert api_versions(conn).error_code == NONE


def test_an_announced_frame_size_allocates_nothing_until_its_bytes_arrive(shared: BrokerProcess) -> None:
    before = _rss(shared)
    announced = 100 * 1024 * 1024 - 1  # just under socket.request.max.bytes
    connections = [RawConnection(shared.bootstrap) for _ in range(5)]
    try:
        for conn in connections:  # the size and 300 KiB of the frame (a large frame), then nothing
            conn.send(struct.pack(">i", announced) + bytes(300 * 1024))
        _probe(shared)  # the broker has read what came before the probe's connection
        wait_for(lambda: _fds(shared) >= 5, "the connections accepted", 10)
        grown = _rss(shared) - before
        # 5 x 100 MiB announced; what arrived is 1.5 MiB (the buffers start at 2 MiB each)
        assert grown < 64 * 1024 * 1024, f"RSS grew by {grown >> 20} MiB"
    finally:
        for conn in connections:
            conn.close()
    assert_broker_healthy(shared)


def test_many_idle_connections_cost_little(shared: BrokerProcess) -> None:
    """2,000 idle clients once held 140 MB: each connection's receive buffer starts small."""
    before = _rss(shared)
    connections = [RawConnection(shared.bootstrap) for _ in range(500)]
    try:
        for conn in connections:
            assert api_versions(conn).error_code == NONE
        grown = _rss(shared) - before
        assert grown < 16 * 1024 * 1024, f"500 idle connections: RSS grew by {grown >> 20} MiB"
        _probe(shared)
    finally:
        for conn in connections:
            conn.close()


def test_a_slow_sender_stalls_only_itself(shared: BrokerProcess) -> None:
    with RawConnection(shared.bootstrap) as slow:
        header, frame = _padded_api_versions(slow, 600 * 1024)
        pieces = [frame[:2], frame[2:100], frame[100:200_000], frame[200_000:]]
        for piece in pieces:
            slow.send(piece)
            _probe(shared)  # others are served while the frame is half received
        response = kp.decode_response(header, slow.recv_frame())[1]
        assert response.error_code == NONE


def test_queued_max_request_bytes_bounds_what_is_buffered(broker_factory: Any) -> None:
    broker = broker_factory({"queued.max.request.bytes": str(2 * 1024 * 1024)})
    with RawConnection(broker.bootstrap) as first, RawConnection(broker.bootstrap) as second:
        header_a, frame_a = _padded_api_versions(first, 1536 * 1024)
        header_b, frame_b = _padded_api_versions(second, 1024 * 1024)
        first.send(frame_a[: len(frame_a) // 2])  # 1.5 MiB reserved, half of it received
        _probe(broker)
        second.send(frame_b)  # does not fit in the 2 MiB: not read until the first is handled
        second.sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            second.sock.recv(1)
        _probe(broker)  # small requests still pass
        first.send(frame_a[len(frame_a) // 2 :])
        assert kp.decode_response(header_a, first.recv_frame())[1].error_code == NONE
        assert kp.decode_response(header_b, second.recv_frame())[1].error_code == NONE


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker_factory: Any) -> None:
    broker = broker_factory({"connections.max.idle.ms": "300"})
    idle = [RawConnection(broker.bootstrap) for _ in range(50)]
    half_sent = RawConnection(broker.bootstrap)
    half_sent.send(struct.pack(">i", 1000) + b"\0\x12")  # a frame begun, never finished
    try:
        assert all(conn.closed_by_peer(timeout=10) for conn in idle)
        assert half_sent.closed_by_peer(timeout=10)
    finally:
        for conn in [*idle, half_sent]:
            conn.close()
    assert_broker_healthy(broker)


def _from(broker: BrokerProcess, source: str) -> RawConnection:
    """A RawConnection from the local address ``source`` (any 127.0.0.0/8 address)."""
    conn = RawConnection.__new__(RawConnection)
    conn.sock = socket.create_connection(
        ("127.0.0.1", broker.port), timeout=PROBE_DEADLINE, source_address=(source, 0)
    )
    conn.client_id, conn._correlation, conn._buffer = "limits", 0, bytearray()
    return conn


def test_max_connections_and_max_connections_per_ip(broker_factory: Any) -> None:
    broker = broker_factory({"max.connections": "4", "max.connections.per.ip": "2"})
    kept = [_from(broker, "127.0.0.2"), _from(broker, "127.0.0.2"), _from(broker, "127.0.0.3")]
    try:
        for conn in kept:
            assert api_versions(conn).error_code == NONE
        third = _from(broker, "127.0.0.2")  # a third from one address
        assert third.closed_by_peer(timeout=PROBE_DEADLINE)
        third.close()
        kept.append(_from(broker, "127.0.0.3"))
        assert api_versions(kept[-1]).error_code == NONE
        fifth = _from(broker, "127.0.0.4")  # a fifth in all
        assert fifth.closed_by_peer(timeout=PROBE_DEADLINE)
        fifth.close()
        kept.pop().close()  # room again once one goes
        again = wait_for(lambda: _admitted(broker), "a connection admitted again", 10)
        again.close()
    finally:
        for conn in kept:
            conn.close()
    log = broker.log_file.read_text(errors="replace")
    assert "max.connections.per.ip (2) reached for 127.0.0.2" in log
    assert "max.connections (4) reached" in log


def _admitted(broker: BrokerProcess) -> RawConnection | None:
    conn = _from(broker, "127.0.0.5")
    try:
        api_versions(conn)
    except (ConnectionError, OSError):
        conn.close()
        return None
    return conn


# ------------------------------------------------------------------------------ disk full


@contextlib.contextmanager
def _tmpfs(directory: Path, size: str) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def _fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` to the last byte; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, bytes(size)):
                    pass
    finally:
        os.close(fd)
    return filler


def _find_coordinator(conn: RawConnection, group: str) -> Any:
    return conn.request(kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))


def test_a_full_disk_answers_coordinator_not_available_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "8m") as disk:
        broker = BrokerProcess(disk / "data", log_file=tmp_path / "broker.log").start()
        try:
            filler = _fill(disk)
            with RawConnection(broker.bootstrap) as conn:
                # __consumer_offsets cannot be created: the group's coordinator is not available (yet)
                answer = _find_coordinator(conn, "on-a-full-disk")
                assert answer.error_code == COORDINATOR_NOT_AVAILABLE, answer
                assert api_versions(conn).error_code == NONE  # the connection is still open
                assert_broker_healthy(broker)
            assert broker.process is not None
            broker.process.send_signal(signal.SIGTERM)  # while the disk is still full
            code = broker.process.wait(timeout=60)
            log = (tmp_path / "broker.log").read_text(errors="replace")
            assert code == 0, log[-3000:]
            assert " ERROR " not in log and "Traceback" not in log, log[-3000:]
            filler.unlink()
            broker.start()  # space again: the coordinator comes
            with RawConnection(broker.bootstrap) as conn:
                answer = wait_for(
                    lambda: (a := _find_coordinator(conn, "on-a-full-disk")).error_code == NONE and a,
                    "the coordinator",
                    10,
                )
                assert answer.node_id == 0
        finally:
            broker.stop()
