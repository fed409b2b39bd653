"""Bad input on raw sockets against a real `kctl broker start`: every malformed, oversized or
unsupported request gets the right error code, or costs only its own connection. After each one a
connection opened before it still works, a fresh client gets ApiVersions and Metadata answered, the
broker process is alive, and its log shows no unhandled exception. A full disk is answered with
KAFKA_STORAGE_ERROR without losing acknowledged records, and the broker recovers when space is freed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import select
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
    frame,
    kcat,
    kctl,
    log_since,
    log_size,
    metadata,
    produce,
    produce_body,
    record_batch,
    request_header_v1,
    running_broker,
    unique,
)

import kctl.protocol as kp
from kctl.broker.server import KafkaServer, RequestContext
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import BrokerProcess

MAX_REQUEST = 1_048_576
MAX_MESSAGE = 65_536

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
KAFKA_STORAGE_ERROR = 56


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Request size limit 1 MiB, batches up to 64 KiB, no topic auto-creation."""
    properties = {
        "socket.request.max.bytes": str(MAX_REQUEST),
        "message.max.bytes": str(MAX_MESSAGE),
        "auto.create.topics.enable": "false",
    }
    with running_broker(tmp_path_factory, properties, "strict") as process:
        yield process


@pytest.fixture(scope="module")
def lenient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Defaults: topics are auto-created."""
    with running_broker(tmp_path_factory, None, "lenient") as process:
        yield process


@pytest.fixture(scope="module")
def topic(strict: BrokerProcess) -> str:
    name = unique("bad-input")
    assert create_topic(strict.bootstrap, name, partitions=1) == NONE
    return name


class Guard:
    """Opened before the bad input: a bystander connection and the broker log's position."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.log_position = log_size(broker)
        self.bystander = RawConnection(broker.bootstrap, client_id="bystander")
        assert api_versions(self.bystander).error_code == NONE

    def check(self) -> None:
        """Only the offending connection suffered: the bystander and a new client are served, the
        process lives, and nothing was handled by the catch-all for unexpected exceptions."""
        assert api_versions(self.bystander).error_code == NONE, "the bystander connection was hurt"
        assert metadata(self.bystander).controller_id == 0
        assert_broker_healthy(self.broker)
        text = log_since(self.broker, self.log_position)
        assert "Traceback" not in text, f"unhandled exception in the broker:\n{text}"

    def close(self) -> None:
        self.bystander.close()


@pytest.fixture
def guard(strict: BrokerProcess) -> Iterator[Guard]:
    g = Guard(strict)
    yield g
    g.close()


@pytest.fixture
def lenient_guard(lenient: BrokerProcess) -> Iterator[Guard]:
    g = Guard(lenient)
    yield g
    g.close()


def assert_closed(conn: RawConnection) -> None:
    assert conn.closed_by_peer(), "the broker kept the connection open"
    assert conn.unexpected == b"", f"the broker answered: {conn.unexpected[:200]!r}"


# --------------------------------------------------------------------------------------------- framing


def test_frame_over_socket_request_max_bytes_closes_the_connection(
    strict: BrokerProcess, guard: Guard
) -> None:
    with RawConnection(strict.bootstrap) as conn:
        # only the size prefix and a header: the broker must refuse before reading (or buffering) the rest
        conn.send(struct.pack(">i", MAX_REQUEST + 1) + request_header_v1(18, 0, 1))
        assert_closed(conn)
    with RawConnection(strict.bootstrap) as conn:
        conn.send(struct.pack(">i", 0x7FFFFFFF))
        assert_closed(conn)
    assert "socket.request.max.bytes" in log_since(strict, guard.log_position)
    guard.check()


def test_request_just_under_the_limit_is_read(strict: BrokerProcess, topic: str, guard: Guard) -> None:
    """The limit is not too tight: a produce request of almost 1 MiB is read and answered (its batch is
    above message.max.bytes, so the answer is MESSAGE_TOO_LARGE)."""
    batch = record_batch(1, value_size=MAX_REQUEST - 2000)
    part = produce(strict.bootstrap, topic, 0, batch)
    assert part.error_code == MESSAGE_TOO_LARGE
    guard.check()


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_frame_size_closes_the_connection(strict: BrokerProcess, guard: Guard, size: int) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(struct.pack(">i", size))
        assert_closed(conn)
    guard.check()


def test_truncated_frame_then_close(strict: BrokerProcess, guard: Guard) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(struct.pack(">i", 100) + request_header_v1(18, 0, 1))  # 100 bytes announced, ~14 sent
    with RawConnection(strict.bootstrap) as conn:
        conn.send(b"\x00\x00")  # half a size prefix
    with RawConnection(strict.bootstrap) as conn:  # a whole request, then a truncated one
        conn.send(kp.encode_request(conn.header(kp.ApiKey.API_VERSIONS, 0), {}) + b"\x00\x00\x01\x00\x00\x12")
        assert conn.recv_frame()  # the complete request is answered
    guard.check()


GARBAGE = {
    "random": random.Random(20261122).randbytes(4096),
    "zeros": bytes(4096),
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "tls-client-hello": bytes.fromhex("160301020001000200030300") + bytes(64),
    "valid-size-garbage-body": frame(random.Random(7).randbytes(200)),
    "empty-frame": frame(b""),
    "header-cut-in-client-id": frame(struct.pack(">hhih", 3, 1, 1, 50) + b"abc"),
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_garbage_closes_the_connection(strict: BrokerProcess, guard: Guard, name: str) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(GARBAGE[name])
        assert_closed(conn)
    guard.check()


# ---------------------------------------------------------------------------------------- api, version


@pytest.mark.parametrize("api_key", [999, 32767, -1, 67])
def test_unknown_api_key_closes_the_connection(strict: BrokerProcess, guard: Guard, api_key: int) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(frame(request_header_v1(api_key, 0, 1) + b"\x00" * 8))
        assert_closed(conn)
    guard.check()


def test_api_versions_at_an_unsupported_version_gets_the_v0_error_reply(
    strict: BrokerProcess, guard: Guard
) -> None:
    with RawConnection(strict.bootstrap) as conn:
        expected = {(v.api_key, v.min_version, v.max_version) for v in api_versions(conn, 3).api_keys}
        # v99 request: a header v2 would be flexible, but the broker must not need to understand it
        conn.send(frame(request_header_v1(18, 99, 4242) + b"\x00\x01x\x01y\x00"))
        reply = conn.recv_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", reply, 0)
        assert (correlation_id, error_code) == (4242, UNSUPPORTED_VERSION)
        ranges = {struct.unpack_from(">hhh", reply, 10 + 6 * i) for i in range(count)}
        assert len(reply) == 10 + 6 * count, "not the v0 layout (no throttle time, no tagged fields)"
        assert (18, 0, 4) in ranges
        assert ranges == expected
        # the client retries at our maximum on the same connection, as librdkafka does
        assert api_versions(conn, 4).error_code == NONE
        assert api_versions(conn, 0).error_code == NONE
    guard.check()


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(3, 99), (3, 13), (0, 12), (1, 17), (2, 9), (19, 8), (32, 5), (22, 5)],
    ids=["metadata-v99", "metadata-v13", "produce-v12", "fetch-v17", "listoffsets-v9", "createtopics-v8",
         "describeconfigs-v5", "initproducerid-v5"],
)  # fmt: skip
def test_other_api_at_an_unsupported_version_closes_the_connection(
    strict: BrokerProcess, guard: Guard, api_key: int, version: int
) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(frame(request_header_v1(api_key, version, 1) + b"\x00" * 16))
        assert_closed(conn)
    guard.check()


# ------------------------------------------------------------------------------------ malformed bodies


HUGE = 2**31 - 1


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


MALFORMED_PRODUCE = {
    # Produce v3: transactional_id null, acks 1, timeout 1000, then a topic array of 2^31-1 entries
    "v3-topic-count": request_header_v1(0, 3, 1) + struct.pack(">hhii", -1, 1, 1000, HUGE),
    # ...one topic "t" with 2^31-1 partitions
    "v3-partition-count": request_header_v1(0, 3, 1)
    + struct.pack(">hhii", -1, 1, 1000, 1)
    + struct.pack(">h", 1)
    + b"t"
    + struct.pack(">i", HUGE),
    # ...one partition whose records claim 2^31-1 bytes
    "v3-records-size": request_header_v1(0, 3, 1)
    + struct.pack(">hhii", -1, 1, 1000, 1)
    + struct.pack(">h", 1)
    + b"t"
    + struct.pack(">iii", 1, 0, HUGE),
    # ...a topic name claiming 32767 bytes
    "v3-string-length": request_header_v1(0, 3, 1) + struct.pack(">hhiih", -1, 1, 1000, 1, 32767) + b"t",
    # Produce v9 (flexible, header v2): a compact topic array of 2^31-1 entries (varint n+1)
    "v9-compact-count": request_header_v1(0, 9, 1)
    + b"\x00"  # header tagged fields
    + b"\x00"  # transactional_id: compact null
    + struct.pack(">hi", 1, 1000)
    + _uvarint(HUGE + 1),
    # ...a varint that never ends
    "v9-endless-varint": request_header_v1(0, 9, 1)
    + b"\x00\x00"
    + struct.pack(">hi", 1, 1000)
    + b"\xff" * 12,
}


@pytest.mark.parametrize("name", list(MALFORMED_PRODUCE))
def test_malformed_produce_closes_the_connection(strict: BrokerProcess, guard: Guard, name: str) -> None:
    with RawConnection(strict.bootstrap) as conn:
        conn.send(frame(MALFORMED_PRODUCE[name]))
        assert_closed(conn)
    guard.check()


# ---------------------------------------------------------------------------------- produce: errors


def flip_byte(batch: bytes, position: int) -> bytes:
    data = bytearray(batch)
    data[position] ^= 0x55
    return bytes(data)


def test_bad_crc_is_corrupt_message(strict: BrokerProcess, topic: str, guard: Guard) -> None:
    batch = record_batch(5, value_size=50)
    with RawConnection(strict.bootstrap) as conn:
        for position in (len(batch) - 3, 21, 40):  # a value byte, the attributes, a producer id byte
            response = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(topic, 0, flip_byte(batch, position)))
            [part] = response.responses[0].partition_responses
            assert part.error_code == CORRUPT_MESSAGE, (position, part)
        # the connection stays usable and nothing was appended
        good = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(topic, 0, batch))
        [part] = good.responses[0].partition_responses
        assert part.error_code == NONE
    before = part.base_offset
    assert produce(strict.bootstrap, topic, 0, batch).base_offset == before + 5
    guard.check()


def test_batch_over_message_max_bytes_is_message_too_large(
    strict: BrokerProcess, topic: str, guard: Guard
) -> None:
    big = record_batch(1, value_size=MAX_MESSAGE + 100)
    assert len(big) > MAX_MESSAGE
    assert produce(strict.bootstrap, topic, 0, big).error_code == MESSAGE_TOO_LARGE
    fits = record_batch(1, value_size=MAX_MESSAGE - 200)
    assert len(fits) <= MAX_MESSAGE
    assert produce(strict.bootstrap, topic, 0, fits).error_code == NONE
    guard.check()


INVALID_NAMES = ["bad topic", "bad/slash", "..", ".", "x" * 250, "ünïcode", ""]


def test_create_topics_with_an_invalid_name(strict: BrokerProcess, guard: Guard) -> None:
    body = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for n in INVALID_NAMES
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    with RawConnection(strict.bootstrap) as conn:
        response = conn.request(kp.ApiKey.CREATE_TOPICS, 5, body)
    assert [(r.name, r.error_code) for r in response.topics] == [
        (n, INVALID_TOPIC_EXCEPTION) for n in INVALID_NAMES
    ]
    guard.check()


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_produce_to_an_invalid_topic_name_with_auto_create(
    lenient: BrokerProcess, lenient_guard: Guard, name: str
) -> None:
    assert produce(lenient.bootstrap, name, 0, record_batch()).error_code == INVALID_TOPIC_EXCEPTION
    lenient_guard.check()


def test_metadata_auto_create_of_an_invalid_topic_name(lenient: BrokerProcess, lenient_guard: Guard) -> None:
    with RawConnection(lenient.bootstrap) as conn:
        response = metadata(conn, ["bad topic", "x" * 250], allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad topic", INVALID_TOPIC_EXCEPTION),
        ("x" * 250, INVALID_TOPIC_EXCEPTION),
    ]
    lenient_guard.check()


def test_produce_to_a_missing_topic_without_auto_create(strict: BrokerProcess, guard: Guard) -> None:
    missing = unique("missing")
    part = produce(strict.bootstrap, missing, 0, record_batch())
    assert part.error_code == UNKNOWN_TOPIC_OR_PARTITION
    with RawConnection(strict.bootstrap) as conn:
        [meta] = metadata(conn, [missing], allow_auto_topic_creation=True).topics
        assert meta.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert not (strict.data_dir / f"{missing}_0").exists()
    guard.check()


def test_produce_to_a_missing_partition(strict: BrokerProcess, topic: str, guard: Guard) -> None:
    assert produce(strict.bootstrap, topic, 7, record_batch()).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert produce(strict.bootstrap, topic, -1, record_batch()).error_code == UNKNOWN_TOPIC_OR_PARTITION
    guard.check()


@pytest.mark.parametrize("acks", [2, 3, -2])
def test_invalid_required_acks(strict: BrokerProcess, topic: str, guard: Guard, acks: int) -> None:
    with RawConnection(strict.bootstrap) as conn:
        end = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(topic, 0, record_batch()))
        [ok] = end.responses[0].partition_responses
        response = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(topic, 0, record_batch(), acks=acks))
        [part] = response.responses[0].partition_responses
        assert part.error_code == INVALID_REQUIRED_ACKS
        after = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(topic, 0, record_batch()))
        [next_] = after.responses[0].partition_responses
        assert next_.base_offset == ok.base_offset + 3, "the refused batch was appended"
    guard.check()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_below_v3_takes_a_record_batch_and_refuses_garbage(
    strict: BrokerProcess, topic: str, guard: Guard, version: int
) -> None:
    """Produce v0-2 carry the old message formats (up-converted: test_e2e_produce_legacy.py); a
    RecordBatch in them is appended as v3 would, bytes that are neither are CORRUPT_MESSAGE."""
    with RawConnection(strict.bootstrap) as conn:
        response = conn.request(kp.ApiKey.PRODUCE, version, produce_body(topic, 0, record_batch()))
        [part] = response.responses[0].partition_responses
        assert part.error_code == NONE
        garbage = b"\x00" * 16 + b"\x01" + b"\xff" * 20  # a "magic 1" message that does not frame
        response = conn.request(kp.ApiKey.PRODUCE, version, produce_body(topic, 0, garbage))
        [part] = response.responses[0].partition_responses
        assert part.error_code == CORRUPT_MESSAGE
        assert api_versions(conn).error_code == NONE  # the connection stays usable
    guard.check()


# ------------------------------------------------------------------- pipelining, framing, flow control


def _fetch_body(topic: str, offset: int = 0, max_bytes: int = 32 << 20) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=max_bytes,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)],
            )
        ],
        forgotten_topics_data=[],
    )


def _produce_partitions(topic: str, batches: list[bytes]) -> ProduceRequest:
    """One Produce request with ``batches[i]`` for partition i."""
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)],
            )
        ],
    )


def _batches(records: bytes) -> list[bytes]:
    """The record batches in ``records``, each from its magic byte on (the base offset and the leader
    epoch before it are the broker's to set)."""
    out, position = [], 0
    while position + 12 <= len(records):
        size = 12 + struct.unpack_from(">i", records, position + 8)[0]
        out.append(records[position + 16 : position + size])
        position += size
    return out


def test_pipelined_requests_in_one_write_are_answered_in_order(
    strict: BrokerProcess, topic: str, guard: Guard
) -> None:
    """300 requests of three APIs in one sendall, a few Produce with acks=0 among them: all the others
    are answered, in request order, and the batches are appended in that order too."""
    with RawConnection(strict.bootstrap) as conn:
        stream = bytearray()
        answered: list[kp.RequestHeader] = []
        relative: list[int] = []  # the answered batches' offsets after the first batch's
        produced = 0
        for i in range(300):
            kind = i % 3
            if kind == 0:
                header = conn.header(kp.ApiKey.API_VERSIONS, 3)
                body: Any = ApiVersionsRequest(client_software_name="raw-e2e", client_software_version="1")
            elif kind == 1:
                header = conn.header(kp.ApiKey.METADATA, 12)
                body = MetadataRequest(
                    topics=[MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            else:
                header = conn.header(kp.ApiKey.PRODUCE, 9)
                acks = 0 if i % 30 == 2 else 1
                body = produce_body(topic, 0, record_batch(2, value_size=20 + i), acks=acks)
                produced += 2
                if acks == 0:
                    stream += kp.encode_request(header, body)
                    continue
                relative.append(produced - 2)
            stream += kp.encode_request(header, body)
            answered.append(header)
        conn.send(bytes(stream))
        offsets = []
        for header in answered:  # decode_response checks the correlation id
            response = kp.decode_response(header, conn.recv_frame())[1]
            if header.api_key == kp.ApiKey.PRODUCE:
                [part] = response.responses[0].partition_responses
                assert part.error_code == NONE, part
                offsets.append(part.base_offset)
            elif header.api_key == kp.ApiKey.METADATA:
                assert [t.name for t in response.topics] == [topic]
            else:
                assert response.error_code == NONE
        # the acks=0 batches (every tenth produce) took their offsets in between, unanswered
        assert relative[0] == 2, "the first produce is sent with acks=0"
        assert offsets == [offsets[0] - 2 + r for r in relative]
        assert api_versions(conn).error_code == NONE, "a response was left over"
    guard.check()


def test_requests_split_across_many_writes(strict: BrokerProcess, topic: str, guard: Guard) -> None:
    """Six requests — ApiVersions and five ~50 KiB Produce requests (one batch each, as Produce v3+
    requires) — sent a byte per send for their first 2 KiB, then in random slices of 1 to 97 bytes:
    all are reassembled (the broker checks each batch's CRC), answered in order, and the batches read
    back byte for byte."""
    batches = [record_batch(20, value_size=2500, key=b"k%d-" % i) for i in range(5)]  # ~50 KiB each
    assert all(40_000 < len(b) < MAX_MESSAGE for b in batches)
    with RawConnection(strict.bootstrap) as conn:
        first = conn.header(kp.ApiKey.API_VERSIONS, 3)
        produces = [conn.header(kp.ApiKey.PRODUCE, 9) for _ in batches]
        versions = ApiVersionsRequest(client_software_name="a", client_software_version="1")
        stream = kp.encode_request(first, versions)
        for header, batch in zip(produces, batches, strict=True):
            stream += kp.encode_request(header, produce_body(topic, 0, batch))
        assert 250_000 < len(stream) < MAX_REQUEST
        rng = random.Random(3)
        position = 0
        while position < len(stream):
            step = 1 if position < 2048 else rng.randint(1, 97)
            conn.send(stream[position : position + step])
            position += step
        assert kp.decode_response(first, conn.recv_frame())[1].error_code == NONE
        offsets = []
        for header in produces:
            [part] = kp.decode_response(header, conn.recv_frame())[1].responses[0].partition_responses
            assert part.error_code == NONE, part
            offsets.append(part.base_offset)
        assert offsets == [offsets[0] + 20 * i for i in range(5)]
        fetched = conn.request(kp.ApiKey.FETCH, 12, _fetch_body(topic, offsets[0], 1 << 20))
        [stored] = fetched.responses[0].partitions
        assert _batches(bytes(stored.records))[:5] == [b[16:] for b in batches]
    guard.check()


def test_large_produce_then_small_ones_on_one_connection(
    lenient: BrokerProcess, lenient_guard: Guard
) -> None:
    """An 8 MiB Produce request (eight ~1 MiB batches, one per partition as Produce v3+ requires)
    pipelined with a small one, then another large one with other bytes, all in one sendall: all are
    answered in order and every batch reads back byte for byte (a receive buffer reused too early
    would show here)."""
    name = unique("large")
    assert create_topic(lenient.bootstrap, name, partitions=8) == NONE
    rng = random.Random(8)

    def batch(seed: int) -> bytes:
        builder = RecordBatchBuilder()
        builder.append(1_700_000_000_000, None, random.Random(seed).randbytes(1_000_000))
        return builder.build()

    large = [[batch(rng.randrange(1 << 30)) for _ in range(8)] for _ in range(2)]
    small = [record_batch(3)]
    assert sum(map(len, large[0])) > 8_000_000
    with RawConnection(lenient.bootstrap) as conn:
        requests = [large[0], small, large[1], small]
        headers = [conn.header(kp.ApiKey.PRODUCE, 9) for _ in requests]
        conn.send(
            b"".join(
                kp.encode_request(h, _produce_partitions(name, r))
                for h, r in zip(headers, requests, strict=True)
            )
        )
        offsets = []
        for header in headers:
            parts = kp.decode_response(header, conn.recv_frame())[1].responses[0].partition_responses
            assert all(part.error_code == NONE for part in parts), parts
            offsets.append([part.base_offset for part in parts])
        assert offsets == [[0] * 8, [1], [4] + [1] * 7, [5]]  # partition 0: 1 + 3 + 1 + 3 records
        stored = []
        for partition in range(8):
            body = _fetch_body(name)
            body.topics[0].partitions[0].partition = partition
            fetched = conn.request(kp.ApiKey.FETCH, 12, body)  # ~2 MB per partition
            [part] = fetched.responses[0].partitions
            assert part.error_code == NONE
            stored.append(_batches(bytes(part.records)))
    sent: list[list[bytes]] = [[] for _ in range(8)]
    for request in requests:
        for partition, records in enumerate(request):
            sent[partition] += _batches(records)
    assert sum(map(len, stored)) == sum(map(len, sent)) == 18
    for partition, (got, want) in enumerate(zip(stored, sent, strict=True)):
        assert got == want, f"partition {partition} differs"
    lenient_guard.check()


def test_a_request_buffer_a_handler_keeps_is_not_reused() -> None:
    """In process, with a handler that keeps a view of the records of every third Produce request: a
    connection receives a large request into the buffer of an earlier one only once no view of that
    is left, so the kept views still hold their own bytes after the later requests."""
    kept: list[tuple[bytes, memoryview]] = []

    async def dispatch(context: RequestContext, body: Any) -> ProduceResponse:
        records = body.topic_data[0].partition_data[0].records
        if context.header.correlation_id % 3 == 0:
            kept.append((bytes(records), records))
        return ProduceResponse(responses=[], throttle_time_ms=0)

    def client(port: int) -> None:
        with RawConnection(f"127.0.0.1:{port}") as conn:
            for i in range(30):
                builder = RecordBatchBuilder()  # each request a little smaller: it fits the last's buffer
                builder.append(1_700_000_000_000, None, bytes([i]) * (300_000 - 1000 * i))
                response = conn.request(kp.ApiKey.PRODUCE, 9, produce_body("t", 0, builder.build()))
                assert response.responses == []

    async def main() -> None:
        server = KafkaServer("127.0.0.1", 0, dispatch, {kp.ApiKey.PRODUCE: (3, 11)}, max_request_size=1 << 24)
        await server.start()
        try:
            await asyncio.get_running_loop().run_in_executor(None, client, server.port)
        finally:
            await server.stop()

    asyncio.run(main())
    assert len(kept) == 10
    for copy, view in kept:
        assert bytes(view) == copy, "a buffer still in use received another request"


STALL_SECONDS = 2.0
FLOOD_LIMIT = 32 << 20


def _flood(conn: RawConnection, request: bytes) -> int:
    """With small socket buffers, send ``request`` over and over without reading a response, until
    the socket stays unwritable for STALL_SECONDS (the broker stopped reading it) or FLOOD_LIMIT bytes
    went out; returns the bytes sent."""
    sock = conn.sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    sock.setblocking(False)
    chunk = request * max(1, 65536 // len(request))
    sent = 0
    while sent < FLOOD_LIMIT:
        _, writable, _ = select.select([], [sock], [], STALL_SECONDS)
        if not writable:
            break
        offset = sent % len(request)
        try:
            sent += sock.send(chunk[offset:])
        except BlockingIOError:
            continue
    sock.setblocking(True)
    return sent


@pytest.mark.parametrize("api", ["fetch", "api-versions"])
def test_a_client_that_never_reads_stalls_only_itself(
    lenient: BrokerProcess, lenient_guard: Guard, api: str
) -> None:
    """A client pipelines requests without reading a response: the broker stops reading it (its sends
    stall long before the flood limit) and serves other clients meanwhile. Fetch responses are file
    regions (sendfile blocks); ApiVersions responses are bytes (the transport asks to stop writing).
    Once the client reads, every request it sent whole is answered."""
    name = unique("stall")
    assert create_topic(lenient.bootstrap, name) == NONE
    assert produce(lenient.bootstrap, name, 0, record_batch(1, value_size=1_000_000)).error_code == NONE
    if api == "fetch":
        header = kp.RequestHeader(kp.ApiKey.FETCH, 12, 7, "flood")
        request = kp.encode_request(header, _fetch_body(name))
    else:
        header = kp.RequestHeader(kp.ApiKey.API_VERSIONS, 3, 7, "flood")
        versions = ApiVersionsRequest(client_software_name="f", client_software_version="1")
        request = kp.encode_request(header, versions)
    with RawConnection(lenient.bootstrap, client_id="flood") as flooder:
        sent = _flood(flooder, request)
        assert 0 < sent < FLOOD_LIMIT, f"the broker kept reading a client that reads nothing ({sent} bytes)"
        with RawConnection(lenient.bootstrap, client_id="other") as other:
            assert api_versions(other).error_code == NONE
            part = produce(lenient.bootstrap, name, 0, record_batch(2))
            assert (part.error_code, part.base_offset) == (NONE, 1)
            fetched = other.request(kp.ApiKey.FETCH, 12, _fetch_body(name, 1))
            [stored] = fetched.responses[0].partitions
            assert stored.error_code == NONE and len(_batches(bytes(stored.records))) == 1
        if api == "api-versions":  # the stalled client reads at last: all its whole requests are answered
            count = sent // len(request)
            correlation_id = struct.pack(">i", header.correlation_id)
            for i in range(count):
                response = flooder.recv_frame()
                assert response[:4] == correlation_id
                if i in (0, count - 1):
                    assert kp.decode_response(header, response)[1].error_code == NONE
    lenient_guard.check()


# ------------------------------------------------------------------------------------------ disk full


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
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


def _stored(bootstrap: str, name: str) -> list[tuple[int, str]]:
    out = kcat(bootstrap, "-C", "-t", name, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\n").stdout
    return [(int(o), v) for o, v in (line.split(" ", 1) for line in out.decode().splitlines())]


def _value_batch(first: int, count: int, size: int) -> tuple[bytes, list[str]]:
    builder = RecordBatchBuilder()
    values = [f"rec-{first + i:08d}-" + "z" * size for i in range(count)]
    for value in values:
        builder.append(1_700_000_000_000, None, value.encode())
    return builder.build(), values


def test_disk_full_is_kafka_storage_error_and_the_broker_recovers(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        broker = BrokerProcess(
            disk / "data", {"log.segment.bytes": str(1 << 30)}, log_file=tmp_path / "b.log"
        )
        broker.start()
        try:
            name = unique("full")
            assert create_topic(broker.bootstrap, name) == NONE
            acked: list[str] = []
            # leave about 1 MiB free, then produce 48 KiB batches until the disk is full
            free = _free_bytes(disk)
            filler = disk / "filler"
            filler.write_bytes(b"\0" * max(free - (1 << 20), 0))
            errors: list[Any] = []
            with RawConnection(broker.bootstrap) as conn:
                for _ in range(200):
                    records, values = _value_batch(len(acked), 16, 3000)
                    response = conn.request(kp.ApiKey.PRODUCE, 9, produce_body(name, 0, records))
                    [part] = response.responses[0].partition_responses
                    if part.error_code != NONE:
                        errors.append(part)
                        break
                    assert part.base_offset == len(acked)
                    acked += values
            assert errors, "the disk never filled up"
            assert errors[0].error_code == KAFKA_STORAGE_ERROR, errors[0]
            assert acked, "nothing fitted on the disk at all"
            assert_broker_healthy(broker)
            assert _stored(broker.bootstrap, name) == list(enumerate(acked)), "acknowledged records lost"

            filler.unlink()  # free the space: the broker keeps working
            records, values = _value_batch(len(acked), 16, 3000)
            part = produce(broker.bootstrap, name, 0, records)
            assert (part.error_code, part.base_offset) == (NONE, len(acked)), part
            assert _stored(broker.bootstrap, name) == list(enumerate(acked + values))
            assert_broker_healthy(broker)
        finally:
            broker.stop()
        verify = kctl("log", "verify", str(broker.data_dir / f"{name}_0"))
        assert verify.returncode == 0, (verify.stdout + verify.stderr).decode(errors="replace")


def _free_bytes(directory: Path) -> int:
    import os

    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize
