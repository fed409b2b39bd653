"""Produce v0-2's message sets (magic 0 and 1, the formats before RecordBatch) converted to the one
RecordBatch v2 kctl stores, as Kafka's brokers since 0.11 convert them on append ("up-conversion").

Every entry's CRC-32 is checked, and every inner message's of a compressed wrapper; the records keep
their keys, values and order, with no headers (the old formats have none). Magic 1 messages keep
their CreateTime timestamp; magic 0 messages have none (-1, Kafka's NO_TIMESTAMP; a topic with
``message.timestamp.type=LogAppendTime`` gives every record the broker's time when the log appends
the batch). The batch is compressed with the codec of the first compressed wrapper (none when
nothing was compressed) and has no producer id: the old formats are never idempotent.

Per-record Python, on purpose: only clients older than Kafka 0.11 (or librdkafka told
``api.version.request=false``) send these versions; Produce v3+ never comes here."""

from __future__ import annotations

from kctl.records.builder import RecordBatchBuilder
from kctl.records.compression import CompressionType
from kctl.records.legacy import InvalidLegacyMessage, LegacyRecord, iter_messages, records_of

__all__ = ["InvalidLegacyMessage", "up_convert"]


def up_convert(message_set: bytes | memoryview) -> bytes:
    """The records of a magic 0/1 message set as one RecordBatch v2 (base offset 0); raises
    InvalidLegacyMessage for a set that does not frame, a CRC mismatch, a wrapper that does not
    decompress, or a set without records."""
    codec = CompressionType.NONE
    records: list[LegacyRecord] = []
    for message in iter_messages(message_set):
        if message.codec != 0 and codec == CompressionType.NONE:
            codec = CompressionType(message.codec)
        records.extend(records_of(message, check_crc=True))
    if not records:
        raise InvalidLegacyMessage("the message set holds no records")
    builder = RecordBatchBuilder(compression=codec)
    for record in records:
        builder.append(record.timestamp, record.key, record.value)
    return builder.build()
