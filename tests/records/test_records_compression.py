"""Compression codecs (kctl.records.compression): names, formats, round trips, corruption, bombs."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec

from kctl.records.compression import (
    XERIAL_BLOCK_SIZE,
    CompressionType,
    DecompressionError,
    compress,
    decompress,
)

CODECS = list(CompressionType)
COMPRESSED = [codec for codec in CompressionType if codec != CompressionType.NONE]

PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 50,
    "random": os.urandom(100_000),
    "large": (bytes(range(256)) * 4 + os.urandom(64)) * 300,  # ~320 KiB, several blocks
}


# ----------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("none", CompressionType.NONE),
        ("gzip", CompressionType.GZIP),
        ("Snappy", CompressionType.SNAPPY),
        ("LZ4", CompressionType.LZ4),
        ("zStd", CompressionType.ZSTD),
    ],
)
def test_from_name(name: str, expected: CompressionType) -> None:
    assert CompressionType.from_name(name) is expected


def test_from_name_rejects_unknown_with_valid_names() -> None:
    with pytest.raises(ValueError, match="none, gzip, snappy, lz4, zstd") as info:
        CompressionType.from_name("brotli")
    assert "brotli" in str(info.value)


def test_ids_and_labels_match_kafka() -> None:
    assert [(int(c), c.label) for c in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]


# ----------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.label)
@pytest.mark.parametrize("payload", list(PAYLOADS), ids=str)
def test_round_trip(codec: CompressionType, payload: str) -> None:
    data = PAYLOADS[payload]
    compressed = compress(codec, data)
    assert isinstance(compressed, bytes)
    assert decompress(codec, compressed) == data
    assert decompress(codec, bytearray(compressed)) == data
    assert decompress(codec, memoryview(compressed)) == data
    assert decompress(codec, compressed, max_size=len(data)) == data  # exactly at the limit is fine


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
def test_compress_accepts_memoryview_slices(codec: CompressionType) -> None:
    buffer = bytearray(b"HEADER" + PAYLOADS["text"])
    with memoryview(buffer) as view, view[6:] as body:
        compressed = compress(codec, body)
    assert decompress(codec, compressed) == PAYLOADS["text"]


@pytest.mark.parametrize(("codec", "level"), [(CompressionType.GZIP, 1), (CompressionType.GZIP, 9),
                                              (CompressionType.LZ4, 9), (CompressionType.ZSTD, 1),
                                              (CompressionType.ZSTD, 19)])
def test_compression_levels(codec: CompressionType, level: int) -> None:
    data = PAYLOADS["large"]
    assert decompress(codec, compress(codec, data, level=level)) == data


# ---------------------------------------------------------------------------------------- formats


def test_gzip_writes_gzip_format() -> None:
    compressed = compress(CompressionType.GZIP, PAYLOADS["text"])
    assert compressed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(compressed) == PAYLOADS["text"]


def test_gzip_reads_concatenated_members() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, data) == b"first second"


def test_snappy_writes_xerial_framing() -> None:
    data = PAYLOADS["large"]
    compressed = compress(CompressionType.SNAPPY, data)
    assert compressed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, pos)
        blocks.append(snappy.decompress(compressed[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(compressed)
    assert b"".join(blocks) == data
    assert all(len(block) == XERIAL_BLOCK_SIZE == 32 * 1024 for block in blocks[:-1])
    assert 0 < len(blocks[-1]) <= XERIAL_BLOCK_SIZE
    assert len(blocks) == -(-len(data) // XERIAL_BLOCK_SIZE)


def test_snappy_reads_raw_and_kafka_python_xerial() -> None:
    data = PAYLOADS["large"]
    assert decompress(CompressionType.SNAPPY, snappy.compress(data)) == data
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(data)) == data
    # and kafka-python reads ours
    assert kafka_codec.snappy_decode(compress(CompressionType.SNAPPY, data)) == data


def test_lz4_writes_kafka_style_frame() -> None:
    compressed = compress(CompressionType.LZ4, PAYLOADS["large"])
    assert compressed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flags, block_descriptor = compressed[4], compressed[5]
    assert flags >> 6 == 1  # version 01
    assert flags & 0x20  # independent blocks: Kafka's Java reader decodes blocks one by one
    assert not flags & 0x10  # no block checksums
    assert not flags & 0x08  # no content size
    assert not flags & 0x04  # no content checksum
    assert (block_descriptor >> 4) & 0x7 == 4  # 64 KiB maximum block size


def test_lz4_reads_any_frame_options() -> None:
    data = PAYLOADS["large"]
    linked = lz4.frame.compress(data, block_linked=True, content_checksum=True, store_size=True)
    assert decompress(CompressionType.LZ4, linked) == data
    assert decompress(CompressionType.LZ4, linked + linked) == data + data


def test_zstd_reads_frames_without_content_size() -> None:
    data = PAYLOADS["large"]
    compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = compressor.compress(data) + compressor.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, frame) == data
    assert decompress(CompressionType.ZSTD, frame, max_size=len(data)) == data


def test_zstd_reads_concatenated_frames_and_checksums() -> None:
    one = zstandard.ZstdCompressor(write_checksum=True).compress(b"alpha " * 100)
    two = zstandard.ZstdCompressor(write_content_size=False).compress(b"beta " * 100)
    assert decompress(CompressionType.ZSTD, one + two) == b"alpha " * 100 + b"beta " * 100


def test_zstd_writes_content_size() -> None:
    compressed = compress(CompressionType.ZSTD, PAYLOADS["text"])
    assert zstandard.get_frame_parameters(compressed).content_size == len(PAYLOADS["text"])


# ------------------------------------------------------------------------------------- corruption


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
@pytest.mark.parametrize("cut", [1, 7, 0.5])
def test_truncated_input_raises(codec: CompressionType, cut: float) -> None:
    compressed = compress(codec, PAYLOADS["large"])
    end = int(len(compressed) * cut) if isinstance(cut, float) else len(compressed) - cut
    with pytest.raises(DecompressionError):
        decompress(codec, compressed[:end])


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
@pytest.mark.parametrize("garbage", [b"", b"\xff", b"definitely not compressed data" * 3, os.urandom(300)])
def test_garbage_raises(codec: CompressionType, garbage: bytes) -> None:
    with pytest.raises(DecompressionError):
        decompress(codec, garbage)


def test_gzip_corrupt_byte_detected_by_its_crc() -> None:
    compressed = bytearray(compress(CompressionType.GZIP, PAYLOADS["random"]))
    compressed[len(compressed) // 2] ^= 0xFF
    with pytest.raises(DecompressionError):
        decompress(CompressionType.GZIP, bytes(compressed))


def test_gzip_trailing_garbage_raises() -> None:
    with pytest.raises(DecompressionError, match="garbage"):
        decompress(CompressionType.GZIP, gzip.compress(b"data") + b"junk")


def test_xerial_block_length_past_end_raises() -> None:
    compressed = bytearray(compress(CompressionType.SNAPPY, PAYLOADS["text"]))
    struct.pack_into(">i", compressed, 16, len(compressed))
    with pytest.raises(DecompressionError, match="runs past the end"):
        decompress(CompressionType.SNAPPY, bytes(compressed))


def test_unknown_codec() -> None:
    with pytest.raises(DecompressionError, match="unknown"):
        decompress(7, b"abc")
    with pytest.raises(ValueError, match="unknown"):
        compress(5, b"abc")


def test_decompression_error_is_value_error() -> None:
    assert issubclass(DecompressionError, ValueError)


# ---------------------------------------------------------------------------- decompression bombs

BOMB_SIZE = 64 << 20  # 64 MiB of zeros
LIMIT = 1 << 20


@pytest.fixture(scope="module")
def zeros() -> bytes:
    return bytes(BOMB_SIZE)


def _bomb(codec: CompressionType, zeros: bytes) -> bytes:
    if codec == CompressionType.ZSTD:
        # no content size in the header: the declared-size check cannot help, streaming must
        compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
        return compressor.compress(zeros) + compressor.flush()
    return compress(codec, zeros)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.label)
def test_bomb_exceeding_max_size_raises(codec: CompressionType, zeros: bytes) -> None:
    bomb = _bomb(codec, zeros)
    assert len(bomb) < BOMB_SIZE // 20
    with pytest.raises(DecompressionError, match=r"more than|allowed"):
        decompress(codec, bomb, max_size=LIMIT)


@pytest.mark.parametrize(
    "codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD], ids=lambda c: c.label
)
def test_bomb_guard_is_enforced_while_streaming(codec: CompressionType, zeros: bytes) -> None:
    """The guard must stop decompression early: peak memory stays near max_size, not 64 MiB."""
    bomb = _bomb(codec, zeros)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError):
            decompress(codec, bomb, max_size=LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * LIMIT


def test_zstd_declared_content_size_checked_before_decompressing() -> None:
    bomb = compress(CompressionType.ZSTD, bytes(BOMB_SIZE))
    with pytest.raises(DecompressionError, match="declares"):
        decompress(CompressionType.ZSTD, bomb, max_size=LIMIT)


def test_snappy_raw_declared_length_checked_before_decompressing() -> None:
    # A raw snappy block declaring 2 GiB of output (uvarint preamble), followed by nothing useful.
    lying = b"\x80\x80\x80\x80\x08" + b"\x00" * 16
    with pytest.raises(DecompressionError, match="allowed size"):
        decompress(CompressionType.SNAPPY, lying, max_size=LIMIT)


def test_snappy_xerial_blocks_counted_against_max_size() -> None:
    data = bytes(4 * XERIAL_BLOCK_SIZE)
    compressed = compress(CompressionType.SNAPPY, data)
    assert decompress(CompressionType.SNAPPY, compressed, max_size=len(data)) == data
    with pytest.raises(DecompressionError):
        decompress(CompressionType.SNAPPY, compressed, max_size=len(data) - 1)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.label)
def test_max_size_one_below_output_raises(codec: CompressionType) -> None:
    data = PAYLOADS["text"]
    with pytest.raises(DecompressionError):
        decompress(codec, compress(codec, data), max_size=len(data) - 1)
