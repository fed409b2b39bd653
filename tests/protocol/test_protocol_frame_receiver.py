"""The one frame receiver (kctl.protocol.framing.FrameReceiver) alone, driven the way its three users
drive it — ``get_buffer``/``buffer_updated``/``next_frame`` (the broker's BufferedProtocol, the
client's ``recv_into``, the inter-broker channel) — with partial frames, many frames in one read,
frames split at every byte boundary, zero-size frames, bad sizes, and in-place large frames."""

from __future__ import annotations

import os
import struct

import pytest

import kctl.protocol as kp
from kctl.protocol.framing import FrameReceiver

SMALL = dict(first_read_size=16, read_size=64, large_read_size=256, in_place_above=100)
"""Tiny buffers, so that a short stream meets every path: growth, compaction, frames in place."""


def framed(*payloads: bytes) -> bytes:
    return b"".join(kp.frame(p) for p in payloads)


def receive(receiver: FrameReceiver, data: bytes, *, step: int) -> list[bytes]:
    """Receive ``data`` in reads of at most ``step`` bytes (less when ``get_buffer`` offers less)."""
    got: list[bytes] = []
    position = 0
    while position < len(data):
        room = receiver.get_buffer()
        assert len(room) > 0
        n = min(step, len(room), len(data) - position)
        room[:n] = data[position : position + n]
        receiver.buffer_updated(n)
        position += n
        while (frame := receiver.next_frame()) is not None:
            got.append(bytes(frame))
    return got


PAYLOADS = [b"", b"a", os.urandom(60), b"", os.urandom(99), os.urandom(100), os.urandom(101), os.urandom(700)]
STREAM = framed(*PAYLOADS)


@pytest.mark.parametrize("first_large_chunk", [None, 128])
def test_a_stream_split_at_every_byte_boundary(first_large_chunk: int | None) -> None:
    for cut in range(1, len(STREAM)):
        receiver = FrameReceiver(1000, first_large_chunk=first_large_chunk, **SMALL)
        got = receive(receiver, STREAM[:cut], step=len(STREAM))
        got += receive(receiver, STREAM[cut:], step=len(STREAM))
        assert got == PAYLOADS, cut
        assert receiver.buffered == 0


@pytest.mark.parametrize("step", [1, 2, 3, 5, 17, 64, 1000])
def test_partial_reads_of_every_size(step: int) -> None:
    receiver = FrameReceiver(1000, **SMALL)
    assert receive(receiver, STREAM, step=step) == PAYLOADS
    assert receiver.buffered == 0


def test_the_receive_buffer_stays_small_for_small_frames_whatever_the_stream() -> None:
    """What is left of a frame moves to the front of the receive buffer instead of the buffer growing."""
    payloads = [os.urandom(n % 50) for n in range(2000)]
    receiver = FrameReceiver(1000, **SMALL)
    assert receive(receiver, framed(*payloads), step=37) == payloads
    assert receiver.capacity == 64  # grown once to read_size, never beyond


def test_many_frames_in_one_read_are_all_handed_out_in_order() -> None:
    payloads = [bytes([i]) * (i % 7) for i in range(200)]
    receiver = FrameReceiver(1000)
    room = receiver.get_buffer()
    stream = framed(*payloads)
    assert len(room) >= len(stream)  # the first read buffer holds them all
    room[: len(stream)] = stream
    receiver.buffer_updated(len(stream))
    got = []
    while (frame := receiver.next_frame()) is not None:
        got.append(bytes(frame))
    assert got == payloads and receiver.next_size() is None


def test_a_partial_frame_waits_for_its_rest() -> None:
    receiver = FrameReceiver(1000)
    assert receiver.feed(kp.frame(b"hello")[:6]) == []
    assert receiver.next_size() == 5 and not receiver.frame_ready() and receiver.buffered == 6
    assert [bytes(f) for f in receiver.feed(b"llo")] == [b"hello"]


def test_zero_size_frames() -> None:
    receiver = FrameReceiver(0)
    assert [bytes(f) for f in receiver.feed(b"\x00" * 12)] == [b"", b"", b""]
    with pytest.raises(kp.FrameTooLarge):
        receiver.feed(struct.pack(">i", 1))


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_a_negative_size_is_refused_and_the_stream_stays_unusable(size: int) -> None:
    receiver = FrameReceiver(100)
    with pytest.raises(kp.ProtocolDecodeError, match=f"invalid negative frame size {size}"):
        receiver.feed(kp.frame(b"ok") + struct.pack(">i", size))
    assert receiver.buffered == 0
    with pytest.raises(kp.ProtocolDecodeError, match="negative"):
        receiver.next_frame()


def test_an_oversized_frame_is_refused_before_anything_of_it_is_allocated() -> None:
    receiver = FrameReceiver(1000, first_large_chunk=128, **SMALL)
    room = receiver.get_buffer()
    room[:4] = struct.pack(">i", 1001)
    receiver.buffer_updated(4)
    with pytest.raises(kp.FrameTooLarge) as info:
        receiver.next_size()
    assert (info.value.size, info.value.max_size) == (1001, 1000) and receiver.buffered == 0
    with pytest.raises(kp.FrameTooLarge):
        receiver.next_frame()


def test_a_large_frame_announced_and_not_sent_allocates_only_its_first_chunk() -> None:
    receiver = FrameReceiver(10**9, first_large_chunk=1024)
    receiver.feed(struct.pack(">i", 10**8) + b"xy")
    room = receiver.get_buffer()
    assert len(room) == 1024 - 2  # not 100 MB: the buffer grows as the bytes arrive
    room[:] = b"z" * len(room)
    receiver.buffer_updated(len(room))
    assert len(receiver.get_buffer()) == 1024  # doubled


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    payload = os.urandom(5000)
    receiver = FrameReceiver(10_000, **SMALL)
    receiver.feed(kp.frame(payload)[:10])
    room = receiver.get_buffer()
    assert len(room) == 5000 - 6  # the whole rest of the frame: one recv_into, no copy afterwards
    room[:] = payload[6:]
    receiver.buffer_updated(len(room))
    frame = receiver.next_frame()
    assert frame is not None and bytes(frame) == payload and not frame.readonly


def test_frames_stay_valid_whatever_is_received_next() -> None:
    receiver = FrameReceiver(1000, **SMALL)
    first = receiver.feed(framed(b"first", os.urandom(300)))
    later = receiver.feed(framed(*[os.urandom(50) for _ in range(30)]))
    assert bytes(first[0]) == b"first" and len(later) == 30


def test_room_is_offered_even_when_frames_are_not_taken() -> None:
    """A reader that pauses (the broker's queue is full) leaves frames in the buffer; a read that
    arrives anyway still gets room."""
    receiver = FrameReceiver(1000, **SMALL)
    for _ in range(20):
        room = receiver.get_buffer()
        assert len(room) > 0
        data = framed(b"0123456789")[: len(room)]
        room[: len(data)] = data
        receiver.buffer_updated(len(data))
    assert receiver.buffered > 64


def test_constructor_checks_its_sizes() -> None:
    with pytest.raises(ValueError):
        FrameReceiver(-1)
    with pytest.raises(ValueError):
        FrameReceiver(100, read_size=10, first_read_size=20)
    with pytest.raises(ValueError):
        FrameReceiver(100, in_place_above=300, large_read_size=256, read_size=64)
