"""Record batches written as the message formats before RecordBatch (magic 0 for Fetch v0-1, magic 1
for Fetch v2-3), for consumers older than Kafka 0.11, as Kafka's brokers down-convert them.

Each record becomes one uncompressed message with its absolute offset, key and value; magic 1 keeps
its timestamp and marks LogAppendTime (attributes bit 3) when its batch was stamped by the broker.
What the old formats cannot say is dropped, as Kafka drops it: headers, control batches (transaction
markers), producer ids. Records before ``first_offset`` (the fetch offset, inside the first batch)
are left out. A partial batch at the end of the bytes read is ignored.

Per-record Python, on purpose: only clients older than Kafka 0.11 (or librdkafka told
``api.version.request=false``) fetch with these versions; Fetch v4+ is sent with sendfile
untouched."""

from __future__ import annotations

import struct
import zlib

from kctl.records.reader import iter_batches

__all__ = ["down_convert", "magic_for_fetch_version"]

_ENTRY = struct.Struct(">qi")  # offset, message size
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_LOG_APPEND_TIME = 0x08


def magic_for_fetch_version(version: int) -> int:
    """The message format a Fetch response of ``version`` < 4 carries (Kafka's rule)."""
    return 0 if version < 2 else 1


def _message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_TIMESTAMP.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(_LENGTH.pack(-1))
        else:
            parts.append(_LENGTH.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return _ENTRY.pack(offset, 4 + len(body)) + struct.pack(">I", crc) + body


def down_convert(data: bytes | memoryview, magic: int, first_offset: int = 0) -> bytes:
    """The records of the RecordBatches in ``data`` (from ``first_offset`` on) as a magic ``magic``
    message set."""
    out = []
    for batch in iter_batches(data, verify_crc=False):
        header = batch.header
        if header.is_control:
            continue
        attributes = _LOG_APPEND_TIME if magic == 1 and header.is_log_append_time else 0
        for record in batch.records:
            if record.offset < first_offset:
                continue
            out.append(_message(record.offset, magic, attributes, record.timestamp, record.key, record.value))
    return b"".join(out)
