"""A protocol fuzzer for a running broker (issue 17): a corpus of request frames, structure-aware
mutators, and a driver that sends the mutants over real sockets while a health probe watches.

- **Corpus** (``corpus()``): one request of every API at every version kctl's codec knows, each
  field set (``kctl.protocol.samples``), plus requests as clients send them — ApiVersions v3,
  Metadata, Fetch, Produce of real record batches in every compression codec.
- **Mutators** (``mutate``): truncation; bit flips and byte overwrites; length, count and int fields
  set to the values parsers trip on (0, -1, the int16/int32 limits, one more than what is left);
  varints made overlong or unterminated (flexible versions); a record batch's compressed payload
  damaged, or replaced by a decompression bomb, with the batch CRC recomputed so the damage gets past
  the CRC check; record counts that disagree with the records. The frame's size prefix is kept
  right (the framing itself is covered by tests/broker/test_e2e_bad_input.py), so every mutant is read whole.
- **Driver** (``Fuzzer.run``): a few connections, each sending one mutant followed by an ApiVersions
  sentinel (so a request with no response, or one the broker answers by closing, is accounted for)
  and waiting for the sentinel's answer or the end of the connection. A frame whose sentinel is not
  answered within ``hang_timeout`` is a hang. Every ``probe_every`` frames a fresh connection asks
  ApiVersions and Metadata (the probe latency), and the broker's RSS and open descriptors are read
  from ``/proc``.

Everything is seeded: the same seed sends the same frames.
"""

from __future__ import annotations

import contextlib
import os
import random
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import kctl.protocol as kp
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.protocol.registry import SCHEMAS
from kctl.protocol.samples import sample
from kctl.records.builder import RecordBatchBuilder
from kctl.records.crc import crc32c

__all__ = [
    "FuzzReport",
    "Fuzzer",
    "corpus",
    "find_batch",
    "mutate",
    "mutate_batch",
    "process_figures",
    "process_sockets",
]

_SIZE = struct.Struct(">i")
#: where a v2 record batch's CRC-32C sits, and where what it covers starts
_CRC_AT, _CRC_FROM = 17, 21
_RECORDS_COUNT_AT = 57
_INTERESTING_32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 0x10000, 0x7FFFFFFE)
_INTERESTING_16 = (0, 1, -1, 0x7FFF, -0x8000)
_SENTINEL_BASE = 0x7F000000


def _frame(header: kp.RequestHeader, body: object) -> bytes:
    return kp.encode_request(header, body)


def _batches(rng: random.Random) -> list[bytes]:
    """Real record batches: uncompressed and in each codec."""
    out = []
    now = int(time.time() * 1000)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        builder = RecordBatchBuilder(compression=codec)
        for i in range(rng.randint(1, 20)):
            builder.append(now + i, b"key-%d" % i, b"value-%d-" % i + bytes(rng.randint(0, 300)))
        out.append(builder.build())
    return out


def corpus(topic: str, seed: int = 0) -> list[bytes]:
    """Request frames (size prefix included) of every API and version, and client-like ones aimed at
    ``topic`` (which should exist on the broker)."""
    rng = random.Random(seed)
    frames = []
    for api_key, schema in sorted(SCHEMAS.items()):
        for version in range(schema.min_version, schema.max_version + 1):
            header = kp.RequestHeader(api_key, version, rng.randint(1, 1 << 30), "fuzz")
            with contextlib.suppress(Exception):  # a version the sample cannot fill (none so far)
                frames.append(_frame(header, sample(schema.request, version, array_len=1)))
    header = kp.RequestHeader(kp.ApiKey.API_VERSIONS, 3, 1, "rdkafka")
    frames.append(
        _frame(header, ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"))
    )
    metadata = MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    frames.append(_frame(kp.RequestHeader(kp.ApiKey.METADATA, 12, 2, "rdkafka"), metadata))
    fetch = FetchRequest(
        max_wait_ms=10,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
        forgotten_topics_data=[],
    )
    frames.append(_frame(kp.RequestHeader(kp.ApiKey.FETCH, 12, 3, "rdkafka"), fetch))
    for batch in _batches(rng):
        produce = ProduceRequest(
            transactional_id=None,
            acks=rng.choice((0, 1, -1)),
            timeout_ms=1000,
            topic_data=[
                TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])
            ],
        )
        frames.append(_frame(kp.RequestHeader(kp.ApiKey.PRODUCE, 9, 4, "rdkafka"), produce))
    return frames


# ------------------------------------------------------------------------------------ mutators


def find_batch(body: bytearray) -> int:
    """The offset of a v2 record batch in a frame body (its magic byte 2 at +16 and a length that
    fits), or -1."""
    for start in range(0, len(body) - 61):
        if body[start + 16] == 2:
            (length,) = _SIZE.unpack_from(body, start + 8)
            if length >= 49 and start + 12 + length <= len(body):
                (crc,) = struct.unpack_from(">I", body, start + _CRC_AT)
                if crc == crc32c(body[start + _CRC_FROM : start + 12 + length]):
                    return start
    return -1


def _fix_crc(body: bytearray, start: int) -> None:
    (length,) = _SIZE.unpack_from(body, start + 8)
    end = min(start + 12 + length, len(body))
    struct.pack_into(">I", body, start + _CRC_AT, crc32c(body[start + _CRC_FROM : end]))


def _bomb(rng: random.Random) -> bytes:
    """A batch whose few compressed bytes inflate to 64 MiB of zeros (gzip or zstd)."""
    import gzip

    import zstandard

    codec = rng.choice((1, 4))
    inner = bytes(64 << 20)
    payload = gzip.compress(inner, 9) if codec == 1 else zstandard.ZstdCompressor(level=19).compress(inner)
    builder = RecordBatchBuilder()
    builder.append(0, None, b"x")
    batch = bytearray(builder.build())
    batch[22] = (batch[22] & ~0x07) | codec  # attributes: the codec
    batch = batch[:61] + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, _RECORDS_COUNT_AT, 1)
    _fix_crc(batch, 0)
    return bytes(batch)


_BOMBS: list[bytes] = []


def mutate_batch(body: bytearray, rng: random.Random) -> bool:
    """Damage a record batch inside ``body`` behind a valid CRC; False when there is none."""
    start = find_batch(body)
    if start < 0:
        return False
    (length,) = _SIZE.unpack_from(body, start + 8)
    end = start + 12 + length
    choice = rng.randrange(4)
    if choice == 3:  # a decompression bomb in place of the batch, when it fits in the batch's room
        if not _BOMBS:
            _BOMBS.extend(_bomb(random.Random(n)) for n in range(2))
        bomb = rng.choice(_BOMBS)
        if len(bomb) <= length + 12:
            body[start : start + len(bomb)] = bomb
            body[start + len(bomb) : end] = bytes(end - start - len(bomb))
            return True
        choice = 1
    if choice == 0 and end > start + 61:  # the (compressed) records: flipped bits
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(start + 61, end)] ^= 1 << rng.randrange(8)
    elif choice == 2:  # codec 5-7, or the timestamp type, transactional and control flags
        body[start + 22] ^= rng.choice((0x05, 0x06, 0x07, 0x08, 0x10, 0x20))
    else:  # a record count that disagrees with the records
        (count,) = _SIZE.unpack_from(body, start + _RECORDS_COUNT_AT)
        struct.pack_into(
            ">i", body, start + _RECORDS_COUNT_AT, rng.choice([v for v in _INTERESTING_32 if v != count])
        )
    _fix_crc(body, start)
    return True


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One mutant of ``frame`` (size prefix included; the mutant's is right for its body)."""
    body = bytearray(frame[4:])
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not body:
            break
        kind = rng.randrange(7)
        position = rng.randrange(len(body))
        if kind == 0:  # truncation
            del body[rng.randrange(len(body)) :]
        elif kind == 1:  # bit flips
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        elif kind == 2 and position + 4 <= len(body):  # a length / count / int32 field
            value = rng.choice((*_INTERESTING_32, len(body) - position, len(body) - position + 1))
            struct.pack_into(">i", body, position, value)
        elif kind == 3 and position + 2 <= len(body):  # a string length / int16 field
            struct.pack_into(">h", body, position, rng.choice(_INTERESTING_16))
        elif kind == 4:  # an overlong or unterminated varint
            body[position : position + 1] = rng.choice(
                (b"\xff\xff\xff\xff\x0f", b"\xff" * 10, b"\x80\x80\x80\x80\x80")
            )
        elif kind == 5:  # a nested record batch damaged behind a good CRC
            if not mutate_batch(body, rng):
                body[position] = rng.randrange(256)
        else:  # random bytes inserted or overwritten
            chunk = rng.randbytes(rng.randint(1, 16))
            if rng.random() < 0.5:
                body[position:position] = chunk
            else:
                body[position : position + len(chunk)] = chunk
    return _SIZE.pack(len(body)) + bytes(body)


# ------------------------------------------------------------------------------------ the driver


def process_figures(pid: int) -> tuple[int, int]:
    """(RSS in bytes, open descriptors) of process ``pid``, from /proc."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(list(Path(f"/proc/{pid}/fd").iterdir()))


def process_sockets(pid: int) -> int:
    """How many sockets process ``pid`` has open (its listeners and connections)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


@dataclass
class FuzzReport:
    frames: int = 0
    answered: int = 0  # the sentinel after the frame was answered on the same connection
    closed: int = 0  # the broker closed the connection (a refused frame)
    hangs: int = 0
    probes: int = 0
    probe_ms: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    crashed: bool = False

    def summary(self) -> str:
        probes = sorted(self.probe_ms) or [0.0]
        rss, fds = self.rss or [0], self.fds or [0]
        return (
            f"frames fuzzed {self.frames}, answered {self.answered}, connections closed {self.closed}, "
            f"hangs {self.hangs}, crashes {int(self.crashed)}; probes {self.probes}: "
            f"p50 {probes[len(probes) // 2]:.1f} ms, max {probes[-1]:.1f} ms; "
            f"RSS {rss[0] >> 20}->{max(rss) >> 20} MiB (max), fds {fds[0]}->{max(fds)} (max)"
        )


class _Slot:
    """One connection of the driver: at most one mutant in flight, then its sentinel."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        self.sock.setblocking(False)
        self.buffer = bytearray()
        self.sentinel = b""
        self.deadline = 0.0


class Fuzzer:
    """Sends ``count`` mutants of ``frames`` to the broker at ``bootstrap`` (process ``pid``)."""

    def __init__(
        self,
        bootstrap: str,
        pid: int,
        frames: list[bytes],
        *,
        seed: int = 0,
        connections: int = 4,
        probe_every: int = 500,
        hang_timeout: float = 10.0,
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.pid = pid
        self.frames = frames
        self.rng = random.Random(seed)
        self.connections = connections
        self.probe_every = probe_every
        self.hang_timeout = hang_timeout
        self.alive = alive
        self.report = FuzzReport()
        self._correlation = _SENTINEL_BASE

    def probe(self) -> float:
        """ApiVersions and Metadata on a fresh connection; the milliseconds they took."""
        started = time.monotonic()
        with socket.create_connection(self.address, timeout=self.hang_timeout) as sock:
            for api_key, version, body in (
                (
                    kp.ApiKey.API_VERSIONS,
                    3,
                    ApiVersionsRequest(client_software_name="probe", client_software_version="1"),
                ),
                (kp.ApiKey.METADATA, 1, MetadataRequest(topics=None)),
            ):
                header = kp.RequestHeader(api_key, version, 1, "probe")
                sock.sendall(kp.encode_request(header, body))
                buffer = b""
                while len(buffer) < 4 or len(buffer) < 4 + _SIZE.unpack_from(buffer)[0]:
                    chunk = sock.recv(1 << 16)
                    if not chunk:
                        raise ConnectionError("the broker closed the health probe's connection")
                    buffer += chunk
                kp.decode_response(header, buffer[4:])
        elapsed = (time.monotonic() - started) * 1000
        self.report.probes += 1
        self.report.probe_ms.append(elapsed)
        return elapsed

    def _measure(self) -> None:
        rss, fds = process_figures(self.pid)
        self.report.rss.append(rss)
        self.report.fds.append(fds)

    def _send(self, slot: _Slot) -> None:
        """The next mutant on ``slot``, then an ApiVersions sentinel with a correlation id of its own."""
        mutant = mutate(self.rng.choice(self.frames), self.rng)
        self._correlation += 1
        header = kp.RequestHeader(kp.ApiKey.API_VERSIONS, 0, self._correlation, "sentinel")
        slot.sentinel = _SIZE.pack(self._correlation)
        slot.sock.setblocking(True)
        with contextlib.suppress(OSError):  # closed by the broker already: the read sees it
            slot.sock.sendall(mutant + kp.encode_request(header, ApiVersionsRequest()))
        slot.sock.setblocking(False)
        slot.deadline = time.monotonic() + self.hang_timeout
        self.report.frames += 1

    def _answered(self, slot: _Slot) -> bool:
        """Whether the sentinel's response is among the frames received on the slot."""
        buffer = slot.buffer
        correlation = slot.sentinel
        while len(buffer) >= 8:
            (size,) = _SIZE.unpack_from(buffer)
            if len(buffer) < 4 + size:
                return False
            if buffer[4:8] == correlation:
                del buffer[: 4 + size]
                return True
            del buffer[: 4 + size]
        return False

    def run(self, count: int) -> FuzzReport:
        self._measure()
        self.probe()
        selector = selectors.DefaultSelector()
        slots = [_Slot(self.address) for _ in range(self.connections)]
        sent = 0
        for slot in slots:
            if sent < count:
                self._send(slot)
                sent += 1
            selector.register(slot.sock, selectors.EVENT_READ, slot)
        in_flight = len([s for s in slots if s.sentinel])
        try:
            while in_flight:
                for key, _ in selector.select(timeout=0.5):
                    slot = key.data
                    try:
                        chunk = slot.sock.recv(1 << 20)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    finished = False
                    if not chunk:
                        self.report.closed += 1
                        finished = True
                    else:
                        slot.buffer += chunk
                        if self._answered(slot):
                            self.report.answered += 1
                            finished = True
                    if finished:
                        in_flight -= 1
                        if not chunk:  # a new connection in its place
                            selector.unregister(slot.sock)
                            slot.sock.close()
                            slots[slots.index(slot)] = slot = _Slot(self.address)
                            selector.register(slot.sock, selectors.EVENT_READ, slot)
                        slot.sentinel, slot.buffer = b"", bytearray()
                        if sent < count:
                            self._send(slot)
                            sent += 1
                            in_flight += 1
                            if sent % self.probe_every == 0:
                                self._check()
                now = time.monotonic()
                for slot in list(slots):
                    if slot.sentinel and now > slot.deadline:
                        self.report.hangs += 1
                        in_flight -= 1
                        selector.unregister(slot.sock)
                        slot.sock.close()
                        replacement = _Slot(self.address)
                        slots[slots.index(slot)] = replacement
                        selector.register(replacement.sock, selectors.EVENT_READ, replacement)
                        if sent < count:
                            self._send(replacement)
                            sent += 1
                            in_flight += 1
        finally:
            for slot in slots:
                with contextlib.suppress(OSError):
                    slot.sock.close()
            selector.close()
        self._check()
        return self.report

    def _check(self) -> None:
        if not self.alive():
            self.report.crashed = True
            raise RuntimeError(f"the broker died after {self.report.frames} frames")
        self.probe()
        self._measure()
