"""What compaction does with transactions (Kafka's ``CleanedTransactionMetadata``, KIP-98, KIP-534).

The cleaner walks the cleanable segments in offset order (only segments wholly below the last stable
offset: data of a transaction still open, or whose marker is not yet replicated, is never cleaned) with
one :class:`CleanedTransactions`, told of every batch it reads:

* the **data batches of aborted transactions** (the ``.txnindex`` entries: a producer's batches from
  the entry's first offset to its ABORT marker) are removed whole — also left out of the key map, so an
  aborted record never hides a committed one;
* a **marker** (COMMIT or ABORT control batch) is *removable* once no data batch of its transaction
  was met before it in the pass (they were all compacted or removed in earlier passes). A removable
  marker is first rewritten with a delete horizon — attribute bit 0x40, the base timestamp holding
  ``now + delete.retention.ms``, the record's timestamp delta made relative to it so the record keeps
  its timestamp (KIP-534, as Kafka writes it) — and removed by the first cleaning after that horizon;
* the ``.txnindex`` keeps the entries of the ABORT markers that stay (:meth:`aborted_kept`).

Everything else about a batch is left to the cleaner: non-transactional and committed data are
compacted by key as before, batches left whole are copied as bytes."""

from __future__ import annotations

from collections.abc import Iterable

from kctl.log.transactions import AbortedTxn, marker_of
from kctl.records.header import (
    ATTRIBUTES_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
    write_crc,
)
from kctl.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong


class CleanedTransactions:
    """The transaction state of one cleaning pass over a log's cleanable segments, fed batch by batch
    in offset order; ``aborted``: the aborted transactions of the whole log (``.txnindex`` entries)."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda entry: entry.first_offset)
        self._next = 0
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (entry, data seen)
        self._ongoing_committed: set[int] = set()
        self._kept_aborts: set[int] = set()  # offsets of the ABORT markers that stay

    def _start_aborted_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            entry = self._aborted[self._next]
            self._ongoing_aborted[entry.producer_id] = (entry, False)
            self._next += 1

    def on_data_batch(self, header: BatchHeader) -> bool:
        """A data batch read; True when it belongs to an aborted transaction (remove it whole)."""
        self._start_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, data: bytes | bytearray | memoryview) -> bool:
        """A control batch read (``data``: its bytes); True when it is a removable marker: no data of
        its transaction was met in this pass."""
        self._start_aborted_up_to(header.last_offset)
        if header.records_count == 0:
            return True  # an empty control batch: nothing left to keep
        marker = marker_of(data)
        if marker is None:
            return False
        producer_id = header.producer_id
        if marker.is_abort:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1]:
                self._kept_aborts.add(header.base_offset)
                return False
            return True
        if producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(producer_id)
            return False
        return True

    def kept_abort(self, offset: int) -> None:
        """The ABORT marker at ``offset`` stays (removable, but its delete horizon is not reached)."""
        self._kept_aborts.add(offset)

    def aborted_kept(self, entries: Iterable[AbortedTxn]) -> list[AbortedTxn]:
        """Those of a segment's ``.txnindex`` entries whose ABORT marker stays."""
        return [entry for entry in entries if entry.last_offset in self._kept_aborts]


def delete_horizon(header: BatchHeader) -> int | None:
    """The delete horizon a cleaned marker carries (KIP-534), None when it has none yet."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG_MASK else None


def with_delete_horizon(data: bytes | bytearray | memoryview, horizon_ms: int) -> bytes:
    """A copy of an uncompressed control batch carrying the delete horizon ``horizon_ms``: the flag
    set, the base timestamp replaced, each record's timestamp delta rewritten so that the record
    keeps its timestamp, the lengths and the CRC recomputed."""
    header = parse_header(data, 0)
    base = header.base_timestamp
    records = bytearray()
    position = HEADER_SIZE
    end = header.size
    while position < end:
        length, position = decode_varint(data, position)
        body = bytes(data[position : position + length])
        position += length
        # body: attributes int8, timestamp delta varlong, then the rest unchanged
        delta, rest = decode_varlong(body, 1)
        new_body = body[:1] + encode_varlong(base + delta - horizon_ms) + body[rest:]
        records += encode_varint(len(new_body)) + new_body
    batch = bytearray(data[:HEADER_SIZE]) + records
    batch[LENGTH_OFFSET : LENGTH_OFFSET + 4] = (len(batch) - LOG_OVERHEAD).to_bytes(4, "big")
    attributes = header.attributes | DELETE_HORIZON_FLAG_MASK
    batch[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big", signed=True)
    batch[BASE_TIMESTAMP_OFFSET : BASE_TIMESTAMP_OFFSET + 8] = horizon_ms.to_bytes(8, "big", signed=True)
    write_crc(batch, 0, len(batch))
    return bytes(batch)
