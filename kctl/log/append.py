"""What an append writes: the offsets, leader epochs and timestamps stamped into validated batches, the
checks a follower's batches must pass, and the idempotent producers' duplicates dropped — decided
here, written by :class:`kctl.log.log.Log` (which holds the lock, rolls the segment and moves the
log's offsets).

Batches stay opaque bytes: only their headers are read, and the leader's stamps are byte rewrites
outside the CRC (``kctl.records.header``), no per-record work. ``AppendInfo`` is what an append
answers."""

from __future__ import annotations

from dataclasses import dataclass

from kctl.log.producer_state import ProducerStateManager
from kctl.records.header import (
    BatchHeader,
    InvalidRecordBatch,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

Batches = list[tuple[int, BatchHeader]]
"""(position in the appended bytes, header) of each batch, in order."""


class UnexpectedAppendOffsetError(InvalidRecordBatch):
    """A follower append whose batches do not continue the log: the first one starts below the log end
    offset (they overlap what the log holds), or offsets do not rise from batch to batch."""

    def __init__(self, message: str, first_offset: int, log_end_offset: int, position: int = 0) -> None:
        super().__init__(message, position)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True)
class AppendInfo:
    """Where an append landed."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    records_count: int
    batches: int
    size: int
    log_start_offset: int
    duplicate: bool = False  # an idempotent producer's retry of batches already written


@dataclass
class Stamped:
    """The leader's batches with their final offsets (see :func:`stamp_as_leader`)."""

    batches: Batches
    next_offset: int
    records_count: int
    max_timestamp: int
    offset_of_max_timestamp: int
    offsets_of_max: list[int]
    """Per batch, the offset of its record with the max timestamp (the time index's entries)."""


def stamp_as_leader(
    data: bytearray | memoryview,
    batches: Batches,
    first_offset: int,
    *,
    leader_epoch: int | None,
    append_time: int,
    max_deltas: dict[int, int],
) -> Stamped:
    """Give each batch of ``data`` the next offsets from ``first_offset`` on, stamp ``leader_epoch``
    (when given) and, with LogAppendTime (``append_time`` >= 0), the append time. ``max_deltas``:
    per batch position, the offset delta of its record with the max timestamp (CreateTime)."""
    next_offset = first_offset
    records_count = 0
    max_timestamp, offset_of_max = -1, first_offset
    stamped: Batches = []
    offsets_of_max: list[int] = []
    for position, header in batches:
        delta = 0 if append_time >= 0 else max_deltas.get(position, header.last_offset_delta)
        set_base_offset(data, position, next_offset)
        header = header._replace(base_offset=next_offset)
        if leader_epoch is not None:
            set_partition_leader_epoch(data, position, leader_epoch)
        if append_time >= 0:
            set_log_append_time(data, position, header.size, append_time)
            header = header._replace(max_timestamp=append_time, attributes=header.attributes | 0x08)
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.base_offset + delta
        records_count += header.records_count
        next_offset = header.next_offset
        stamped.append((position, header))
        offsets_of_max.append(header.base_offset + delta)
    return Stamped(stamped, next_offset, records_count, max_timestamp, offset_of_max, offsets_of_max)


def check_as_follower(batches: Batches, log_end_offset: int) -> tuple[int, int, int, int]:
    """A follower's batches, as the leader wrote them: the first must not start below
    ``log_end_offset`` and offsets must rise from batch to batch (else UnexpectedAppendOffsetError; a
    gap is accepted, as compaction removes whole batches). Returns (last offset, records, max
    timestamp, offset of the max timestamp)."""
    first_offset = batches[0][1].base_offset
    previous_last = log_end_offset - 1
    records_count = 0
    max_timestamp, offset_of_max = -1, first_offset
    for position, header in batches:
        if header.base_offset <= previous_last:
            where = (
                f"the log end offset {log_end_offset}"
                if position == 0
                else f"the previous batch's last offset {previous_last} (offsets must rise)"
            )
            raise UnexpectedAppendOffsetError(
                f"follower append: batch at position {position} starts at offset "
                f"{header.base_offset}, below {where}",
                first_offset,
                log_end_offset,
                position,
            )
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        records_count += header.records_count
        previous_last = header.last_offset
    return previous_last, records_count, max_timestamp, offset_of_max


def drop_duplicates(
    producer_state: ProducerStateManager,
    data: bytearray | memoryview,
    batches: Batches,
    *,
    from_coordinator: bool,
    log_start_offset: int,
    knows_every_producer: bool = False,
) -> tuple[AppendInfo | None, bytearray | memoryview, Batches]:
    """Check idempotent producers' sequences (raises ProducerStateError); drop batches already
    written. Returns (the original AppendInfo if every batch was a duplicate, data, batches)."""
    duplicates = {}
    for position, header in batches:
        original = producer_state.check(
            header, from_coordinator=from_coordinator, knows_every_producer=knows_every_producer
        )
        if original is not None:
            duplicates[position] = original
    if not duplicates:
        return None, data, batches
    if len(duplicates) == len(batches):
        first, last = duplicates[batches[0][0]], duplicates[batches[-1][0]]
        info = AppendInfo(
            first.first_offset,
            last.last_offset,
            last.max_timestamp,
            last.last_offset,
            -1,
            0,
            0,
            0,
            log_start_offset,
            duplicate=True,
        )
        return info, data, batches
    kept = bytearray()
    kept_batches = []
    for position, header in batches:
        if position not in duplicates:
            kept_batches.append((len(kept), header))
            kept += data[position : position + header.size]
    return None, kept, kept_batches
