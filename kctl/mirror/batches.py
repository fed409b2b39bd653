"""Record batches as the mirror moves them: framing a source partition's Fetch answer into pieces,
and restamping a piece for the target's idempotent producer — without decoding records when a batch
can travel as it is.

A source batch is forwarded byte for byte when it holds exactly the records its offsets span
(``records_count == last_offset_delta + 1``), starts at or after the fetch offset and is not a
control batch. Only header fields change (``restamp``): base_offset (0; the target assigns it),
partition_leader_epoch (-1), the transactional bit (cleared: the mirror's producer is idempotent,
not transactional), producer id, producer epoch and base sequence (the mirror's own, so the target
broker de-duplicates the mirror's retries); the CRC-32C is then recomputed over attributes..end.
Keys, values, headers, timestamps, compression and the records' order are the source's.

Any other batch (compacted, with offset gaps; one that starts before the fetch offset; one the
target must not receive as is) is decoded and rebuilt with ``kctl.records.builder``; its piece is
not *linear* (source offsets do not map one to one onto target offsets), which the offset syncs
record (``kctl.mirror.offset_syncs``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    PRODUCER_ID_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    InvalidRecordBatch,
    parse_header,
    read_prefix,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
    write_crc,
)
from kctl.records.reader import decode_records

__all__ = ["FramedPartition", "Piece", "frame_partition", "restamp"]

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_INT16 = struct.Struct(">h")


@dataclass(slots=True)
class Piece:
    """One batch to write to the target: the source offsets it covers (``source_offset`` is its
    first record's, ``source_next`` one past its batch), its record count, its bytes (a source batch
    or a rebuilt one) and whether source offsets map one to one onto target offsets (``linear``)."""

    source_offset: int
    source_next: int
    records_count: int
    data: bytes | bytearray | memoryview
    linear: bool = True
    rebuilt: bool = False


@dataclass(slots=True)
class FramedPartition:
    """A partition's Fetch answer as pieces: ``next_offset`` is where to fetch next (None when no
    complete batch at or past the fetch offset came back), ``gap`` whether offsets were stepped over
    without a piece (control batches, empty rebuilt batches)."""

    pieces: list[Piece]
    next_offset: int | None
    bytes_read: int = 0


def frame_partition(
    data: bytes | memoryview | None, fetch_offset: int, *, check_crcs: bool = True
) -> FramedPartition:
    """Cut a Fetch answer's ``records`` into pieces, from ``fetch_offset`` on. A trailing partial
    batch is ignored; a corrupt batch raises InvalidRecordBatch (unless pieces came before it: then
    they are returned and the next fetch meets it again)."""
    buf = data if data else b""  # a memoryview stays one: pieces are views into the Fetch answer
    pieces: list[Piece] = []
    next_offset: int | None = None
    position = 0
    end = len(buf)
    read = 0
    while end - position >= LOG_OVERHEAD:
        _, batch_length = read_prefix(buf, position)
        size = batch_length + LOG_OVERHEAD
        if position + size > end:
            break
        try:
            header = validate_batch(buf, position) if check_crcs else parse_header(buf, position)
        except InvalidRecordBatch:
            if pieces or next_offset is not None:
                break
            raise
        batch_next = header.base_offset + header.last_offset_delta + 1
        if batch_next > fetch_offset:
            next_offset = batch_next
            read += size
            if not header.attributes & CONTROL_FLAG_MASK:
                raw = buf[position : position + size]
                if (
                    header.base_offset >= fetch_offset
                    and header.records_count == header.last_offset_delta + 1
                    and header.records_count > 0
                ):
                    pieces.append(Piece(header.base_offset, batch_next, header.records_count, raw))
                else:
                    piece = _rebuild(bytes(raw), fetch_offset, batch_next)
                    if piece is not None:
                        pieces.append(piece)
        position += size
    return FramedPartition(pieces, next_offset, read)


def _rebuild(raw: bytes, fetch_offset: int, batch_next: int) -> Piece | None:
    """The records of ``raw`` at or after ``fetch_offset`` in a new contiguous batch (same
    compression and timestamps); None when none are left."""
    header = parse_header(raw)
    records = [r for r in decode_records(raw, 0, header) if r.offset >= fetch_offset]
    if not records:
        return None
    builder = RecordBatchBuilder(compression=header.compression)
    for record in records:
        builder.append(record.timestamp, record.key, record.value, record.headers)
    offsets = [r.offset for r in records]
    linear = offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    return Piece(offsets[0], batch_next, len(records), builder.build(), linear=linear, rebuilt=True)


def restamp(
    piece: Piece, producer_id: int, producer_epoch: int, base_sequence: int, *, in_place: bool = False
) -> bytearray | memoryview:
    """The piece's batch ready for the target: base_offset 0, no partition leader epoch, not
    transactional, the mirror's producer id, epoch and sequence; CRC-32C recomputed. A copy, or with
    ``in_place`` the piece's own bytes rewritten when they are writable (a view into a Fetch answer's
    buffer: no copy of the records; restamping them again later rewrites the same fields)."""
    data: bytearray | memoryview
    if in_place and isinstance(piece.data, bytearray | memoryview) and not _readonly(piece.data):
        data = piece.data
    else:
        data = bytearray(piece.data)
    set_base_offset(data, 0, 0)
    set_partition_leader_epoch(data, 0, NO_PARTITION_LEADER_EPOCH)
    (attributes,) = _INT16.unpack_from(data, ATTRIBUTES_OFFSET)
    attributes &= ~(TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    _INT16.pack_into(data, ATTRIBUTES_OFFSET, attributes)
    _PRODUCER_FIELDS.pack_into(data, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    write_crc(data, 0, len(data))
    return data


def _readonly(data: bytearray | memoryview) -> bool:
    return isinstance(data, memoryview) and data.readonly


def is_log_append_time(piece: Piece) -> bool:
    """Whether the piece's batch carries LogAppendTime (its timestamps are the source broker's)."""
    (attributes,) = _INT16.unpack_from(piece.data, ATTRIBUTES_OFFSET)
    return bool(attributes & TIMESTAMP_TYPE_MASK)
