"""Broker-side recompression: rewrite record batches with another codec (a topic's
``compression.type`` other than ``producer``), as Kafka's log validator does.

A batch's records section is the same sequence of encoded records whatever the codec, so a batch
is recompressed by decompressing its records section, checking that it holds exactly
``records_count`` well-formed records (Kafka validates every record when it recompresses), and
compressing it again; the header keeps every field (base offset, leader epoch, timestamps, producer
id, epoch and base sequence, transactional flag) except the codec bits, the batch length and the
CRC-32C, which are rewritten. Offsets are assigned afterwards, exactly as for any other batch, so
the producer is answered the offsets of the records it sent.

Batches already in the target codec, control batches and batches without records are copied
unchanged: a topic whose batches all match costs one header parse per batch. Every failure is an
:class:`~kctl.records.header.InvalidRecordBatch` naming the batch's position.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from kctl.records.compression import CompressionType, compress
from kctl.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    validate_batch,
    write_crc,
)
from kctl.records.reader import decode_section, records_section

if TYPE_CHECKING:
    from kctl.log.config import LogConfig
    from kctl.records.header import BatchHeader

__all__ = ["TARGET_CODECS", "recompress_batches", "recompress_for", "target_codec"]

#: ``compression.type`` values that name a codec (``producer`` keeps the producer's).
TARGET_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_LZ4_MAX_LEVEL = 16  # python-lz4's highest HC level; Kafka's scale goes to 17


def target_codec(compression_type: str) -> CompressionType | None:
    """The codec a topic's ``compression.type`` asks for; None for ``producer`` (keep the batch's)."""
    return TARGET_CODECS.get(compression_type)


def _level(codec: CompressionType, gzip_level: int, lz4_level: int, zstd_level: int) -> int | None:
    if codec == CompressionType.GZIP:
        return None if gzip_level == -1 else gzip_level
    if codec == CompressionType.LZ4:
        return min(lz4_level, _LZ4_MAX_LEVEL)
    if codec == CompressionType.ZSTD:
        return zstd_level
    return None


def recompress_batches(
    data: bytes | bytearray | memoryview,
    codec: CompressionType,
    *,
    gzip_level: int = -1,
    lz4_level: int = 9,
    zstd_level: int = 3,
    max_decompressed_size: int | None = None,
) -> bytearray:
    """``data`` (one or more whole batches) with every data batch's records in ``codec``. Each batch
    is validated (header, length, CRC) before it is touched. Raises InvalidRecordBatch."""
    level = _level(codec, gzip_level, lz4_level, zstd_level)
    out = bytearray()
    position = 0
    end = len(data)
    while position < end:
        header = validate_batch(data, position, end)
        size = header.size
        current = header.attributes & COMPRESSION_CODEC_MASK
        if current == codec or header.is_control or header.records_count == 0:
            out += data[position : position + size]
            position += size
            continue
        section, start, stop = records_section(data, position, header, max_decompressed_size)
        decode_section(section, start, stop, header, position)  # every record well-formed, none extra
        with memoryview(section) as view, view[start:stop] as records:
            payload = bytes(records) if codec == CompressionType.NONE else compress(codec, records, level)
        batch = bytearray(data[position : position + HEADER_SIZE])
        batch += payload
        _INT32.pack_into(batch, LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
        _INT16.pack_into(batch, ATTRIBUTES_OFFSET, (header.attributes & ~COMPRESSION_CODEC_MASK) | int(codec))
        write_crc(batch, 0, len(batch))
        out += batch
        position += size
    return out


#: The largest records section the broker decompresses to recompress it (the broker's
#: ``max.decompressed.batch.bytes`` default).
MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


def recompress_for(
    data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], config: LogConfig
) -> bytearray | None:
    """The leader's append hook: ``data`` (its validated ``batches``) rewritten in the codec the
    topic's ``compression.type`` names, or None when it is ``producer`` or every data batch is
    already in that codec (the common case: no copy)."""
    codec = TARGET_CODECS.get(config.compression_type)
    if codec is None or all(h.compression == codec or h.is_control for _, h in batches):
        return None
    return recompress_batches(
        data,
        codec,
        gzip_level=config.compression_gzip_level,
        lz4_level=config.compression_lz4_level,
        zstd_level=config.compression_zstd_level,
        max_decompressed_size=MAX_DECOMPRESSED_SIZE,
    )
