"""The receiving side of one broker connection: bytes from the transport to request frames.

The connection is an ``asyncio.BufferedProtocol``: its ``get_buffer``/``buffer_updated`` come here,
so the kernel copies what arrives straight into the buffers of the one frame receiver
(kctl.protocol.framing.FrameReceiver, sized for a broker: a large frame's buffer starts at
``FIRST_LARGE_CHUNK`` and grows as its bytes arrive, so a size announced and never sent costs little;
a handled large frame's buffer of up to ``MAX_SPARE`` bytes is kept in a one-buffer ``FramePool``
to receive the connection's next large frame). A frame's size is checked — negative, or above
``socket.request.max.bytes`` — before anything of the frame is allocated; a bad one is refused
(the request loop answers what came before, then closes) and nothing more is read.

Each complete frame goes to the request loop (kctl.broker.request_loop: ``submit``). Its size is
reserved from the broker's ``queued.max.request.bytes`` budget (kctl.broker.connection_limits): a
frame already received is counted at once (and reading pauses if that overdraws the budget); a large
frame is reserved before it is received in place, and when it does not fit the connection is not read
until budget is given back. Reading also pauses while the loop holds it (its queue is full); what
was already received waits in the receive buffer and is cut into frames when reading resumes."""

from __future__ import annotations

from typing import Protocol

from kctl.broker.connection_limits import ConnectionLimits
from kctl.protocol.exceptions import FrameTooLarge, ProtocolDecodeError
from kctl.protocol.framing import IN_PLACE_ABOVE, FramePool, FrameReceiver

#: a large frame's buffer starts this large (or as large as what arrived with its size) and doubles
FIRST_LARGE_CHUNK = 2 * 1024 * 1024
#: a large frame's buffer up to this size is kept, once handled, to receive the connection's next one
MAX_SPARE = 8 * 1024 * 1024


class FrameSink(Protocol):
    """Where the frames go (kctl.broker.request_loop.RequestLoop)."""

    def submit(self, frame: memoryview) -> None: ...

    def refuse(self, why: str) -> None: ...

    def end_of_stream(self) -> None: ...


class Reading(Protocol):
    """The transport's read flow control (``asyncio.Transport``)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class FrameIntake:
    """Receives one connection's frames for ``sink``, within ``limits``' budget, reading from
    ``transport`` while nothing holds it."""

    def __init__(
        self,
        transport: Reading,
        sink: FrameSink | None,
        *,
        limits: ConnectionLimits,
        connection_id: int,
        max_request_size: int,
    ) -> None:
        self.transport = transport
        self.sink = sink
        self.limits = limits
        self.connection_id = connection_id
        self.max_request_size = max_request_size
        self.receiver = FrameReceiver(
            max_request_size,
            FramePool(min_size=IN_PLACE_ABOVE + 1, max_buffers=1, max_bytes=MAX_SPARE),
            first_large_chunk=FIRST_LARGE_CHUNK,
        )
        self._reserved = 0  # bytes of the budget this connection holds
        self._next_reserved = False  # the next frame's bytes are among them
        self._held = False  # by the request loop: its queue is full
        self._memory_paused = False  # until the budget has room for the next frame
        self._reading_paused = False  # the transport's reading is paused (for any reason above)
        self.receiving = True  # until the end of the stream, a bad frame size, or the connection is lost

    # -- from the transport -------------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.receiver.buffer_updated(nbytes)
        self._cut_frames()

    def end_of_stream(self) -> None:
        if self.receiving:
            self.receiving = False
            if self.sink is not None:
                self.sink.end_of_stream()

    def lost(self) -> None:
        """The connection is gone: give back the budget held, read nothing more."""
        self.receiving = False
        self.limits.forget(self.connection_id)
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self.limits.give_back(reserved)

    # -- frames -------------------------------------------------------------------------------
    def _cut_frames(self) -> None:
        """Hand the complete frames received to the sink until something pauses reading (the rest
        waits in the receive buffer); reserve a large frame's budget before it is received in place."""
        receiver = self.receiver
        sink = self.sink
        assert sink is not None
        while self.receiving and not self._held and not self._memory_paused:
            try:
                size = receiver.next_size()
            except FrameTooLarge as error:
                limit = self.max_request_size
                self._refuse(f"request of {error.size} bytes exceeds socket.request.max.bytes ({limit})")
                return
            except ProtocolDecodeError as error:
                self._refuse(str(error))
                return
            if size is None:
                return
            if not self._next_reserved:
                ready = receiver.frame_ready()
                if not ready and size <= receiver.in_place_above:
                    return  # a small frame: counted once it is complete
                if not self._reserve(size, force=ready):
                    return  # not read until the budget has room
                self._next_reserved = True
            frame = receiver.next_frame()
            if frame is None:
                return
            self._next_reserved = False
            sink.submit(frame)

    def _refuse(self, why: str) -> None:
        """A bad frame size: read nothing more; the sink answers what came before, then closes."""
        self.receiving = False
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        assert self.sink is not None
        self.sink.refuse(why)

    def _reserve(self, nbytes: int, *, force: bool) -> bool:
        """Take ``nbytes`` of the queued.max.request.bytes budget for a frame; when it does not fit
        (or, forced, overdraws it), stop reading until budget is given back."""
        taken = self.limits.reserve(nbytes, force=force)
        if taken:
            self._reserved += nbytes
        if not taken or self.limits.exhausted:
            if not self._memory_paused:
                self._memory_paused = True
                self._update_reading()
            self.limits.wait(self.connection_id, self._budget_available)
        return taken

    def give_back(self, nbytes: int) -> None:
        """A frame of ``nbytes`` was handled."""
        nbytes = min(nbytes, self._reserved)
        if nbytes:
            self._reserved -= nbytes
            self.limits.give_back(nbytes)

    def _budget_available(self) -> None:
        if not self.receiving or not self._memory_paused:
            return
        self._memory_paused = False
        self._cut_frames()  # the frames (or the size) left in the receive buffer
        self._update_reading()

    # -- flow control (the request loop's) -----------------------------------------------------
    def hold(self) -> None:
        self._held = True
        self._update_reading()

    def release(self) -> None:
        self._held = False
        self._cut_frames()  # first the frames left in the receive buffer when reading paused
        self._update_reading()

    def _update_reading(self) -> None:
        """Pause the transport's reading while anything holds it, resume it when nothing does (once
        the stream ended or was refused, reading stays as it is)."""
        pause = self._held or self._memory_paused
        if self.receiving and pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()
