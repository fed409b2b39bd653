#!/usr/bin/env python3
"""Broker benchmark (issue 3, section 7): produce and consume throughput and end-to-end latency, beside
the machine's own limits (sequential write to the same filesystem, loopback TCP) measured in the same run.

Prints its figures; asserts nothing. The load generator runs in this process, the broker in its own
(``python -m kctl broker start``, a fresh log directory per case); on a small machine they compete for
the same cores, so the raw generator is kept cheap: Produce and Fetch requests are encoded once with
``kctl.protocol`` and replayed over raw sockets, a few in flight per connection, with only each
response's size and correlation id looked at. Around each measurement the broker's CPU is read from
``/proc/<pid>/stat`` (utime + stime): "rec/CPU-s" is records per second of broker CPU; "brk%",
"gen%" and "oth%" are the broker's, this process's and the rest of the machine's CPU (``/proc/stat``)
over the measurement, in % of one core — other work on a shared machine shows up there.

Sections: limits (sequential os.write, page cache and fsync; loopback TCP with sendall and with
sendfile), produce (raw replay over 1 and 4 connections; confluent-kafka's Producer), consume (a
preloaded log read with raw Fetch requests and with confluent-kafka's Consumer), latency
(confluent-kafka producer at a fixed rate to a consumer), then the issue's targets beside what this run
reached. ``--profile DIR`` runs every broker under cProfile (``bench/broker_profiled.py``: switched on
by a signal for each measurement window only) and prints the broker's hottest functions after each
line; the figures are then slowed down by the profiler and are not the ones to quote. ``--metrics``
starts every broker with ``metrics.listener`` and scrapes its ``/metrics`` from a thread of this
process every ``--scrape-interval`` seconds (default 1; Prometheus' default is 15) while it runs: the
figures beside a run without it are the cost of metrics (issue 26). ``--metrics-ab`` measures that
cost in one command: each produce line and each raw consume line is run with metrics off and on back to
back, ``--repeat`` rounds (default 3) with the order swapped every round (off-on, on-off, ...), and
prints both medians, every round's on/off ratio of rec/s and rec/CPU-s, and their medians (the target
of issue 26: within 3%); rdkafka consume and latency are not run twice. For example:

    python bench/bench_broker.py --quick --only produce,consume --metrics-ab --repeat 5

Usage: python bench/bench_broker.py [--quick] [--only limits,produce,consume,latency] [--profile DIR]
       [--metrics [--scrape-interval S] | --metrics-ab]"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import multiprocessing
import os
import pstats
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import kctl.protocol as kp
from kctl.common.topic_partition import TopicPartition
from kctl.log.naming import partition_dir_name
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder

PRODUCE_VERSION = 9
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 5
PARTITIONS = 4  # of every topic (num.partitions); raw connection i produces to partition i
FETCH_MAX_BYTES = 50 * 1024 * 1024
PARTITION_MAX_BYTES = 10 * 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MB = 1e6
MIB = 1 << 20
_INT32 = struct.Struct(">i")
_SIZE_AND_ID = struct.Struct(">ii")
_STAMP = struct.Struct(">qq")  # latency records: sequence (-1: end of run), time.perf_counter_ns() at send

PRODUCE_CASES = (  # (name, record size, records per batch)
    ("100 B records, batches of 100", 100, 100),
    ("1 KiB records, batches of 100", 1024, 100),
    ("1 KiB records, ~1 MiB batches", 1024, 1000),
)
READ_CASE = "read the preloaded log"


@dataclass(frozen=True)
class Sizes:
    produce_seconds: float  # per produce case, which stops earlier once produce_bytes were appended
    produce_bytes: int  # also the volume of each sequential-write measurement
    loopback_bytes: int  # per loopback measurement
    log_bytes: int  # preloaded for the consume section
    read_passes: int  # raw reads of the whole log per measurement
    latency_seconds: float
    repeat: int  # measurements of each machine limit and of each produce line (median shown)
    latency_rate: int = 1000


FULL = Sizes(
    produce_seconds=5.0,
    produce_bytes=1 << 30,
    loopback_bytes=2 << 30,
    log_bytes=10**9,
    read_passes=3,
    latency_seconds=20.0,
    repeat=3,
)
QUICK = Sizes(
    produce_seconds=1.0,
    produce_bytes=128 << 20,
    loopback_bytes=256 << 20,
    log_bytes=128 * 10**6,
    read_passes=2,
    latency_seconds=3.0,
    repeat=1,
)


# ----------------------------------------------------------------------------------------- CPU, broker


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def machine_busy_seconds() -> float:
    """CPU seconds spent by the whole machine (all cores, every process), from /proc/stat."""
    with open("/proc/stat", "rb") as file:
        ticks = [int(value) for value in file.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLOCK_TICKS  # all but idle and iowait


class BrokerProcess:
    """A broker in its own process on a fresh log directory, optionally under cProfile (--profile)."""

    def __init__(
        self, base: Path, name: str, profile_dir: Path | None, scrape_interval: float | None = None
    ) -> None:
        self.name = name
        self.log_dir = base / f"broker-{name}"
        self.log_dir.mkdir(parents=True)
        self.profile_dir = profile_dir
        self._profile_control = base / f"broker-{name}.profile-control"
        if profile_dir is None:
            command = [sys.executable, "-m", "kctl"]
        else:
            command = [
                sys.executable,
                str(Path(__file__).with_name("broker_profiled.py")),
                str(self._profile_control),
            ]
        command += [
            "broker", "start",
            "-X", "listeners=PLAINTEXT://127.0.0.1:0",
            "-X", f"log.dirs={self.log_dir}",
            "-X", f"num.partitions={PARTITIONS}",
        ]  # fmt: skip
        if scrape_interval is not None:
            command += ["-X", "metrics.listener=http://127.0.0.1:0"]
        self.stderr_path = base / f"broker-{name}.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line:
            self.process.wait(10)
            raise RuntimeError(f"broker did not start: {self.stderr_path.read_text()[-2000:]}")
        host, _, port = line.split(",")[0].rpartition(":")
        self.address = (host, int(port))
        self.bootstrap = f"{host}:{port}"
        self.scrapes = 0
        self._stop_scraping = threading.Event()
        self._scraper: threading.Thread | None = None
        if scrape_interval is not None:  # the broker's second line is its metrics URL
            url = self.process.stdout.readline().decode().strip()
            self._scraper = threading.Thread(target=self._scrape, args=(url, scrape_interval), daemon=True)
            self._scraper.start()

    def _scrape(self, url: str, interval: float) -> None:
        """GET /metrics every ``interval`` seconds until the broker stops (as Prometheus would)."""
        while not self._stop_scraping.wait(interval):
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
                self.scrapes += 1
            except OSError as error:
                print(f"#   scrape of {url} failed: {error}", flush=True)

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def profile_start(self, label: str) -> Path | None:
        """Under --profile: switch the broker's profiler on; its stats will go to the returned path."""
        if self.profile_dir is None:
            return None
        path = self.profile_dir / f"{self.name}-{label}.prof"
        self._profile_control.write_text(str(path))
        self.process.send_signal(signal.SIGUSR1)
        return path

    def profile_stop(self, path: Path) -> bool:
        """Switch the profiler off and wait until it has written ``path``."""
        done = path.with_name(path.name + ".done")
        self.process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not done.exists():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def log_bytes(self, topic: str) -> int:
        """Bytes in the topic's segment files: what the broker appended."""
        return sum(
            path.stat().st_size
            for p in range(PARTITIONS)
            for path in (self.log_dir / partition_dir_name(TopicPartition(topic, p))).glob("*.log")
        )

    def stop(self) -> None:
        """SIGTERM (the broker flushes and checkpoints), then the log directory is removed."""
        if self._scraper is not None:
            self._stop_scraping.set()
            self._scraper.join()
            print(f"#   broker {self.name}: {self.scrapes} scrapes of /metrics", flush=True)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            print(f"#   broker {self.name} did not stop within 120 s of SIGTERM; killed")
            self.process.kill()
            self.process.wait()
        problems = [
            line
            for line in self.stderr_path.read_text(errors="replace").splitlines()
            if " ERROR " in line or " WARNING " in line or "Traceback" in line
        ]
        for line in problems[:5]:
            print(f"#   broker {self.name} logged: {line[:200]}", flush=True)
        shutil.rmtree(self.log_dir, ignore_errors=True)
        os.sync()  # the next case starts without dirty pages of this one


def print_profile(path: Path, broker_cpu: float, top: int) -> None:
    """The broker's hottest functions by own time, as shares of its busy time under the profiler (the
    profiler's wall-clock time minus the event loop's waits in epoll)."""
    if not path.exists():
        print(f"#   no profile was written to {path}")
        return
    entries = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]

    def idle(key: tuple[str, int, str]) -> bool:
        return key[0] == "~" and "'poll' of 'select.epoll'" in key[2]

    waited = sum(value[2] for key, value in entries.items() if idle(key))
    busy = sum(value[2] for value in entries.values()) - waited
    print(
        f"#   cProfile of broker {path.stem}, this line only: {busy:.2f} s busy (epoll waits of "
        f"{waited:.2f} s left out); {broker_cpu:.2f} s of broker CPU (profiler overhead included)"
    )
    print(f"#   {'own%':>5} {'own s':>6} {'cum%':>5} {'calls':>8}  function (by own time)")
    rows = sorted(
        (item for item in entries.items() if not idle(item[0])), key=lambda i: i[1][2], reverse=True
    )
    for (file, line, name), (_, calls, own, cumulative, _) in rows[:top]:
        print(
            f"#   {100 * own / busy:5.1f} {own:6.2f} {100 * cumulative / busy:5.1f} {calls:8d}  "
            f"{_where(file, line, name)}"
        )
    print(f"#   {'cum%':>5} {'cum s':>6} {'':5} {'calls':>8}  kctl function (by cumulative time)")
    rows = sorted(
        (item for item in entries.items() if "/kctl/" in item[0][0]), key=lambda i: i[1][3], reverse=True
    )
    for (file, line, name), (_, calls, _, cumulative, _) in rows[: top // 2]:
        print(
            f"#   {100 * cumulative / busy:5.1f} {cumulative:6.2f} {'':5} {calls:8d}  "
            f"{_where(file, line, name)}"
        )


def _where(file: str, line: int, name: str) -> str:
    if file == "~":
        return name
    for marker in ("/kctl/", "/lib/python3"):
        index = file.find(marker)
        if index >= 0:
            file = file[index + 1 :]
            break
    return f"{name} {file}:{line}"


# -------------------------------------------------------------------------------- requests, encoded once


def build_batch(record_size: int, records: int) -> bytes:
    builder = RecordBatchBuilder()
    value = os.urandom(record_size)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(now + i, None, value)
    return builder.build()


def produce_request(topic: str, partition: int, batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )


def produce_frame(topic: str, partition: int, batch: bytes) -> bytearray:
    header = kp.RequestHeader(0, PRODUCE_VERSION, 0, "bench")
    return bytearray(kp.encode_request(header, produce_request(topic, partition, batch)))


def fetch_frame(
    topic: str, offsets: dict[int, int], partition_max_bytes: int = PARTITION_MAX_BYTES
) -> bytearray:
    """An encoded Fetch request for ``offsets`` (partition -> fetch offset) of ``topic``."""
    request = FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=FETCH_MAX_BYTES,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=partition_max_bytes)
                    for p, offset in offsets.items()
                ],
            )
        ],
        forgotten_topics_data=[],
    )
    return bytearray(kp.encode_request(kp.RequestHeader(1, FETCH_VERSION, 0, "bench"), request))


def recv_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the broker closed the connection")
        got += n
    return data


def round_trip(address: tuple[str, int], api_key: int, version: int, body: Any) -> Any:
    """One request and its decoded response (set-up and checks only, never timed)."""
    header = kp.RequestHeader(api_key, version, 1, "bench")
    with socket.create_connection(address) as sock:
        sock.sendall(kp.encode_request(header, body))
        size = _INT32.unpack(recv_exactly(sock, 4))[0]
        return kp.decode_response(header, recv_exactly(sock, size))[1]


def end_offsets(address: tuple[str, int], topic: str) -> dict[int, int]:
    partitions = [ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(PARTITIONS)]
    request = ListOffsetsRequest(
        isolation_level=0, topics=[ListOffsetsTopic(name=topic, partitions=partitions)]
    )
    response = round_trip(address, 2, LIST_OFFSETS_VERSION, request)
    return {p.partition_index: p.offset for t in response.topics for p in t.partitions if p.error_code == 0}


# ------------------------------------------------------------------------------ the pipelined raw client


@dataclass
class PipeStats:
    sent: int = 0
    answered: int = 0
    bytes_received: int = 0
    error: BaseException | None = None


def pipeline(
    address: tuple[str, int],
    frames: list[bytearray],
    window: int,
    seconds: float,
    max_requests: int,
    stats: PipeStats,
    start: threading.Barrier,
) -> None:
    """Send ``frames`` round-robin (correlation ids patched in place), at most ``window`` unanswered, until
    ``max_requests`` were sent or ``seconds`` passed since ``start``; read every response, counting its
    bytes and checking only its correlation id (responses come back in request order)."""
    try:
        sock = socket.create_connection(address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException as error:  # reported by replay()
        stats.error = error
        start.abort()
        return
    buffer = bytearray(MIB)
    view = memoryview(buffer)
    header = bytearray()
    pending: collections.deque[int] = collections.deque()
    remaining = -1  # bytes left of the current response; -1 while reading its size and correlation id
    sent = answered = received = 0
    count = len(frames)
    correlation_id = 0
    clock = time.perf_counter
    sending = True
    try:
        start.wait()
        deadline = clock() + seconds
        while True:
            while sending and sent - answered < window:
                if sent >= max_requests or clock() >= deadline:
                    sending = False
                    break
                frame = frames[sent % count]
                correlation_id += 1
                _INT32.pack_into(frame, 8, correlation_id)
                sock.sendall(frame)
                pending.append(correlation_id)
                sent += 1
            if answered == sent:
                break
            n = sock.recv_into(buffer)
            if n == 0:
                raise ConnectionError(f"the broker closed the connection after {answered} responses")
            received += n
            i = 0
            while i < n:
                if remaining < 0:
                    take = min(8 - len(header), n - i)
                    header += view[i : i + take]
                    i += take
                    if len(header) < 8:
                        break
                    size, response_id = _SIZE_AND_ID.unpack(header)
                    header.clear()
                    expected = pending.popleft()
                    if response_id != expected:
                        raise ConnectionError(f"correlation id {response_id}, expected {expected}")
                    remaining = size - 4
                take = min(remaining, n - i)
                remaining -= take
                i += take
                if remaining == 0:
                    answered += 1
                    remaining = -1
    except threading.BrokenBarrierError:
        pass
    except BaseException as error:  # reported by replay()
        stats.error = error
    finally:
        stats.sent, stats.answered, stats.bytes_received = sent, answered, received
        sock.close()


@dataclass
class Run:
    seconds: float
    broker_cpu: float
    own_cpu: float  # this process: the load generator (or consumer)
    other_cpu: float  # everything else on the machine
    answered: list[int] = field(default_factory=list)
    bytes_received: int = 0
    profile: Path | None = None  # the broker's cProfile stats over this run (--profile)

    def usage(self) -> str:
        """Broker, generator and other CPU, in % of one core."""
        return " ".join(
            f"{100 * cpu / self.seconds:5.0f}" for cpu in (self.broker_cpu, self.own_cpu, self.other_cpu)
        )



def drain_rdkafka(consumer: Any, total: int, who: str) -> int:
    """Consume with a confluent-kafka ``consumer`` until ``total`` records arrived (or 30 s without
    any: then say so and stop); returns how many arrived. A consumer error other than EOF raises."""
    from confluent_kafka import KafkaError

    received = 0
    last = time.perf_counter()
    consume = consumer.consume
    while received < total:
        messages = consume(10000, 1.0)
        if not messages:
            if time.perf_counter() - last > 30:
                print(f"#   warning: {who} stalled at {received} of {total} records")
                break
            continue
        last = time.perf_counter()
        for message in messages:
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"consumer error: {error}")
        received += len(messages)
    return received


class Meter:
    """Wall time and CPU (the broker's, this process's, the rest of the machine's) from now to ``stop()``."""

    def __init__(self, broker: BrokerProcess, label: str) -> None:
        self.broker = broker
        self.profile = broker.profile_start(label)
        self.start = (broker.cpu(), own_cpu_seconds(), machine_busy_seconds(), time.perf_counter())

    def stop(self) -> Run:
        end = (self.broker.cpu(), own_cpu_seconds(), machine_busy_seconds(), time.perf_counter())
        broker, own, busy, seconds = (b - a for a, b in zip(self.start, end, strict=True))
        run = Run(seconds, broker, own, max(0.0, busy - broker - own))
        if self.profile is not None and self.broker.profile_stop(self.profile):
            run.profile = self.profile
        return run


def replay(
    broker: BrokerProcess,
    per_connection: list[list[bytearray]],
    *,
    window: int,
    seconds: float,
    max_requests: int,
    label: str,
) -> Run:
    """One ``pipeline`` thread per connection, timed from when all are connected to the last response,
    with the broker's and this process's CPU over the same span."""
    connections = [(broker.address, frames) for frames in per_connection]
    return replay_to(
        broker, connections, window=window, seconds=seconds, max_requests=max_requests, label=label
    )


def replay_to(
    measured: Any,
    connections: list[tuple[tuple[str, int], list[bytearray]]],
    *,
    window: int,
    seconds: float,
    max_requests: int,
    label: str,
) -> Run:
    """``replay`` with an address per connection (e.g. each partition's leader); ``measured`` is what
    ``Meter`` takes the CPU of (a broker, or a peer of several)."""
    stats = [PipeStats() for _ in connections]
    barrier = threading.Barrier(len(connections) + 1)
    threads = [
        threading.Thread(
            target=pipeline,
            args=(address, frames, window, seconds, max_requests, stat, barrier),
            daemon=True,
        )
        for (address, frames), stat in zip(connections, stats, strict=True)
    ]
    for thread in threads:
        thread.start()
    meter = Meter(measured, label)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait()
    for thread in threads:
        thread.join()
    run = meter.stop()
    for stat in stats:
        if stat.error is not None:
            raise RuntimeError(f"a load generator connection failed: {stat.error!r}") from stat.error
        run.answered.append(stat.answered)
        run.bytes_received += stat.bytes_received
    return run


# ---------------------------------------------------------------------------------- the machine's limits


@dataclass
class Limits:
    write_cache: float = 0.0  # MB/s, medians
    write_fsync: float = 0.0
    loopback_send: float = 0.0
    loopback_sendfile: float = 0.0


def sequential_write(directory: Path, batch: bytes, total: int, fsync: bool) -> float:
    """MB/s of os.write of ``batch`` repeated to ``total`` bytes (then fsync) in ``directory``."""
    path = directory / "sequential.bin"
    count = max(1, total // len(batch))
    os.sync()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    if fsync:
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return count * len(batch) / MB / elapsed


def _loopback_sender(port: int, total: int, source: str | None) -> None:
    """Child process: send ``total`` bytes to 127.0.0.1:port, from a 1 MiB buffer with sendall, or from
    the file ``source`` (repeated) with os.sendfile."""
    sock = socket.create_connection(("127.0.0.1", port))
    sent = 0
    if source is None:
        buffer = os.urandom(MIB)
        while sent < total:
            sock.sendall(buffer)
            sent += len(buffer)
    else:
        fd = os.open(source, os.O_RDONLY)
        size = os.fstat(fd).st_size
        while sent < total:
            offset = 0
            while offset < size and sent < total:
                n = os.sendfile(sock.fileno(), fd, offset, min(size - offset, total - sent))
                offset += n
                sent += n
        os.close(fd)
    sock.close()


def loopback(total: int, source: Path | None) -> float:
    """MB/s over one TCP connection on 127.0.0.1: sender in a child process, receiver here (recv_into a
    1 MiB buffer, bytes dropped), timed from the first byte received."""
    server = socket.create_server(("127.0.0.1", 0))
    child = multiprocessing.get_context("spawn").Process(
        target=_loopback_sender,
        args=(server.getsockname()[1], total, str(source) if source else None),
        daemon=True,
    )
    child.start()
    conn, _ = server.accept()
    server.close()
    buffer = bytearray(MIB)
    conn.recv_into(buffer)  # the clock starts at the first bytes
    start = time.perf_counter()
    received = 0
    while n := conn.recv_into(buffer):
        received += n
    elapsed = time.perf_counter() - start
    conn.close()
    child.join()
    return received / MB / elapsed


def measure_limits(base: Path, sizes: Sizes) -> Limits:
    batch = build_batch(1024, 1000)
    source = base / "sendfile.bin"
    with open(source, "wb") as file:
        for _ in range(max(1, 256 * MIB // len(batch))):
            file.write(batch)
    runs: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(sizes.repeat):
        runs["write_cache"].append(sequential_write(base, batch, sizes.produce_bytes, fsync=False))
        runs["write_fsync"].append(sequential_write(base, batch, sizes.produce_bytes, fsync=True))
        runs["loopback_send"].append(loopback(sizes.loopback_bytes, None))
        runs["loopback_sendfile"].append(loopback(sizes.loopback_bytes, source))
    source.unlink()
    limits = Limits(**{name: statistics.median(values) for name, values in runs.items()})
    print(
        f"# machine limits in this run: median (min-max) of {sizes.repeat}; "
        f"{sizes.produce_bytes / MB:.0f} MB written per measurement (the ~1 MiB batch, {len(batch)} "
        "bytes, repeated; after os.sync()), "
        f"{sizes.loopback_bytes / MB:.0f} MB per loopback measurement (sender in another process)"
    )
    print(f"{'limit':62} {'MB/s':>7}  range")
    labels = {
        "write_cache": "sequential os.write to the log filesystem, page cache",
        "write_fsync": "sequential os.write to the log filesystem, then fsync",
        "loopback_send": "loopback TCP: sendall of a 1 MiB buffer -> recv_into",
        "loopback_sendfile": "loopback TCP: os.sendfile of a cached file -> recv_into",
    }
    for name, label in labels.items():
        values = runs[name]
        print(f"{label:62} {statistics.median(values):7.0f}  {min(values):.0f}-{max(values):.0f}")
    print(flush=True)
    return limits


# ------------------------------------------------------------------------------------------- the bench


@dataclass
class Result:
    case: str
    load: str
    records_per_second: float
    mb_per_second: float
    records_per_cpu: float  # per second of broker CPU
    mb_per_cpu: float
    paired_write: float | None = None  # median MB/s of the sequential writes paired with the runs
    paired_ratio: float | None = None  # median of each run's MB/s over its paired write's MB/s


@dataclass
class FetchPlan:
    """Pre-encoded Fetch requests walking a preloaded log whose layout is known (per partition, ``batches``
    batches of ``batch_size`` bytes and 1000 records), so every next offset is known in advance and the
    requests can be pipelined without decoding the responses."""

    frames: list[bytearray]
    records: int  # whole records the responses carry
    first_size: int  # bytes of each partition's records in the first response


def fetch_plan(partitions: list[int], batches: int, batch_size: int) -> FetchPlan:
    step = max(1, PARTITION_MAX_BYTES // batch_size)  # whole batches per partition per response
    frames, records = [], 0
    for first in range(0, batches, step):
        frames.append(fetch_frame("c", {p: first * 1000 for p in partitions}))
        records += min(step, batches - first) * 1000 * len(partitions)
    return FetchPlan(frames, records, min(PARTITION_MAX_BYTES, batch_size * batches))


class Bench:
    def __init__(self, args: argparse.Namespace, base: Path) -> None:
        self.args = args
        self.sizes = QUICK if args.quick else FULL
        self.base = base
        self.results: list[Result] = []
        self.p99: float | None = None
        self._brokers = 0
        self.metrics = bool(args.metrics)  # the next brokers serve /metrics (switched by --metrics-ab)

    def broker(self, name: str) -> BrokerProcess:
        self._brokers += 1
        interval = self.args.scrape_interval if self.metrics else None
        return BrokerProcess(self.base, f"{self._brokers:02d}-{name}", self.args.profile, interval)

    @staticmethod
    def header() -> str:
        return (
            f"{'case':31} {'load':16} {'records/s':>10} {'MB/s':>6} {'rec/CPU-s':>10} {'brk%':>5} "
            f"{'gen%':>5} {'oth%':>5} {'secs':>5} {'spread':>6}"
        )

    def row(self, case: str, load: str, records: int, size: int, run: Run, spread: str = "") -> Result:
        cpu = run.broker_cpu if run.broker_cpu > 0 else float("nan")
        result = Result(
            case, load, records / run.seconds, size / MB / run.seconds, records / cpu, size / MB / cpu
        )
        self.results.append(result)
        print(
            f"{case:31} {load:16} {result.records_per_second:10,.0f} {result.mb_per_second:6.0f} "
            f"{result.records_per_cpu:10,.0f} {run.usage()} {run.seconds:5.1f} {spread:>6}",
            flush=True,
        )
        if run.profile is not None:
            print_profile(run.profile, run.broker_cpu, self.args.top)
        return result

    # -- produce -------------------------------------------------------------------------------
    def produce(self) -> None:
        sizes = self.sizes
        print(
            f"# produce, acks=1: each line on a new broker and empty log, {sizes.produce_seconds:g} s or "
            f"{sizes.produce_bytes / MB:.0f} MB appended, whichever comes first. raw = one pre-encoded "
            f"Produce v{PRODUCE_VERSION} request per connection replayed, {self.args.window} in flight per "
            "connection, connection i -> partition i; rdkafka = confluent-kafka Producer (linger.ms=5, "
            "batch.size=1000000) to one partition. MB/s = bytes appended to the log (batches as stored)."
        )
        print(self.header())
        for case, record_size, records in PRODUCE_CASES:
            batch = build_batch(record_size, records)
            for connections in (1, 4):
                self.repeated(
                    case,
                    f"raw, {connections} conn",
                    partial(self.produce_raw, batch, records, connections),
                    paired=batch if records == 1000 else None,
                )
        for record_size in (100, 1024):
            self.repeated(
                f"{'100 B' if record_size == 100 else '1 KiB'} records, librdkafka",
                "rdkafka, 1 conn",
                partial(self.produce_rdkafka, record_size),
            )
        print(flush=True)

    def repeated(
        self, case: str, load: str, measure: Callable[[], tuple[int, int, Run]], paired: bytes | None = None
    ) -> None:
        """Measure ``repeat`` times (each on a new broker); print the median run by records/s, with the
        spread of all runs' records/s as a share of that median. With ``paired`` (a batch), each run is
        preceded by a sequential write of that batch, as much as the run may append, and the runs' MB/s
        are compared with their own paired write (this machine's page-cache write speed varies a lot
        from one moment to the next)."""
        if self.args.cases and not any(c in f"{case}, {load}" for c in self.args.cases.split(";")):
            return
        if self.args.metrics_ab:
            self.metrics_ab(case, load, lambda metrics: measure())
            return
        runs, writes, ratios = [], [], []
        for _ in range(1 if self.args.profile else self.args.repeat or self.sizes.repeat):
            if paired is not None:
                writes.append(sequential_write(self.base, paired, self.sizes.produce_bytes, fsync=False))
            runs.append(measure())
            if paired is not None:
                ratios.append(runs[-1][1] / MB / runs[-1][2].seconds / writes[-1])
        runs.sort(key=lambda item: item[0] / item[2].seconds)
        records, size, run = runs[len(runs) // 2]
        rates = [item[0] / item[2].seconds for item in runs]
        spread = f"{100 * (rates[-1] - rates[0]) / (records / run.seconds):.0f}%" if len(runs) > 1 else ""
        result = self.row(case, load, records, size, run, spread)
        if paired is not None:
            result.paired_write, result.paired_ratio = statistics.median(writes), statistics.median(ratios)
            print(
                f"#   paired sequential write just before each run: {result.paired_write:.0f} MB/s median "
                f"({min(writes):.0f}-{max(writes):.0f}); run/write ratio {100 * result.paired_ratio:.0f}% "
                f"median ({100 * min(ratios):.0f}-{100 * max(ratios):.0f}%)",
                flush=True,
            )

    def metrics_ab(self, case: str, load: str, measure: Callable[[bool], tuple[int, int, Run]]) -> None:
        """--metrics-ab: ``measure(metrics)`` off and on back to back, ``repeat`` rounds (3 unless
        given), the order swapped each round; both medians (by records/s) as rows, then each round's
        on/off ratios of records/s and records per broker CPU-second, the load average, and their
        medians."""
        rounds = self.args.repeat or 3
        runs: dict[bool, list[tuple[int, int, Run]]] = {False: [], True: []}
        lines = []
        for index in range(rounds):
            load_average = os.getloadavg()[0]
            pair: dict[bool, Run] = {}
            records: dict[bool, int] = {}
            for metrics in (False, True) if index % 2 == 0 else (True, False):
                self.metrics = metrics
                result = measure(metrics)
                runs[metrics].append(result)
                records[metrics], pair[metrics] = result[0], result[2]
            self.metrics = bool(self.args.metrics)
            rate = {m: records[m] / pair[m].seconds for m in pair}
            per_cpu = {m: records[m] / pair[m].broker_cpu if pair[m].broker_cpu > 0 else 0.0 for m in pair}
            lines.append(
                (
                    rate[True] / rate[False] - 1,
                    per_cpu[True] / per_cpu[False] - 1 if per_cpu[False] else 0.0,
                    f"#   round {index + 1} ({'off, on' if index % 2 == 0 else 'on, off'}; load "
                    f"{load_average:.2f}): rec/s {rate[False]:,.0f} -> {rate[True]:,.0f}, rec/CPU-s "
                    f"{per_cpu[False]:,.0f} -> {per_cpu[True]:,.0f}",
                )
            )
        for metrics in (False, True):
            done = sorted(runs[metrics], key=lambda item: item[0] / item[2].seconds)
            records_, size, run = done[len(done) // 2]
            self.row(case, f"{load}, {'on' if metrics else 'off'}", records_, size, run)
        for rate_change, cpu_change, text in lines:
            print(f"{text}: {100 * rate_change:+.1f}% rec/s, {100 * cpu_change:+.1f}% rec/CPU-s", flush=True)
        shortest = min(item[2].broker_cpu for done in runs.values() for item in done)
        if shortest < 100 / CLOCK_TICKS:  # a tick is over 1% of the run: --quick's short runs
            print(
                f"#   note: broker CPU is counted in ticks of {1000 / CLOCK_TICKS:g} ms and the shortest run "
                f"used {shortest:.2f} s: its rec/CPU-s is +-{100 / CLOCK_TICKS / max(shortest, 1e-9):.0f}% "
                "(run without --quick for longer runs)",
                flush=True,
            )
        print(
            f"#   metrics on vs off, median of {rounds} rounds: "
            f"{100 * statistics.median(r for r, _, _ in lines):+.1f}% rec/s, "
            f"{100 * statistics.median(c for _, c, _ in lines):+.1f}% rec/CPU-s",
            flush=True,
        )

    def produce_raw(self, batch: bytes, records: int, connections: int) -> tuple[int, int, Run]:
        broker = self.broker(f"produce-{connections}c")
        try:
            for i in range(connections):  # creates the topic; warms the path up
                response = round_trip(broker.address, 0, PRODUCE_VERSION, produce_request("p", i, batch))
                code = response.responses[0].partition_responses[0].error_code
                if code:
                    raise RuntimeError(f"warm-up produce failed: error {code}")
            before = broker.log_bytes("p")
            run = replay(
                broker,
                [[produce_frame("p", i, batch)] for i in range(connections)],
                window=self.args.window,
                seconds=self.sizes.produce_seconds,
                max_requests=max(1, self.sizes.produce_bytes // len(batch) // connections),
                label=f"{len(batch) // records}x{records}-{connections}c",
            )
            logged = sum(end_offsets(broker.address, "p").values())
            expected = (sum(run.answered) + connections) * records
            if logged != expected:
                print(f"#   warning: the log holds {logged} records, {expected} were acknowledged")
            return sum(run.answered) * records, broker.log_bytes("p") - before, run
        finally:
            broker.stop()

    def produce_rdkafka(self, record_size: int) -> tuple[int, int, Run]:
        from confluent_kafka import Producer

        broker = self.broker("produce-rdkafka")
        try:
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "acks": 1,
                    "linger.ms": 5,
                    "batch.size": 1000000,
                    "queue.buffering.max.messages": 2000000,
                    "queue.buffering.max.kbytes": 2 * 1024 * 1024,
                    "log.connection.close": False,
                }
            )
            value = os.urandom(record_size)
            producer.produce("p", value, partition=0)
            producer.flush(30)
            before = broker.log_bytes("p")
            limit = self.sizes.produce_bytes // (record_size + 8)
            produce, poll, clock = producer.produce, producer.poll, time.perf_counter
            meter = Meter(broker, f"rdkafka-{record_size}")
            deadline = clock() + self.sizes.produce_seconds
            sent = 0
            while sent < limit:
                try:
                    produce("p", value, partition=0)
                except BufferError:
                    poll(0.001)
                    continue
                sent += 1
                if not sent & 1023:
                    poll(0)
                    if clock() >= deadline:
                        break
            left = producer.flush(60)
            run = meter.stop()
            del producer, produce, poll  # librdkafka closes its connections before the broker stops
            gc.collect()
            if left:
                print(f"#   warning: {left} records undelivered after flush")
            logged = end_offsets(broker.address, "p").get(0)
            if logged != sent + 1:
                print(f"#   warning: the log holds {logged} records, {sent + 1} were produced")
            return sent, broker.log_bytes("p") - before, run
        finally:
            broker.stop()

    # -- consume -------------------------------------------------------------------------------
    def consume(self) -> None:
        sizes = self.sizes
        batch = build_batch(1024, 1000)
        batches = max(1, sizes.log_bytes // len(batch) // PARTITIONS)
        total_records = batches * 1000 * PARTITIONS
        print(
            f"# consume: a log of {batches * len(batch) * PARTITIONS / MB:.0f} MB in {PARTITIONS} partitions "
            "(1 KiB records, ~1 MiB batches) preloaded with the raw replay, then read from offset 0 to the "
            "end. raw = "
            f"pre-encoded Fetch v{FETCH_VERSION} requests (max_bytes {FETCH_MAX_BYTES >> 20} MiB, "
            f"partition_max_bytes {PARTITION_MAX_BYTES >> 20} MiB; 2 in flight per connection; 1 connection "
            f"fetching all partitions, or one per partition), the log read {sizes.read_passes} times, bytes "
            "counted and dropped; rdkafka = confluent-kafka Consumer, assign() at offset 0, messages "
            "counted. "
            "MB/s = bytes received (raw: whole responses) or record values (rdkafka)."
        )
        print(self.header())
        if self.args.metrics_ab:
            self.consume_ab(batch, batches)
            return
        broker = self.broker("consume")
        try:
            run = replay(
                broker,
                [[produce_frame("c", p, batch)] for p in range(PARTITIONS)],
                window=self.args.window,
                seconds=1e9,
                max_requests=batches,
                label="preload",
            )
            self.row(
                "preload (produce)",
                f"raw, {PARTITIONS} conn",
                sum(run.answered) * 1000,
                broker.log_bytes("c"),
                run,
            )
            offsets = end_offsets(broker.address, "c")
            if offsets != {p: batches * 1000 for p in range(PARTITIONS)}:
                raise RuntimeError(
                    f"preload: end offsets {offsets}, expected {batches * 1000} in each partition"
                )
            os.sync()
            passes = sizes.read_passes
            plan = fetch_plan(list(range(PARTITIONS)), batches, len(batch))
            self.check_fetch(broker, plan)
            run = replay(
                broker,
                [plan.frames],
                window=2,
                seconds=1e9,
                max_requests=passes * len(plan.frames),
                label="read-1c",
            )
            self.row(READ_CASE, "raw, 1 conn", passes * plan.records, run.bytes_received, run)
            plans = [fetch_plan([p], batches, len(batch)) for p in range(PARTITIONS)]
            run = replay(
                broker,
                [p.frames for p in plans],
                window=2,
                seconds=1e9,
                max_requests=passes * len(plans[0].frames),
                label=f"read-{PARTITIONS}c",
            )
            records = passes * sum(p.records for p in plans)
            self.row(READ_CASE, f"raw, {PARTITIONS} conn", records, run.bytes_received, run)
            self.consume_rdkafka(broker, total_records, 1024)
        finally:
            broker.stop()
        print(flush=True)

    def consume_ab(self, batch: bytes, batches: int) -> None:
        """--metrics-ab: two brokers preloaded alike, one serving /metrics; each raw read line run on
        both back to back (``metrics_ab``)."""
        brokers: dict[bool, BrokerProcess] = {}
        try:
            for metrics in (False, True):
                self.metrics = metrics
                broker = brokers[metrics] = self.broker(f"consume-{'on' if metrics else 'off'}")
                run = replay(
                    broker,
                    [[produce_frame("c", p, batch)] for p in range(PARTITIONS)],
                    window=self.args.window,
                    seconds=1e9,
                    max_requests=batches,
                    label="preload",
                )
                load = f"raw, {PARTITIONS} conn, {'on' if metrics else 'off'}"
                self.row("preload (produce)", load, sum(run.answered) * 1000, broker.log_bytes("c"), run)
            self.metrics = bool(self.args.metrics)
            os.sync()
            passes = self.sizes.read_passes
            plan = fetch_plan(list(range(PARTITIONS)), batches, len(batch))
            plans = [fetch_plan([p], batches, len(batch)) for p in range(PARTITIONS)]
            for broker in brokers.values():
                self.check_fetch(broker, plan)

            def read_1c(metrics: bool) -> tuple[int, int, Run]:
                run = replay(
                    brokers[metrics],
                    [plan.frames],
                    window=2,
                    seconds=1e9,
                    max_requests=passes * len(plan.frames),
                    label="read-1c",
                )
                return passes * plan.records, run.bytes_received, run

            def read_all(metrics: bool) -> tuple[int, int, Run]:
                run = replay(
                    brokers[metrics],
                    [p.frames for p in plans],
                    window=2,
                    seconds=1e9,
                    max_requests=passes * len(plans[0].frames),
                    label=f"read-{PARTITIONS}c",
                )
                return passes * sum(p.records for p in plans), run.bytes_received, run

            self.metrics_ab(READ_CASE, "raw, 1 conn", read_1c)
            self.metrics_ab(READ_CASE, f"raw, {PARTITIONS} conn", read_all)
        finally:
            for broker in brokers.values():
                broker.stop()
        print(flush=True)

    @staticmethod
    def check_fetch(broker: BrokerProcess, plan: FetchPlan) -> None:
        """Decode the plan's first response once: every partition answers with the expected bytes."""
        header = kp.RequestHeader(1, FETCH_VERSION, 1, "bench")
        frame = bytearray(plan.frames[0])
        _INT32.pack_into(frame, 8, 1)
        with socket.create_connection(broker.address) as sock:
            sock.sendall(frame)
            size = _INT32.unpack(recv_exactly(sock, 4))[0]
            response = kp.decode_response(header, recv_exactly(sock, size))[1]
        for topic in response.responses:
            for part in topic.partitions:
                got = len(part.records or b"")
                if part.error_code or got != plan.first_size:
                    raise RuntimeError(
                        f"fetch check: partition {part.partition_index}: error {part.error_code}, "
                        f"{got} bytes, expected {plan.first_size}"
                    )

    def consume_rdkafka(self, broker: BrokerProcess, total: int, record_size: int) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        config = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kctl-bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": PARTITION_MAX_BYTES,
            "receive.message.max.bytes": FETCH_MAX_BYTES + 10 * MIB,
            "queued.max.messages.kbytes": 256 * 1024,
            "log.connection.close": False,
        }
        # a first consumer of the group looks its coordinator up, which creates __consumer_offsets on
        # the broker: one-time work kept out of the measurement
        warm = Consumer(config)
        warm.assign([KafkaTopicPartition("c", 0, total // PARTITIONS)])
        warm.poll(0.5)
        warm.close()
        consumer = Consumer(config)
        meter = Meter(broker, "read-rdkafka")
        consumer.assign([KafkaTopicPartition("c", p, 0) for p in range(PARTITIONS)])
        received = drain_rdkafka(consumer, total, "the rdkafka consumer")
        run = meter.stop()
        consumer.close()
        self.row(READ_CASE, "rdkafka, 1 conn", received, received * record_size, run)

    # -- latency -------------------------------------------------------------------------------
    def latency(self) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        sizes = self.sizes
        broker = self.broker("latency")
        latencies: list[float] = []
        try:
            warm = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0})
            warm.produce("l", _STAMP.pack(-2, 0), partition=0)
            warm.flush(30)
            del warm
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "kctl-bench-latency",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "log.connection.close": False,
                }
            )
            consumer.assign([KafkaTopicPartition("l", 0, 0)])
            message = consumer.poll(30)
            if message is None or message.error():
                raise RuntimeError(
                    f"latency: the warm-up record did not arrive ({message and message.error()})"
                )
            child = multiprocessing.get_context("spawn").Process(
                target=_latency_producer,
                args=(broker.bootstrap, "l", sizes.latency_rate, sizes.latency_seconds, 100),
                daemon=True,
            )
            meter = Meter(broker, "latency")
            child.start()
            deadline = time.perf_counter() + sizes.latency_seconds + 60
            while time.perf_counter() < deadline:
                message = consumer.poll(1.0)
                now = time.perf_counter_ns()
                if message is None or message.error():
                    continue
                sequence, sent = _STAMP.unpack_from(message.value())
                if sequence == -1:
                    break
                if sequence >= 0:
                    latencies.append((now - sent) / 1e6)
            run = meter.stop()
            consumer.close()
            child.join(30)
        finally:
            broker.stop()
        expected = int(sizes.latency_rate * sizes.latency_seconds)
        latencies.sort()
        p50, p99, p999 = (percentile(latencies, f) for f in (0.5, 0.99, 0.999))
        print(
            f"# end-to-end latency: confluent-kafka Producer in another process (linger.ms=0, acks=1, 100 B "
            f"records, {sizes.latency_rate}/s for {sizes.latency_seconds:g} s) -> broker -> confluent-kafka "
            "Consumer here (assign, fetch.wait.max.ms at its default 500); each record carries its send "
            "time, "
            "time.perf_counter_ns() (one host clock); latency = receive - send. gen% = this "
            "process (the consumer); the producer process counts in oth%."
        )
        print(
            f"{'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8} {'brk%':>5} "
            f"{'gen%':>5} {'oth%':>5}"
        )
        worst = latencies[-1] if latencies else float("nan")
        print(f"{len(latencies):8d} {p50:8.2f} {p99:8.2f} {p999:9.2f} {worst:8.2f} {run.usage()}")
        if len(latencies) != expected:
            print(f"#   warning: received {len(latencies)} of {expected} records")
        if run.profile is not None:
            print_profile(run.profile, run.broker_cpu, self.args.top)
        print(flush=True)
        self.p99 = p99

    # -- targets -------------------------------------------------------------------------------
    def targets(self, limits: Limits | None) -> None:
        def best(case: str) -> Result | None:
            found = [r for r in self.results if r.case == case and r.load.startswith("raw")]
            return max(found, key=lambda r: r.records_per_second) if found else None

        def line(target: str, reached: str, met: bool, per_cpu: str = "") -> None:
            print(f"{target:58} {reached:>34}  {'yes' if met else 'NO ':3}  {per_cpu}")

        print(
            "# targets (issue 3) beside what this run reached (best raw load of each case); the last column "
            "scales the broker's figure to one whole core of its own (per broker CPU-second)"
        )
        print(f"{'target':58} {'reached':>34}  met  per broker CPU-s")
        big, small, read = best(PRODUCE_CASES[2][0]), best(PRODUCE_CASES[0][0]), best(READ_CASE)
        if big and limits:
            share = big.mb_per_second / limits.write_cache
            line(
                "produce, ~1 MiB batches: >= 50% of sequential-write MB/s",
                f"{big.mb_per_second:.0f} of {limits.write_cache:.0f} MB/s = {100 * share:.0f}%",
                share >= 0.5,
                f"{big.mb_per_cpu:.0f} MB = {100 * big.mb_per_cpu / limits.write_cache:.0f}%",
            )
        if big and big.paired_ratio is not None and big.paired_write is not None:
            line(
                "  (same, each run against a write just before it)",
                f"median ratio {100 * big.paired_ratio:.0f}% (writes {big.paired_write:.0f} MB/s)",
                big.paired_ratio >= 0.5,
            )
        if small:
            line(
                "produce, 100 B records in batches of 100: >= 1,000,000/s",
                f"{small.records_per_second:,.0f} records/s",
                small.records_per_second >= 1e6,
                f"{small.records_per_cpu:,.0f} records",
            )
        if read and limits:
            share = read.mb_per_second / limits.loopback_send
            line(
                "consume: >= 50% of loopback MB/s (sendall)",
                f"{read.mb_per_second:.0f} of {limits.loopback_send:.0f} MB/s = {100 * share:.0f}%",
                share >= 0.5,
                f"{read.mb_per_cpu:.0f} MB = {100 * read.mb_per_cpu / limits.loopback_send:.0f}%",
            )
            share = read.mb_per_second / limits.loopback_sendfile
            line(
                "  (same, against loopback with sendfile, the broker's path)",
                f"{read.mb_per_second:.0f} of {limits.loopback_sendfile:.0f} MB/s = {100 * share:.0f}%",
                share >= 0.5,
                f"{read.mb_per_cpu:.0f} MB = {100 * read.mb_per_cpu / limits.loopback_sendfile:.0f}%",
            )
        if self.p99 is not None:
            line("end-to-end p99 <= 10 ms at 1,000 records/s", f"{self.p99:.2f} ms", self.p99 <= 10)


def _latency_producer(
    bootstrap: str, topic: str, rate: int, seconds: float, record_size: int, acks: int = 1
) -> None:
    """Child process: produce ``rate`` records/s for ``seconds`` with ``acks`` (-1 on a replicated
    cluster), each stamped with its send time."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "log.connection.close": False}
    )
    padding = b"\x00" * max(0, record_size - _STAMP.size)
    interval = 1.0 / rate
    start = time.perf_counter()
    for sequence in range(int(rate * seconds)):
        wait = start + sequence * interval - time.perf_counter()
        if wait > 0:
            producer.poll(wait)  # serves delivery reports until the next send time
        producer.produce(topic, _STAMP.pack(sequence, time.perf_counter_ns()) + padding, partition=0)
        producer.poll(0)
    producer.produce(topic, _STAMP.pack(-1, time.perf_counter_ns()), partition=0)
    producer.flush(30)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of the sorted ``values``."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, -(-int(fraction * 10000) * len(values) // 10000) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the logs go (its filesystem is measured)"
    )
    parser.add_argument(
        "--only", default="limits,produce,consume,latency", help="sections to run, comma-separated"
    )
    parser.add_argument("--window", type=int, default=4, help="raw produce requests in flight per connection")
    parser.add_argument(
        "--profile", type=Path, default=None, metavar="DIR", help="run brokers under cProfile"
    )
    parser.add_argument("--top", type=int, default=20, help="functions shown per profile")
    parser.add_argument(
        "--cases",
        default="",
        help="produce lines to run: substrings of 'case, load' separated by ';' (e.g. '~1 MiB;100 B "
        "records, batches')",
    )
    parser.add_argument("--repeat", type=int, default=0, help="runs of each produce line (median shown)")
    parser.add_argument(
        "--metrics", action="store_true", help="brokers serve /metrics (metrics.listener), scraped meanwhile"
    )
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument(
        "--metrics-ab",
        action="store_true",
        help="each produce and raw consume line with metrics off and on, interleaved; prints the ratios",
    )
    args = parser.parse_args()
    if args.metrics_ab and (args.metrics or args.profile):
        parser.error("--metrics-ab runs with and without metrics itself (not with --metrics or --profile)")
    sections = set(args.only.split(","))
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        args.profile = args.profile.resolve()
    base = Path(tempfile.mkdtemp(prefix="kctl-bench-broker-", dir=args.dir))
    bench = Bench(args, base)
    started = time.perf_counter()
    print(
        f"# broker benchmark ({'quick' if args.quick else 'full'}) in {base}, {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}{'; brokers under cProfile: figures slowed' if args.profile else ''}"
        f"{f'; metrics on, scraped every {args.scrape_interval:g} s' if args.metrics else ''}"
        f"{'; metrics off and on interleaved' if args.metrics_ab else ''}"
    )
    print()
    limits = None
    try:
        if "limits" in sections:
            limits = measure_limits(base, bench.sizes)
        if "produce" in sections:
            bench.produce()
        if "consume" in sections:
            bench.consume()
        if "latency" in sections:
            bench.latency()
        bench.targets(limits)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"# total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
