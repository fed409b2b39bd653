"""What the mirror's data path asks of the client transport (issue 10's throughput): large responses
received straight into their frame's buffer (``FrameReader.pending``/``filled``), and those buffers
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
from kctl.protocol import ApiKey, FramePool, FrameReader, decode_request, encode_response
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


# ------------------------------------------------------------------------------------- FrameReader


def frames_of(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@pytest.mark.parametrize("pool", [None, FramePool(min_size=16)])
def test_receiving_into_pending_gives_the_frames_feed_gives(pool: FramePool | None) -> None:
    payloads = [os.urandom(n) for n in (100, 3, 0, 70_000, 5)]
    stream = frames_of(*payloads)
    reader = FrameReader(1 << 20, pool)
    got: list[bytes] = []
    position = 0
    step = 7
    while position < len(stream):
        pending = reader.pending()
        if pending is not None and len(pending):
            n = min(step, len(pending), len(stream) - position)  # partial receives, as a socket's
            pending[:n] = stream[position : position + n]
            position += n
            frame = reader.filled(n)
            if frame is not None:
                got.append(bytes(frame))
        else:
            chunk = stream[position : position + step]
            position += len(chunk)
            got += [bytes(f) for f in reader.feed(chunk)]
        step = step * 3 % 9973 + 1
    assert got == payloads and reader.pending() is None and reader.buffered == 0


def test_filled_past_the_frame_or_without_one_is_refused() -> None:
    reader = FrameReader(1024)
    with pytest.raises(ValueError):
        reader.filled(1)
    assert reader.feed(struct.pack(">i", 4) + b"ab") == []
    with pytest.raises(ValueError):
        reader.filled(3)
    pending = reader.pending()
    assert pending is not None and len(pending) == 2
    pending[:] = b"cd"
    frame = reader.filled(2)
    assert frame is not None and bytes(frame) == b"abcd"


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
        reader = FrameReader()
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
