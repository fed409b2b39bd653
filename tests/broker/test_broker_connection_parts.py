"""The three parts of a broker connection, each alone (kctl.broker.server composes them): the frame
intake (bytes in, the queued.max.request.bytes budget, reading paused and resumed), the request loop
(one request at a time in arrival order, the in-flight limit, the throttle mute, bad input) and the
response writer (coalesced writes, file regions, flow control). Fakes stand in for the transport and
the neighbouring parts; the whole connection on real sockets is tested in test_e2e_bad_input,
test_broker_sendfile and the client and interop suites."""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest

import kctl.protocol as kp
from kctl.broker.connection_limits import ConnectionLimits
from kctl.broker.frame_intake import FrameIntake
from kctl.broker.request_loop import MAX_QUEUED_FRAMES, RequestLoop
from kctl.broker.response_writer import FLUSH_BYTES, ConnectionClosed, ResponseWriter
from kctl.broker.security.sasl import Session
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.metadata import MetadataRequest, MetadataResponse


class FakeTransport:
    """Records what the parts ask of an asyncio transport."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.calls: list[str] = []
        self.closing = False

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks: list[Any]) -> None:
        self.writes.append(b"".join(bytes(c) for c in chunks))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.calls.append("close")

    def get_extra_info(self, name: str) -> Any:
        return None


@dataclass
class Sink:
    frames: list[bytes] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    ended: int = 0

    def submit(self, frame: memoryview) -> None:
        self.frames.append(bytes(frame))

    def refuse(self, why: str) -> None:
        self.refused.append(why)

    def end_of_stream(self) -> None:
        self.ended += 1


def receive(intake: FrameIntake, data: bytes) -> None:
    """What the transport does with ``data`` (in as many reads as the buffers ask)."""
    while data:
        room = intake.get_buffer()
        n = min(len(room), len(data))
        room[:n] = data[:n]
        intake.buffer_updated(n)
        data = data[n:]


def new_intake(max_request_size: int = 1 << 20, **limits: Any) -> tuple[FrameIntake, FakeTransport, Sink]:
    transport, sink = FakeTransport(), Sink()
    intake = FrameIntake(
        transport, sink, limits=ConnectionLimits(**limits), connection_id=1, max_request_size=max_request_size
    )
    return intake, transport, sink


# ------------------------------------------------------------------------------------ the intake


def test_intake_hands_out_every_frame_of_a_read_in_order() -> None:
    intake, transport, sink = new_intake()
    payloads = [b"a", b"", os.urandom(300_000), b"bc"]
    receive(intake, b"".join(kp.frame(p) for p in payloads))
    assert sink.frames == payloads and transport.calls == []
    assert intake.limits.reserved == sum(map(len, payloads))  # given back as they are handled
    intake.give_back(300_000)
    assert intake.limits.reserved == 3


@pytest.mark.parametrize(
    ("size", "why"),
    [
        (1001, "request of 1001 bytes exceeds socket.request.max.bytes (1000)"),
        (-5, "invalid negative frame size -5"),
    ],
)
def test_intake_refuses_a_bad_size_and_reads_nothing_more(size: int, why: str) -> None:
    intake, transport, sink = new_intake(1000)
    receive(intake, kp.frame(b"ok") + struct.pack(">i", size) + b"x" * 20)
    assert sink.frames == [b"ok"] and sink.refused == [why]
    assert transport.calls == ["pause"] and not intake.receiving
    assert intake.limits.reserved == 2  # nothing of the refused frame


def test_a_held_intake_pauses_and_hands_out_the_rest_when_released() -> None:
    intake, transport, sink = new_intake()
    intake.hold()
    receive(intake, kp.frame(b"1") + kp.frame(b"2"))
    assert sink.frames == [] and transport.calls == ["pause"]
    intake.release()
    assert sink.frames == [b"1", b"2"] and transport.calls == ["pause", "resume"]


def test_a_large_frame_waits_for_budget_before_it_is_received() -> None:
    intake, transport, sink = new_intake(queued_max_bytes=200_000)
    receive(intake, kp.frame(b"x" * 150_000))  # complete: counted at once
    receive(intake, struct.pack(">i", 180_000) + b"y" * 10)  # large, does not fit: not read further
    assert len(sink.frames) == 1 and transport.calls == ["pause"]
    assert intake.limits.reserved == 150_000
    intake.give_back(150_000)  # the first is handled: the second is reserved, reading resumes
    assert transport.calls == ["pause", "resume"] and intake.limits.reserved == 180_000
    receive(intake, b"y" * (180_000 - 10))
    assert sink.frames[1] == b"y" * 180_000


def test_intake_passes_on_the_end_of_the_stream_once_and_gives_back_its_budget_when_lost() -> None:
    intake, _, sink = new_intake()
    receive(intake, kp.frame(b"abc"))
    intake.end_of_stream()
    intake.end_of_stream()
    assert sink.ended == 1
    intake.lost()
    assert intake.limits.reserved == 0


# ------------------------------------------------------------------------------------ the loop


@dataclass
class Context:
    header: kp.RequestHeader
    throttle_time_ms: int = 0
    remote_time: float = 0.0


@dataclass
class Reading:
    calls: list[Any] = field(default_factory=list)

    def hold(self) -> None:
        self.calls.append("hold")

    def release(self) -> None:
        self.calls.append("release")

    def give_back(self, nbytes: int) -> None:
        self.calls.append(nbytes)


def metadata_frame(correlation_id: int) -> memoryview:
    header = kp.RequestHeader(kp.ApiKey.METADATA, 1, correlation_id, "test")
    return memoryview(bytearray(kp.encode_request(header, MetadataRequest(topics=None))[4:]))


def correlation_ids(writes: list[bytes]) -> list[int]:
    """The correlation ids of the responses written, in order."""
    frames = kp.FrameReceiver().feed(b"".join(writes))
    return [struct.unpack_from(">i", frame)[0] for frame in frames]


async def turns(n: int = 20) -> None:
    """Let the event loop run ``n`` turns (what is ready runs; nothing here waits on time)."""
    for _ in range(n):
        await asyncio.sleep(0)


def new_loop(dispatch: Any, transport: FakeTransport) -> tuple[RequestLoop[Context], Reading]:
    reading = Reading()
    supported = {kp.ApiKey.METADATA: (0, 12), kp.ApiKey.API_VERSIONS: (0, 3)}
    loop: RequestLoop[Context] = RequestLoop(
        reading=reading,
        writer=ResponseWriter(transport),  # type: ignore[arg-type]
        session=Session.start(None),
        new_context=Context,
        dispatch=dispatch,
        supported=supported,
        credentials=lambda user: {},
        peer="test:1",
    )
    return loop, reading


def test_one_request_at_a_time_so_responses_leave_in_request_order() -> None:
    async def run() -> tuple[list[int], list[int], list[Any]]:
        first_may_finish = asyncio.Event()
        dispatched: list[int] = []

        async def dispatch(context: Context, body: Any) -> Any:
            dispatched.append(context.header.correlation_id)
            if context.header.correlation_id == 1:
                await first_may_finish.wait()  # the first request is parked (a long poll)
            return MetadataResponse(brokers=[], topics=[])

        transport = FakeTransport()
        loop, reading = new_loop(dispatch, transport)
        task = loop.start("t")
        for correlation_id in (1, 2, 3):
            loop.submit(metadata_frame(correlation_id))
        await turns()
        while_parked = list(dispatched)
        assert loop.busy and transport.writes == []
        first_may_finish.set()
        await turns()
        loop.end_of_stream()  # (while a request is parked, it would cancel it: no one waits for it)
        await task
        return while_parked, correlation_ids(transport.writes), reading.calls

    while_parked, ids, calls = asyncio.run(run())
    assert while_parked == [1] and ids == [1, 2, 3]
    assert len(calls) == 3 and all(isinstance(c, int) for c in calls)  # each frame's budget back


def test_the_loop_holds_reading_while_too_many_frames_wait() -> None:
    async def run() -> list[Any]:
        async def dispatch(context: Context, body: Any) -> Any:
            return None

        loop, reading = new_loop(dispatch, FakeTransport())
        for correlation_id in range(MAX_QUEUED_FRAMES):
            loop.submit(metadata_frame(correlation_id))
        assert reading.calls == ["hold"]
        task = loop.start("t")
        loop.end_of_stream()
        await task
        return reading.calls

    calls = asyncio.run(run())
    assert calls.count("hold") == 1 and calls.count("release") == 1
    assert calls.index("release") == 1 + MAX_QUEUED_FRAMES // 2  # once half is handled


def test_a_throttled_response_mutes_the_connection_and_losing_it_cancels_the_mute() -> None:
    async def run() -> tuple[bool, list[int]]:
        async def dispatch(context: Context, body: Any) -> Any:
            context.throttle_time_ms = 60_000
            return MetadataResponse(brokers=[], topics=[])

        transport = FakeTransport()
        loop, _ = new_loop(dispatch, transport)
        task = loop.start("t")
        loop.submit(metadata_frame(7))
        loop.submit(metadata_frame(8))
        await turns()
        busy = loop.busy  # muted: the response left, the next request waits
        loop.stop()
        await task
        return busy, correlation_ids(transport.writes)

    busy, ids = asyncio.run(run())
    assert busy and ids == [7]


def test_a_malformed_request_closes_the_connection_after_the_earlier_answers() -> None:
    async def run() -> tuple[list[int], list[str]]:
        async def dispatch(context: Context, body: Any) -> Any:
            return MetadataResponse(brokers=[], topics=[])

        transport = FakeTransport()
        loop, _ = new_loop(dispatch, transport)
        task = loop.start("t")
        loop.submit(metadata_frame(1))
        loop.submit(memoryview(bytearray(b"\x00\x03\x00")))  # a header cut short
        loop.submit(metadata_frame(3))
        await task
        return correlation_ids(transport.writes), transport.calls

    ids, calls = asyncio.run(run())
    assert ids == [1] and calls == ["close"]


def test_an_unsupported_api_versions_gets_the_v0_error_answer() -> None:
    async def run() -> list[bytes]:
        async def dispatch(context: Context, body: Any) -> Any:
            raise AssertionError("not dispatched")

        transport = FakeTransport()
        loop, _ = new_loop(dispatch, transport)
        task = loop.start("t")
        header = kp.RequestHeader(kp.ApiKey.API_VERSIONS, 3, 5, "test")
        raw = bytearray(kp.encode_request(header, ApiVersionsRequest())[4:])
        struct.pack_into(">h", raw, 2, 9)  # a version of ApiVersions this broker does not answer
        loop.submit(memoryview(raw))
        loop.end_of_stream()
        await task
        return transport.writes

    (answer,) = asyncio.run(run())
    correlation_id, error_code = struct.unpack_from(">ih", answer, 4)
    assert correlation_id == 5 and error_code == kp.ErrorCode.UNSUPPORTED_VERSION


# ------------------------------------------------------------------------------------ the writer


@dataclass
class Region:
    fd: int
    position: int
    size: int
    released: bool = False

    def release(self) -> None:
        self.released = True


def test_the_writer_coalesces_responses_into_one_write() -> None:
    async def run() -> list[bytes]:
        transport = FakeTransport()
        writer = ResponseWriter(transport)  # type: ignore[arg-type]
        await writer.send([b"one", b"-"])
        await writer.send([b"two"])
        assert transport.writes == []  # held back until the loop yields or flushes
        await asyncio.sleep(0)
        return transport.writes

    assert asyncio.run(run()) == [b"one-two"]


def test_the_writer_writes_at_once_past_flush_bytes() -> None:
    async def run() -> int:
        transport = FakeTransport()
        writer = ResponseWriter(transport)  # type: ignore[arg-type]
        await writer.send([b"x" * FLUSH_BYTES])
        return len(transport.writes)

    assert asyncio.run(run()) == 1


def test_a_small_file_region_is_read_and_written_with_the_bytes_around_it_and_released() -> None:
    async def run() -> tuple[list[bytes], bool]:
        with tempfile.TemporaryFile() as file:
            file.write(b"0123456789")
            file.flush()
            transport = FakeTransport()
            writer = ResponseWriter(transport)  # type: ignore[arg-type]
            region = Region(file.fileno(), 2, 5)
            await writer.send([b"<", region, b">"])
            writer.flush()
            return transport.writes, region.released

    assert asyncio.run(run()) == ([b"<23456>"], True)


def test_a_region_past_the_end_of_its_file_closes_the_connection_and_is_released() -> None:
    async def run() -> bool:
        with tempfile.TemporaryFile() as file:
            file.write(b"0123")
            file.flush()
            writer = ResponseWriter(FakeTransport())  # type: ignore[arg-type]
            region = Region(file.fileno(), 2, 5)
            with pytest.raises(ConnectionClosed, match="read 2 of 5 bytes"):
                await writer.send([region])
            return region.released

    assert asyncio.run(run())


def test_drain_waits_for_resume_and_a_lost_connection_fails_sends() -> None:
    async def run() -> None:
        transport = FakeTransport()
        writer = ResponseWriter(transport)  # type: ignore[arg-type]
        writer.pause()
        drained = asyncio.get_running_loop().create_task(writer.drain())
        await turns()
        assert not drained.done()
        writer.resume()
        await drained
        await writer.send([b"held"])
        writer.lost()
        await asyncio.sleep(0)
        assert transport.writes == []  # what was held back is dropped
        with pytest.raises(ConnectionClosed):
            await writer.send([b"more"])
        with pytest.raises(ConnectionClosed):
            await writer.drain()

    asyncio.run(run())
