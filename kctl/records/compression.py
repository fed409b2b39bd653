"""Compression codecs of RecordBatch v2: none, gzip, snappy, lz4 and zstd.

This module owns the codec ids (attributes bits 0–2 of a batch), their names, and the exact byte
formats Kafka clients write and read:

* **gzip** — the gzip file format (header, deflate, CRC-32 trailer), as Java's ``GZIPOutputStream``
  writes it; concatenated members are read.
* **snappy** — written in the xerial/snappy-java stream framing Java clients use: the 16-byte header
  ``b"\\x82SNAPPY\\x00"``, int32 version 1, int32 compatible version 1, then blocks of
  ``[int32 big-endian compressed length][raw snappy block]``, each block compressing at most 32 KiB of
  input. Read: that framing, or a single raw snappy block (librdkafka may write raw snappy).
* **lz4** — the LZ4 frame format, written as Kafka does: 64 KiB independent blocks, no checksums,
  no content size. Any valid frame (linked blocks, checksums, content size) is read.
* **zstd** — the zstd frame format; frames without a content size in their header (librdkafka
  writes those) and concatenated frames are read.

:func:`decompress` enforces ``max_size`` while it decompresses (bounded output per step, or a
declared size checked before any work), so a decompression bomb costs at most ``max_size`` bytes.
Every failure — corrupt, truncated, or oversized — raises :class:`DecompressionError`.
"""

from __future__ import annotations

import struct
import threading
import zlib
from enum import IntEnum

import lz4.frame
import snappy
import zstandard

__all__ = [
    "CompressionType",
    "DecompressionError",
    "compress",
    "decompress",
]

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """A batch's compression codec, as stored in attributes bits 0–2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """The lowercase name Kafka configs use (``compression.type``)."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse ``none``/``gzip``/``snappy``/``lz4``/``zstd`` (case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(member.label for member in cls)
            raise ValueError(f"unknown compression type {name!r}; valid names: {valid}") from None


class DecompressionError(ValueError):
    """Compressed data is corrupt or truncated, or decompresses past the allowed size."""


_STREAM_CHUNK = 1 << 20  # output bytes per step when a codec streams


# --------------------------------------------------------------------------------------------- gzip

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31  # gzip header and trailer, 32 KiB window


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED,
                                  _GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: Buffer, max_size: int | None) -> bytes:
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    decompressor = zlib.decompressobj(_GZIP_WBITS)
    try:
        while True:
            # max_length bounds each step's output: at most max_size + 1 bytes ever exist.
            chunk = decompressor.decompress(pending, 0 if max_size is None else max_size - total + 1)
            if chunk:
                total += len(chunk)
                if max_size is not None and total > max_size:
                    raise DecompressionError(f"gzip data decompresses to more than {max_size} bytes")
                parts.append(chunk)
            pending = decompressor.unconsumed_tail
            if decompressor.eof:
                rest = decompressor.unused_data
                if not rest:
                    break
                if rest[:2] != _GZIP_MAGIC:
                    raise DecompressionError(f"{len(rest)} bytes of garbage after the gzip data")
                pending = rest
                decompressor = zlib.decompressobj(_GZIP_WBITS)
            elif not chunk and not pending:
                raise DecompressionError("truncated gzip data")
    except zlib.error as exc:
        raise DecompressionError(f"corrupt gzip data: {exc}") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ------------------------------------------------------------------------------------------- snappy

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)
XERIAL_BLOCK_SIZE = 32 * 1024  # bytes of input per block, snappy-java's default
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    pack = _INT32.pack
    raw_compress = snappy.compress
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = raw_compress(view[start : start + XERIAL_BLOCK_SIZE])
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_length(block: Buffer) -> int:
    """The uncompressed length a raw snappy block declares in its uvarint preamble."""
    result = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return result
    raise DecompressionError("corrupt snappy block: bad length preamble")


def _snappy_raw_decompress(block: Buffer, budget: int | None) -> bytes:
    if budget is not None and _snappy_raw_length(block) > budget:
        raise DecompressionError("snappy data decompresses to more than the allowed size")
    try:
        return snappy.decompress(block)
    except Exception as exc:  # python-snappy raises UncompressError; cramjam its own errors
        raise DecompressionError(f"corrupt snappy data: {exc!r}") from exc


def _snappy_decompress(data: Buffer, max_size: int | None) -> bytes:
    view = memoryview(data)
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        return _snappy_raw_decompress(view, max_size)
    # xerial framing; version and compatible version are not checked (some writers get their
    # byte order wrong, and there has only ever been version 1).
    parts: list[bytes] = []
    total = 0
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise DecompressionError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise DecompressionError(f"xerial snappy block of {length} bytes runs past the end")
        budget = None if max_size is None else max_size - total
        block = _snappy_raw_decompress(view[pos : pos + length], budget)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------- lz4


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    return lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def _lz4_decompress(data: Buffer, max_size: int | None) -> bytes:
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        while True:
            # A bounded step also avoids python-lz4's slow, memory-hungry unbounded output growth.
            step = _STREAM_CHUNK if max_size is None else min(_STREAM_CHUNK, max_size - total + 1)
            chunk = decompressor.decompress(pending, step)
            pending = b""
            if chunk:
                total += len(chunk)
                if max_size is not None and total > max_size:
                    raise DecompressionError(f"lz4 data decompresses to more than {max_size} bytes")
                parts.append(chunk)
            if decompressor.eof:
                rest = decompressor.unused_data
                if not rest:
                    break
                pending = rest
                decompressor = lz4.frame.LZ4FrameDecompressor()
            elif decompressor.needs_input:
                raise DecompressionError("truncated lz4 frame")
    except RuntimeError as exc:  # python-lz4 reports liblz4 errors as RuntimeError
        raise DecompressionError(f"corrupt lz4 data: {exc}") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------------------------- zstd

ZSTD_DEFAULT_LEVEL = 3  # Kafka's default compression.zstd.level
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)  # flag 0 means 1 byte when the frame is single-segment
_UINT32_LE = struct.Struct("<I")

_local = threading.local()  # zstandard contexts are not safe for concurrent use: one per thread


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(level=level)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    return _zstd_compressor(ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)


def _zstd_scan(data: memoryview) -> tuple[int, int | None]:
    """Walk the frame and block headers of ``data`` (cheap: a few bytes per 128 KiB block).

    Returns ``(frames, declared)``: the number of zstd frames and the sum of their declared content
    sizes (None when a frame does not declare one). Raises DecompressionError for truncated input or
    bytes that are not zstd frames — libzstd's streaming API silently stops at a truncated frame."""
    end = len(data)
    if end == 0:
        raise DecompressionError("empty zstd data")
    pos = 0
    frames = 0
    declared: int | None = 0
    while pos < end:
        if end - pos < 5:
            raise DecompressionError("truncated zstd frame header")
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 8:
                raise DecompressionError("truncated zstd skippable frame")
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
            if pos > end:
                raise DecompressionError("truncated zstd skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressionError(f"not a zstd frame at byte {pos} (magic {magic:#010x})")
        descriptor = data[pos + 4]
        if descriptor & 0x08:
            raise DecompressionError("corrupt zstd frame header: reserved bit set")
        single_segment = descriptor & 0x20
        content_size_flag = descriptor >> 6
        content_size_size = _ZSTD_CONTENT_SIZE_SIZES[content_size_flag] or (1 if single_segment else 0)
        window_descriptor_size = 0 if single_segment else 1
        header_size = 1 + window_descriptor_size + _ZSTD_DICT_ID_SIZES[descriptor & 3] + content_size_size
        pos += 4
        if end - pos < header_size:
            raise DecompressionError("truncated zstd frame header")
        if content_size_size and declared is not None:
            start = pos + header_size - content_size_size
            size = int.from_bytes(data[start : pos + header_size], "little")
            declared += size + 256 if content_size_size == 2 else size
        else:
            declared = None
        pos += header_size
        while True:  # blocks
            if end - pos < 3:
                raise DecompressionError("truncated zstd block header")
            block_header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            pos += 3
            block_type = (block_header >> 1) & 3
            if block_type == 1:  # RLE: one byte repeated block_size times
                pos += 1
            elif block_type == 3:
                raise DecompressionError("corrupt zstd block: reserved block type")
            else:  # raw or compressed: block_size bytes of content
                pos += block_header >> 3
            if pos > end:
                raise DecompressionError("truncated zstd block")
            if block_header & 1:  # last block
                break
        if descriptor & 0x04:  # content checksum
            pos += 4
            if pos > end:
                raise DecompressionError("truncated zstd frame checksum")
        frames += 1
    if frames == 0:
        raise DecompressionError("zstd data holds no frame")
    return frames, declared


def _zstd_decompress(data: Buffer, max_size: int | None) -> bytes:
    view = memoryview(data)
    frames, declared = _zstd_scan(view)
    if declared is not None and max_size is not None and declared > max_size:
        raise DecompressionError(f"zstd data declares {declared} bytes, more than {max_size}")
    decompressor = _zstd_decompressor()
    try:
        if frames == 1 and declared is not None:
            # One frame of known size: a single-shot decompression into a buffer of that size.
            return decompressor.decompress(view)
        # No declared size (librdkafka) or several frames: stream with bounded reads.
        parts: list[bytes] = []
        total = 0
        with decompressor.stream_reader(view, read_across_frames=True) as reader:
            while True:
                step = _STREAM_CHUNK if max_size is None else min(_STREAM_CHUNK, max_size - total + 1)
                chunk = reader.read(step)
                if not chunk:
                    break
                total += len(chunk)
                if max_size is not None and total > max_size:
                    raise DecompressionError(f"zstd data decompresses to more than {max_size} bytes")
                parts.append(chunk)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"corrupt zstd data: {exc}") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ---------------------------------------------------------------------------------------------- API


def compress(codec: CompressionType | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` in the byte format Kafka clients write.

    ``level`` is the codec's compression level (gzip 0–9, lz4 0–16, zstd −131072–22); None takes the
    codec's default (Kafka's: gzip 6, lz4 0 (fast), zstd 3). Snappy has no levels."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return _gzip_compress(data, level)
    if codec == CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec == CompressionType.LZ4:
        return _lz4_compress(data, level)
    if codec == CompressionType.ZSTD:
        return _zstd_compress(data, level)
    raise ValueError(f"unknown compression codec {codec!r}")


def decompress(codec: CompressionType | int, data: Buffer, max_size: int | None = None) -> bytes:
    """Decompress ``data`` compressed with ``codec``.

    Raises DecompressionError if the data is corrupt or truncated, if ``codec`` is unknown, or if
    the output would exceed ``max_size`` bytes (checked while decompressing, never after)."""
    if max_size is not None and max_size < 0:
        raise ValueError(f"max_size must not be negative: {max_size}")
    if codec == CompressionType.NONE:
        if max_size is not None and len(data) > max_size:
            raise DecompressionError(f"{len(data)} bytes exceed the allowed {max_size}")
        return bytes(data)
    if codec == CompressionType.GZIP:
        return _gzip_decompress(data, max_size)
    if codec == CompressionType.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == CompressionType.LZ4:
        return _lz4_decompress(data, max_size)
    if codec == CompressionType.ZSTD:
        return _zstd_decompress(data, max_size)
    raise DecompressionError(f"unknown compression codec {codec!r}")
