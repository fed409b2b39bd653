"""What the mirror's data path asks of the client transport (issue 10's throughput): large responses
received straight into their frame's buffer (``FrameReceiver.get_buffer``), and those buffers
used again once every view of an earlier response is gone (``FramePool``) instead of fresh,
zero-filled memory per Fetch answer; checked on the sans-io reader, and through a real
``BrokerConnection`` on a loopback socket."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kctl.client import BrokerConnection, TopicPartition
from kctl.client.consumer.fetcher import build_fetch_request
from kctl.protocol import ApiKey, FramePool, FrameReceiver, decode_request, encode_response
from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kctl.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData

# ------------------------------------------------------------------------------------- FramePool


def test_a_free_buffer_is_used_again_and_a_busy_one_is_not() -> None:
    pool = FramePool(min_size=1024)
    first = pool.allocate(5000)
    owner = id(first.obj)  # (not the object: a reference to it would keep it busy)
    first[:3] = b"abc"
    piece = first[1:3][0:1]  # a view of a view still holds the buffer
    del first
    second = pool.allocate(4000)
    assert id(second.obj) != owner and pool.reused == 0
    del piece
    third = pool.allocate(4500)
    assert id(third.obj) == owner and pool.reused == 1 and len(third) == 4500
    assert len(pool.allocate(10)) == 10 and pool.reused == 1  # small frames: not pooled


def test_the_smallest_free_buffer_that_fits_is_taken() -> None:
    pool = FramePool(min_size=1024)
    views = [pool.allocate(size) for size in (8192, 2048, 4096)]
    owners = [id(v.obj) for v in views]
    del views
    a = pool.allocate(3000)
    assert id(a.obj) == owners[2]
    b = pool.allocate(3000)
    assert id(b.obj) == owners[0]  # 4096 is busy now: the next that fits
    c = pool.allocate(2000)
    assert id(c.obj) == owners[1]
    assert pool.reused == 3


def test_the_pool_keeps_at_most_max_buffers_and_max_bytes() -> None:
    pool = FramePool(min_size=1024, max_buffers=2, max_bytes=64 * 1024)
    held = [pool.allocate(1024) for _ in range(3)]
    assert pool.kept_bytes == 2048  # the third was handed out, not kept
    del held
    big = pool.allocate(16 * 1024)  # no free buffer fits: it takes a smaller free one's place
    assert pool.kept_bytes == 1024 + 16 * 1024 and len(big) == 16 * 1024
    del big
    huge = pool.allocate(100 * 1024)  # above max_bytes with the others: not kept
    assert pool.kept_bytes == 1024 + 16 * 1024
    del huge


# ----------------------------------------------------------------------------------- FrameReceiver


def frames_of(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@pytest.mark.parametrize("pool", [None, FramePool(min_size=16)])
def test_receiving_into_get_buffer_gives_the_frames_feed_gives(pool: FramePool | None) -> None:
    payloads = [os.urandom(n) for n in (100, 3, 0, 70_000, 5, 300_000, 9)]
    stream = frames_of(*payloads)
    assert [bytes(f) for f in FrameReceiver(1 << 20).feed(stream)] == payloads
    receiver = FrameReceiver(1 << 20, pool)
    got: list[bytes] = []
    position = 0
    step = 7
    while position < len(stream):
        room = receiver.get_buffer()
        n = min(step, len(room), len(stream) - position)  # partial receives, as a socket's
        room[:n] = stream[position : position + n]
        position += n
        receiver.buffer_updated(n)
        while (frame := receiver.next_frame()) is not None:
            got.append(bytes(frame))
        step = step * 3 % 9973 + 1
    assert got == payloads and receiver.buffered == 0


def test_a_large_frame_is_received_in_place_into_a_pooled_buffer() -> None:
    pool = FramePool(min_size=1024)
    receiver = FrameReceiver(1 << 20, pool, in_place_above=1000)
    payload = os.urandom(50_000)
    first = receiver.feed(frames_of(payload))[0]
    owner = id(first.obj)
    assert bytes(first) == payload and pool.kept_bytes >= 50_000  # the fresh buffer went to the pool
    del first
    receiver.feed(struct.pack(">i", 40_000) + payload[:10])
    room = receiver.get_buffer()  # the rest of the frame, in the pooled buffer
    assert len(room) == 40_000 - 10 and id(room.obj) == owner and pool.reused == 1
    room[:] = payload[10:40_000]
    del room
    receiver.buffer_updated(40_000 - 10)
    second = receiver.next_frame()
    assert second is not None and bytes(second) == payload[:40_000]


def test_buffer_updated_past_the_room_given_is_refused() -> None:
    receiver = FrameReceiver(1 << 20, in_place_above=1000)
    with pytest.raises(ValueError):
        receiver.buffer_updated(len(receiver.get_buffer()) + 1)
    assert receiver.feed(struct.pack(">i", 4000) + b"ab") == []
    room = receiver.get_buffer()
    with pytest.raises(ValueError):
        receiver.buffer_updated(len(room) + 1)
    room[: len(room)] = b"c" * len(room)
    receiver.buffer_updated(len(room))
    frame = receiver.next_frame()
    assert frame is not None and bytes(frame) == b"ab" + b"c" * 3998


# ------------------------------------------------------------------------------------- a connection


class BigAnswers:
    """A loopback peer answering each Fetch (v4) with one partition of ``size`` random bytes as its
    records, sent in small writes so the client meets partial frames; one connection."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent: list[bytes] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        reader = FrameReceiver()
        with sock:
            try:
                while data := sock.recv(65536):
                    for frame in reader.feed(data):
                        header, _ = decode_request(frame)
                        if header.api_key == ApiKey.API_VERSIONS:
                            body = ApiVersionsResponse(
                                error_code=0, api_keys=[ApiVersion(18, 0, 3), ApiVersion(1, 4, 4)]
                            )
                            sock.sendall(encode_response(header, body))
                            continue
                        records = os.urandom(self.size)
                        self.sent.append(records)
                        part = PartitionData(
                            partition_index=0,
                            error_code=0,
                            high_watermark=0,
                            aborted_transactions=None,
                            records=records,
                        )
                        topics = [FetchableTopicResponse(topic="t", partitions=[part])]
                        answer = encode_response(header, FetchResponse(throttle_time_ms=0, responses=topics))
                        for start in range(0, len(answer), 40_000):
                            sock.sendall(answer[start : start + 40_000])
            except OSError:
                return
            except BaseException as error:
                self.errors.append(error)


@pytest.fixture
def big_answers() -> Iterator[BigAnswers]:
    peer = BigAnswers(300_000)
    yield peer
    peer.listener.close()
    assert not peer.errors, peer.errors


def test_large_answers_come_through_a_pooled_connection_intact(big_answers: BigAnswers) -> None:
    request = build_fetch_request(
        [(TopicPartition("t", 0), 0)],
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partition_max_bytes=1 << 20,
    )
    with BrokerConnection("127.0.0.1", big_answers.port, timeout=10) as conn:
        assert conn.frame_pool is None
        pool = conn.use_frame_pool()
        assert conn.frame_pool is pool
        kept: list[memoryview] = []
        for round_ in range(8):
            response = conn.request(ApiKey.FETCH, request, 4)
            records = response.responses[0].partitions[0].records
            assert isinstance(records, memoryview) and records.obj is not None  # a view of the frame
            assert bytes(records) == big_answers.sent[round_]
            if round_ < 2:
                kept.append(records)  # still referred to: their buffers stay theirs
        # the records kept are untouched by the answers received after them into reused buffers
        assert [bytes(r) for r in kept] == big_answers.sent[:2]
    assert pool.reused >= 4  # later answers reused the buffers of those let go
